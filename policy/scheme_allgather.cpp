// Scheme `allgather`: NCCL ring all-gather of every KV shard (P-1 forwarding steps), then attention
// on all of it.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

Result<CommPlan> scheme_allgather(const LayerInput& in, const Params& p) {
  Params q = p;
  q["skip_empty"] = 0;
  auto ring = make_scheme("ring", in, q);  // the ring's messages, every shard all the way
  if (!ring) return ring.error();
  const Demand d = compute_demand(in);
  const int P = d.ranks;
  CommPlan plan;
  plan.messages = ring->messages;
  // One NCCL ring all-gather of P ranks; its nccl-tests size is the gathered buffer (every shard
  // once: the P - 1 hops of each shard carry it P - 1 times).
  double gathered = 0;
  for (const auto& m : plan.messages) gathered += m.bytes;
  gathered /= std::max(1, P - 1);
  for (auto& m : plan.messages) {
    m.phase = 0;
    m.tag = "allgather";
    m.nccl = {gathered > 0 && P > 1, sim::nccl::Collective::all_gather, P, gathered};
  }
  add_local_tasks(plan, d);
  for (int g = 0; g < P; ++g) {
    double f = 0;
    for (int o = 0; o < P; ++o)
      if (o != g) f += d.flops[static_cast<size_t>(g) * P + o];
    AttentionTask t{g, f, 0, {}, "remote"};
    for (int o = 0; o < P; ++o)
      if (o != g) t.what.kv_ranks.push_back(o);
    for (size_t i = 0; i < plan.messages.size(); ++i)
      if (plan.messages[i].dst == g || plan.messages[i].src == g)
        t.after_msgs.push_back(static_cast<int>(i));
    if (f > 0) add_task(plan, std::move(t));
  }
  return plan;
}

const RegisterScheme kRegistered{
    {"allgather", "NCCL ring all-gather of all KV, then attention", 1, scheme_allgather}};

}  // namespace
}  // namespace sparsp::policy::detail
