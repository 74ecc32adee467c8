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
// out_cast_bytes_per_element (default 0): the accumulator's float32 casts, one copy task per rank
// after its pieces and merges (scheme_parts.hpp).
// seq_a2a_copies=1 (default 0): the layout copies xDiT's ring still runs at Ulysses degree 1.
// xFuserLongContextAttention.forward (xfuser/core/long_ctx_attention/hybrid/attn_layer.py, xDiT
// 7c5fa1d and 0058bb0) calls yunchang's SeqAllToAll4D on q, k, v and on the output whatever the
// Ulysses degree; all_to_all_4D (yunchang/comm/all_to_all.py, 582a9f9 .. 0665d0a) skips
// all_to_all_single at degree 1 but keeps both transposes and their .contiguous():
// - output path (scatter 1, gather 2): (bs, s, h, d) -> (1, h, s, bs, d) -> (bs, s, h, d), a real
//   copy twice at any batch: 2 copies x 2 (read + written) x tokens x heads x head_dim x dtype;
// - q/k/v path (scatter 2, gather 1): transpose(0, 2) swaps the batch with the size-1 degree
//   dimension, then transpose(0, 1) swaps it back: real copies only at batch > 1 (CFG "batch2",
//   the only batch the model JSON gives): 2 copies x 2 x tokens x (heads + 2 kv_heads) x
//   head_dim x dtype, before the rank's attention pieces (explicitly) and its shard's first send
//   (phase -1: by the runtime's stream order under sync and sm_overlap:high_priority_comm=0, the
//   way xDiT runs it; other runtimes may start that send during the copy). (At batch 1 the
//   first copy is still real for an input that is not contiguous in (bs, s, h, d), e.g. xDiT's
//   CogVideoX processor passes k and v as transposed slices; not charged.)
Result<CommPlan> scheme_ring(const LayerInput& in, const Params& p) {
  const Demand d = compute_demand(in);
  const int P = d.ranks;
  const bool skip = param(p, "skip_empty", 0) != 0;
  const bool staged = param(p, "host_staged", 0) != 0;
  const bool seq_copies = param(p, "seq_a2a_copies", 0) != 0;
  const double hb = static_cast<double>(in.model->head_dim) * in.model->dtype_bytes;
  CommPlan plan;
  std::vector<double> tokens(static_cast<size_t>(P), 0.0);  // query tokens per rank
  for (int k = 0; k < in.layout->num_blocks; ++k)
    tokens[static_cast<size_t>(in.placement->block_owner[static_cast<size_t>(k)])] +=
        in.layout->tokens_in_block[static_cast<size_t>(k)];
  // The q/k/v layout copies (CFG batch2 only), ahead of everything on the rank.
  std::vector<int> qkv_copy(static_cast<size_t>(P), -1);
  if (seq_copies && in.model->pipeline.cfg == "batch2")
    for (int x = 0; x < P; ++x) {
      AttentionTask c{x, 0, -1, {}, "seq_a2a_qkv"};
      c.what.kind = sim::TaskKind::copy;
      c.what.copy_kind = sim::CopyKind::transpose;
      c.what.bytes = 4.0 * tokens[static_cast<size_t>(x)] *
                     (in.model->heads + 2.0 * in.model->kv_heads_or_heads()) * hb;
      if (c.what.bytes > 0) qkv_copy[static_cast<size_t>(x)] = add_task(plan, std::move(c));
    }
  auto after_copy = [&](int x) {
    const int c = qkv_copy[static_cast<size_t>(x)];
    return c >= 0 ? std::vector<int>{c} : std::vector<int>{};
  };
  for (int ti : add_local_tasks(plan, d))
    if (ti >= 0)
      plan.tasks[static_cast<size_t>(ti)].after_tasks =
          after_copy(plan.tasks[static_cast<size_t>(ti)].rank);
  std::vector<int> ring(static_cast<size_t>(P));
  std::iota(ring.begin(), ring.end(), 0);
  std::vector<double> elements(static_cast<size_t>(P), 0.0);  // output elements per rank
  for (int x = 0; x < P; ++x)
    elements[static_cast<size_t>(x)] =
        tokens[static_cast<size_t>(x)] * in.model->heads * in.model->head_dim;
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
    const auto stage =
        add_ring_stage(plan, ring, shard, flops_at, /*keep_empty_tasks=*/false, staged);
    for (int ti : stage.tasks)  // each piece reads the rank's copied q
      if (ti >= 0) {
        auto& t = plan.tasks[static_cast<size_t>(ti)];
        for (int c : after_copy(t.rank)) t.after_tasks.push_back(c);
      }
  }
  chain_ring_merges(plan);
  // After each rank's pieces and merges: the accumulator's casts, then the output layout copies.
  const double cast = out_cast_bytes_per_element(p);
  if (!(cast > 0) && !seq_copies) return plan;  // the default: nothing after the pieces
  // Each rank's pieces and merges, in one pass over the plan.
  std::vector<std::vector<int>> pieces_of(static_cast<size_t>(P));
  for (size_t i = 0; i < plan.tasks.size(); ++i)
    if (plan.tasks[i].tag != "seq_a2a_qkv")
      pieces_of[static_cast<size_t>(plan.tasks[i].rank)].push_back(static_cast<int>(i));
  for (int x = 0; x < P; ++x) {
    std::vector<int> mine = std::move(pieces_of[static_cast<size_t>(x)]);
    if (mine.empty()) mine = after_copy(x);
    if (const int c = add_out_cast(plan, x, cast * elements[static_cast<size_t>(x)], P, mine);
        c >= 0)
      mine = {c};
    if (!seq_copies) continue;
    AttentionTask c{x, 0, P, {}, "seq_a2a_out"};
    c.after_tasks = mine;
    c.what.kind = sim::TaskKind::copy;
    c.what.copy_kind = sim::CopyKind::transpose;
    c.what.bytes = 4.0 * tokens[static_cast<size_t>(x)] * in.model->heads * hb;
    if (c.what.bytes > 0) add_task(plan, std::move(c));
  }
  return plan;
}

const RegisterScheme kRegistered{
    {"ring",
     "ring attention: P-1 shard-forwarding steps overlapped with attention, each step's "
     "partial output merged by LSE (merge_bytes_per_element, default 18.4; skip_empty=1 "
     "stops a shard after the last rank needing it; xDiT's copies, default off: "
     "seq_a2a_copies=1 charges yunchang all_to_all_4D's layout copies at Ulysses degree 1, "
     "out_cast_bytes_per_element=12 the accumulator's float32 casts)",
     0, scheme_ring}};

}  // namespace
}  // namespace sparsp::policy::detail
