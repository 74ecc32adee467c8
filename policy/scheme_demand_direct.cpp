// Scheme `demand_direct`: one direct transfer per (owner, requester) carrying the union of the
// KV blocks it needs; host-staged where P2P is unavailable.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

Result<CommPlan> scheme_demand_direct(const LayerInput& in, const Params& p) {
  const Demand d = compute_demand(in, param(p, "split_text", 1) != 0);
  const int P = d.ranks;
  const bool staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  std::vector<int> req;
  if (in.dynamic) req = add_discovery(plan, in, d, staged, true);
  add_text_partials(plan, d, add_local_tasks(plan, d), staged);
  // Shifted order (owner o serves o+1, o+2, ...), as NCCL's pairwise all-to-all does, so that
  // the copy-engine queues of the owners do not all serve the same requester first (incast).
  for (int sh = 1; sh < P; ++sh)
    for (int o = 0; o < P; ++o) {
      const int g = (o + sh) % P;
      const size_t go = static_cast<size_t>(g) * P + o;
      if (d.bytes[go] <= 0) continue;
      Message m;
      m.src = o;
      m.dst = g;
      m.bytes = d.bytes[go];
      m.host_staged = staged;
      m.kv_blocks = d.blocks[go];
      m.tag = "kv";
      if (!req.empty()) m.after_msgs.push_back(req[go]);
      const int id = add_msg(plan, std::move(m));
      AttentionTask t{g, d.flops[go], 0, {id}, "remote"};
      t.what.kv_ranks = {o};
      if (d.flops[go] > 0) add_task(plan, std::move(t));
    }
  return plan;
}

const RegisterScheme kRegistered{
    {"demand_direct",
     "one direct transfer per (owner, requester) with the union of the needed KV "
     "blocks; host-staged where P2P is unavailable",
     5, scheme_demand_direct}};

}  // namespace
}  // namespace sparsp::policy::detail
