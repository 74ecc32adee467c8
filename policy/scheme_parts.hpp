#pragma once
// Private: building blocks the communication schemes share (policy/scheme_*.cpp): appending
// messages and attention pieces to a CommPlan, the local pieces, text-query partial outputs, a KV
// shard's trip around a ring, the demand-discovery exchange and the Ulysses all-to-all with its
// ring stage (USP; plain Ulysses is its Ulysses degree P).
#include <cstdint>
#include <vector>

#include "demand.hpp"
#include "registry.hpp"

namespace sparsp::policy::detail {

/// Appends `m` / `t` to the plan; returns its index.
int add_msg(CommPlan& plan, Message m);
int add_task(CommPlan& plan, AttentionTask t);
/// Tags messages `ids` as one NCCL all-to-all (or grouped send/recv, `op`) of `ranks` ranks: the
/// nccl-tests size of each is its source's bytes sent among `ids` x ranks / (ranks - 1) (the
/// send buffer, the rank's own part included, as if even).
void tag_alltoall(CommPlan& plan, const std::vector<int>& ids, int ranks,
                  sim::nccl::Collective op = sim::nccl::Collective::all_to_all);

// Local attention piece of every rank (its queries against its own KV blocks). Returns the task
// index per rank (-1 where there is no local work).
std::vector<int> add_local_tasks(CommPlan& plan, const Demand& d);

// Partial text-query outputs back to the text owner, after the sender's local piece (which holds
// its text-query work).
void add_text_partials(CommPlan& plan, const Demand& d, const std::vector<int>& local, bool staged);

// Ring attention (Liu et al. 2023; ring-flash-attn): P-1 steps; at step s rank r forwards the KV
// shard it received at step s-1 (its own at s=1) to rank r+1 and computes on the shard received.

// One KV shard's trip around a ring (used by `ring` and by USP's ring stage).
struct RingShard {
  int owner = 0;                   // ring position of the shard's owner
  int last_step = 0;               // forwarding steps taken (ring size - 1 unless cut short)
  double bytes = 0;                // shard size, bytes
  std::vector<int32_t> kv_blocks;  // blocks carried (empty where not tracked block by block)
  std::vector<int> first_after;    // messages the step-1 send waits for
  sim::TaskCompute what;           // coverage of the step tasks (kv_ranks empty: the owner's)
  // The merge of each step's partial output into the rank's float32 accumulator by log-sum-exp
  // (ring-flash-attention / yunchang `update_out_and_lse`): bytes per output element merged
  // (kRingMergeBytesPerElement unless the policy's merge_bytes_per_element; 0: no merge tasks),
  // and the output elements merged at each ring position (query tokens x heads x head_dim of
  // that rank's piece; empty: none).
  double merge_bytes_per_element = 0;
  std::vector<double> merge_elements_at;
};

// The task indices one shard's trip adds, per step s (index s; -1 where none): the attention
// piece and the merge after it.
struct RingStage {
  std::vector<int> tasks;
  std::vector<int> merges;
};

// At step s = 1..last_step the rank at ring position owner+s-1 forwards the shard to the one at
// owner+s (after the step s-1 message; step 1 after `first_after`), which then computes
// `flops_at[owner+s]` on it and, where shard.merge_bytes_per_element x merge_elements_at[owner+s]
// > 0, merges that partial output (a memory-bound `copy` task of that many bytes, tag
// "ring_merge", after the piece). `ring[q]` is the rank at position q. Zero-FLOP pieces (and
// their merges) are skipped unless `keep_empty_tasks`.
RingStage add_ring_stage(CommPlan& plan, const std::vector<int>& ring, const RingShard& shard,
                         const std::vector<double>& flops_at, bool keep_empty_tasks, bool staged);

// The ring merge's bytes per output element, the default of the policy parameter
// merge_bytes_per_element: 18.4, the torch.jit.script merge (out - sigmoid(block_lse - lse) *
// (out - block_out), float32 out and lse, bf16 block_out) timed on an H200 at HunyuanVideo
// shapes, 0.766 ms for 57,600 tokens x 24 heads x 128 (ring degree 2; 18.35 at degree 4), times
// the H200's measured float32 copy bandwidth (4,244 GB/s read + written) over the elements
// (python/examples/ring_merge_cost.py, sim/results/ring-merge-h200.json, sim/RESULTS.md "the ring
// merge of partial outputs"). Measured on the H200 only; other GPUs get it through their memory
// bandwidth (ComputeModel::copy_time_s). Eager PyTorch: 48.2.
constexpr double kRingMergeBytesPerElement = 18.4;

// Chains each rank's ring-merge tasks in step order (each after the rank's previous merge: one
// float32 accumulator, updated in place step after step).
void chain_ring_merges(CommPlan& plan);

// The policy's merge_bytes_per_element (default kRingMergeBytesPerElement).
double ring_merge_bytes_per_element(const Params& p);

// The partial-output accumulator's casts, policy parameter out_cast_bytes_per_element (default
// 0: not charged; read by ring, usp and ulysses). yunchang's ring function
// (yunchang/ring/utils.py update_out_and_lse; xDiT's xdit_ring_flash_attn_forward,
// xfuser/core/long_ctx_attention/ring/ring_flash_attn.py at 7c5fa1d) casts the first step's
// block_out to float32 (`block_out.to(torch.float32)`: dtype read + 4 B written per element) and
// casts the accumulator back at the end (`out.to(q.dtype)`: 4 B read + dtype written), so
// 2 x (dtype_bytes + 4) = 12 B per output element in bf16, whatever the ring degree. xDiT runs
// Ulysses through the same function with a ring of one, so this is all a Ulysses "merge" costs.
// The ring's merge_bytes_per_element (18.4, timed) covers the steps after the first only.
double out_cast_bytes_per_element(const Params& p);

// Appends rank x's cast task (kind copy, tag "out_cast", `bytes`, `phase`) after `after`;
// returns its index, or -1 (nothing added) when bytes <= 0.
int add_out_cast(CommPlan& plan, int x, double bytes, int phase, std::vector<int> after);

// Index bytes per requested (block) entry: one int32.
constexpr double kIndexBytes = 4.0;

// Control for dynamic patterns: every owner sends its pooled K block summaries (one head_dim
// vector per head and block, as VSA/SpargeAttn pool them) to every rank, which scores its pooled
// Q against them; then each requester sends the owner its request list. Returns, per (g, o),
// the id of the request message (the owner's KV send waits for it), or -1.
std::vector<int> add_discovery(CommPlan& plan, const LayerInput& in, const Demand& d, bool staged,
                               bool summaries);

// DeepSpeed-Ulysses (Jacobs et al. 2023): all-to-all of Q, K, V so each rank holds all tokens of
// H/u heads, attention, all-to-all of the output back. USP (Fang & Zhao 2024, xDiT): u x r = P;
// ranks j*u .. j*u+u-1 form Ulysses group j; after the all-to-all, rank (j, i) rings the KV of
// sequence shard j, head group i, with ranks (j', i) of the other groups.
// K and V heads each all-to-all carries in all, with `kv_heads` K/V heads (grouped-query
// attention) and Ulysses degree u: kv_heads when u divides it; u when kv_heads < u divides u
// (each K/V head replicated u / kv_heads times before the all-to-all, one per rank, as
// DeepSpeed-Ulysses' GQA support and Megatron's repeat_kv do; yunchang itself requires kv_heads
// divisible by u: yunchang/comm/all_to_all.py all_to_all_4D reshapes hc into (P, hc / P), and
// its README says Ulysses "is not suitable for GQA"); -1 when neither divides the other.
int ulysses_kv_heads(int heads, int kv_heads, int u);

// Copies: u > 1 adds, per rank, the transposes + .contiguous() copies of
// yunchang/comm/all_to_all.py all_to_all_4D around each all-to-all (kind copy, bytes read +
// written): before the all-to-all in 2 x tokens x (H + 2 kv) x head_dim x dtype, after it the same
// over the rank's sequence group and 1/u of the heads; around the output all-to-all the output
// (H heads) likewise. xDiT's USP (xfuser/core/long_ctx_attention/hybrid/attn_layer.py) calls the
// same yunchang SeqAllToAll4D.
// Ring merges: after each ring step's piece, rank (j, i) merges its partial output for the
// sequence group's tokens and its H / u heads (merge_bytes_per_element x group tokens x H / u x
// head_dim bytes, add_ring_stage), as yunchang's ring (xDiT's USP) does.
// Casts: with cast_bytes_per_element > 0, rank (j, i) casts its output (group tokens x H / u x
// head_dim elements) after its attention and merges, before the output transposes (see
// out_cast_bytes_per_element).
Result<CommPlan> ulysses_plan(const LayerInput& in, int u, bool staged, const char* tag,
                              double merge_bytes_per_element, double cast_bytes_per_element);

}  // namespace sparsp::policy::detail
