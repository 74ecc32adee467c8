// Scheme `ring`: Ring attention (Liu et al. 2023; ring-flash-attn): P-1 steps; at step s rank r
// forwards the KV shard it received at step s-1 (its own at s=1) to rank r+1 and computes on the
// shard received.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

// skip_empty: owner o's shard stops at the last rank along the ring that needs any of it.
// merge_bytes_per_element: each step's partial output (the rank's tokens x heads x head_dim) is
// merged into the float32 accumulator by LSE after the step's piece (a `copy` task of that many
// bytes per element; default kRingMergeBytesPerElement, 0: none).
Result<CommPlan> scheme_ring(const LayerInput& in, const Params& p) {
  const Demand d = compute_demand(in);
  const int P = d.ranks;
  const bool skip = param(p, "skip_empty", 0) != 0;
  const bool staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  add_local_tasks(plan, d);
  std::vector<int> ring(static_cast<size_t>(P));
  std::iota(ring.begin(), ring.end(), 0);
  std::vector<double> elements(static_cast<size_t>(P), 0.0);  // output elements per rank
  for (int k = 0; k < in.layout->num_blocks; ++k)
    elements[static_cast<size_t>(in.placement->block_owner[static_cast<size_t>(k)])] +=
        static_cast<double>(in.layout->tokens_in_block[static_cast<size_t>(k)]) * in.model->heads *
        in.model->head_dim;
  for (int o = 0; o < P; ++o) {
    RingShard shard;
    shard.owner = o;
    for (int k = 0; k < in.layout->num_blocks; ++k)
      if (in.placement->block_owner[static_cast<size_t>(k)] == o) {
        shard.bytes += detail::kv_block_bytes(*in.model, *in.layout, k);
        shard.kv_blocks.push_back(k);
      }
    shard.last_step = P - 1;
    shard.merge_bytes_per_element = ring_merge_bytes_per_element(p);
    shard.merge_elements_at = elements;
    if (skip) {
      shard.last_step = 0;
      for (int s = 1; s < P; ++s)
        if (!d.blocks[static_cast<size_t>((o + s) % P) * P + o].empty()) shard.last_step = s;
    }
    std::vector<double> flops_at(static_cast<size_t>(P));
    for (int x = 0; x < P; ++x)
      flops_at[static_cast<size_t>(x)] = d.flops[static_cast<size_t>(x) * P + o];
    add_ring_stage(plan, ring, shard, flops_at, /*keep_empty_tasks=*/false, staged);
  }
  chain_ring_merges(plan);
  return plan;
}

const RegisterScheme kRegistered{
    {"ring",
     "ring attention: P-1 shard-forwarding steps overlapped with attention, each step's "
     "partial output merged by LSE (merge_bytes_per_element, default 18.4; skip_empty=1 "
     "stops a shard after the last rank needing it)",
     0, scheme_ring}};

}  // namespace
}  // namespace sparsp::policy::detail
