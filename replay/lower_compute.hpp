#pragma once
// Real-compute lowering (private to replay/; lower_compute.cpp).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "exec_plan.hpp"

namespace sparsp::replay::detail {

/// (holder, block) -> byte offset of the holder's KV slot of the block (allocated on first use).
using SlotFn = std::function<uint64_t(int, int)>;

/// (holder, bytes) -> byte offset of a fresh 256-aligned range of the holder's buffer.
using AllocFn = std::function<uint64_t(int, uint64_t)>;

/// Why `plan` cannot be replayed with real attention (empty: it can).
std::string real_compute_obstacle(const policy::Plan& plan, const ReplayOptions& opt);

/// A ulysses or usp plan (policy.scheme): its all-to-alls and ring steps carry the Q, K and V of
/// head groups (lower.cpp), not opaque bytes, under real compute.
bool ulysses_plan(const policy::Plan& plan);

/// Bytes of the last block of a ulysses / usp plan without block_bytes (a partial last block, e.g.
/// HunyuanVideo's 256-token text block after 384-token video blocks), from the first all-to-all
/// in (or first ring step) its owner sends: the tokens it carries fall short of whole blocks by
/// the last block's missing tokens. 0: not found, or the block is whole.
double ulysses_last_block_bytes(const policy::Plan& plan);

/// What one rank of a Ulysses / USP layer plan computes: heads [head_begin, head_end) (its head
/// group) of the query blocks of q_ranks (its sequence group, ascending); head_end 0: no
/// attention task.
struct UlyssesRank {
  int head_begin = 0, head_end = 0;
  std::vector<int> q_ranks;
};
/// Per rank of layer plan `li`, from its attention tasks. Error (exit 2, "/layers/i/compute/j:
/// ..." without the file): a rank whose attention tasks disagree on heads or q_ranks.
Result<std::vector<UlyssesRank>> ulysses_ranks(const policy::Plan& plan, size_t li);

/// The Q of query block rq.blocks[i], head `head`, in rank `rank`'s Q array (holder offsets),
/// content keyed by (layer li, kQueryItem | block, head).
Region query_region(int rank, const RankQueries& rq, int i, int head, int li, int head_dim);

/// Fills el.queries (allocating each rank's Q array with `alloc`; own Q into el.fills), el.attn,
/// el.attn_of_act, el.block_keys and el.block_token_offsets for layer plan `li` (block_bytes:
/// each block's K and V bytes), and the ExecPlan maxima. A Ulysses group's Q of other ranks'
/// blocks is left to the transfers that deliver it (lower.cpp). Errors (exit 2): a block that is
/// not a whole number of tokens, a head range outside the plan's heads.
Status lower_attention(const policy::Plan& plan, const ReplayOptions& opt, int li,
                       const std::vector<double>& block_bytes, const SlotFn& slot_of,
                       const AllocFn& alloc, ExecLayer& el, ExecPlan& ex);

/// What the transfers of one layer plan deliver, (holder, block) -> the first transfer (index
/// into the workload's transfers) delivering its K/V (kv) or a head of its Q (q), and the KV
/// heads [first, end) a Ulysses transfer delivered (kv_heads; absent: the whole block).
struct Received {
  std::map<std::pair<int, int>, int> kv, q;
  std::map<std::pair<int, int>, std::pair<int, int>> kv_heads;
};

/// Pieces of a ulysses / usp plan's transfers marked in `structured` (1: all-to-all in, s -> d:
/// the Q of d's heads and K, V of d's KV heads for s's query blocks; 2: ring step: K, V of d's KV
/// heads for the sequence group the source holds), in d's Q array and KV slots; the delivered Q
/// is appended to el.checks. After lower_attention. Errors (exit 2, at the transfer's pointer):
/// bytes that differ from what it carries, a destination that computes no attention or not
/// those queries, a source forwarding KV heads it does not hold.
Status lower_ulysses_transfers(const policy::Plan& plan, const ReplayOptions& opt, int li,
                               const std::vector<char>& structured,
                               const std::map<std::string, int>& index_of, const SlotFn& slot_of,
                               ExecLayer& el, Received& received);

}  // namespace sparsp::replay::detail
