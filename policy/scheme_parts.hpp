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
};

// At step s = 1..last_step the rank at ring position owner+s-1 forwards the shard to the one at
// owner+s (after the step s-1 message; step 1 after `first_after`), which then computes
// `flops_at[owner+s]` on it. `ring[q]` is the rank at position q. Zero-FLOP pieces are skipped
// unless `keep_empty_tasks`. Returns the task index of each step (index s; -1 where none).
std::vector<int> add_ring_stage(CommPlan& plan, const std::vector<int>& ring,
                                const RingShard& shard, const std::vector<double>& flops_at,
                                bool keep_empty_tasks, bool staged);

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
Result<CommPlan> ulysses_plan(const LayerInput& in, int u, bool staged, const char* tag);

}  // namespace sparsp::policy::detail
