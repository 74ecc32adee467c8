// Scheme `demand_alltoall`: DSV-style index exchange, then one uneven NCCL all-to-all of exactly
// the demanded KV.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

// DSV (Tan et al. 2025): exchange request indices (an all-to-all of counts and ids), then one
// uneven NCCL all-to-all carrying exactly the demanded KV; a rank's remote attention starts when
// its all-to-all (sends and receives, one NCCL group) has completed.
Result<CommPlan> scheme_demand_alltoall(const LayerInput& in, const Params& p) {
  const Demand d = compute_demand(in, param(p, "split_text", 1) != 0);
  const int P = d.ranks;
  const bool staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  const std::vector<int> req = add_discovery(plan, in, d, staged, in.dynamic);
  for (auto& m : plan.messages) m.collective = true;
  std::vector<int> discovery_ids(plan.messages.size()), kv_ids;
  std::iota(discovery_ids.begin(), discovery_ids.end(), 0);
  tag_alltoall(plan, discovery_ids, P);
  add_text_partials(plan, d, add_local_tasks(plan, d), staged);
  std::vector<std::vector<int>> involved(static_cast<size_t>(P));
  for (int sh = 1; sh < P; ++sh)  // shifted pairwise order, as NCCL's all-to-all
    for (int o = 0; o < P; ++o) {
      const int g = (o + sh) % P;
      const size_t go = static_cast<size_t>(g) * P + o;
      if (d.bytes[go] <= 0) continue;
      Message m;
      m.src = o;
      m.dst = g;
      m.bytes = d.bytes[go];
      m.collective = true;
      m.host_staged = staged;
      m.kv_blocks = d.blocks[go];
      m.tag = "a2a_kv";
      for (int x = 0; x < P; ++x)  // the owner knows all requests once the index a2a is done
        if (x != o) m.after_msgs.push_back(req[static_cast<size_t>(x) * P + o]);
      const int id = add_msg(plan, std::move(m));
      kv_ids.push_back(id);
      involved[static_cast<size_t>(g)].push_back(id);
      involved[static_cast<size_t>(o)].push_back(id);
    }
  tag_alltoall(plan, kv_ids, P);
  for (int g = 0; g < P; ++g) {
    double f = 0;
    for (int o = 0; o < P; ++o)
      if (o != g) f += d.flops[static_cast<size_t>(g) * P + o];
    AttentionTask t{g, f, 0, involved[static_cast<size_t>(g)], "remote"};
    for (int o = 0; o < P; ++o)
      if (o != g && d.flops[static_cast<size_t>(g) * P + o] > 0) t.what.kv_ranks.push_back(o);
    if (f > 0) add_task(plan, std::move(t));
  }
  return plan;
}

const RegisterScheme kRegistered{
    {"demand_alltoall",
     "DSV: index exchange, then one uneven NCCL all-to-all of exactly the "
     "demanded KV",
     4, scheme_demand_alltoall}};

}  // namespace
}  // namespace sparsp::policy::detail
