#pragma once
// Private: per-(step, layer) demand and attention-work accounting shared by the schemes.
#include <cstdint>
#include <vector>

#include "sparsp/policy.hpp"

namespace sparsp::policy::detail {

/// Bytes of K and V of block k for all heads (2 * tokens * heads * head_dim * dtype_bytes).
/// Bytes of K and V of block k, over the model's KV heads.
double kv_block_bytes(const patterns::ModelSpec& m, const patterns::BlockLayout& l, int k);

/// A set of blocks as a bitset over KV blocks, with the words where it has bits.
struct BlockSet {
  std::vector<uint64_t> bits;
  std::vector<int> words;  ///< indices of non-zero words, ascending
};

/// Attention FLOPs split by (head group, query group, key group).
/// flops[(hg * nq + qg) * nk + kg]. Groups are given per block; head groups per head.
std::vector<double> grouped_flops(const LayerInput& in, const std::vector<int>& q_group, int nq,
                                  const std::vector<int>& k_group, int nk,
                                  const std::vector<int>& head_group, int nh);

/// What each rank needs from each other rank.
struct Demand {
  int ranks = 0;
  std::vector<double> bytes;                     ///< [g * P + o] at the requested granularity
  std::vector<std::vector<int32_t>> blocks;      ///< [g * P + o] KV block ids (union over heads)
  std::vector<double> flops;                     ///< [g * P + o] g's queries against o's KV
  std::vector<int> owned_blocks;                 ///< [P]
  std::vector<double> owned_tokens;              ///< [P]
  std::vector<std::vector<uint64_t>> head_need;  ///< head_block only: [g] H x words bitsets
  /// split_text: partial text-query outputs each rank returns to a text block's owner, as
  /// (rank, text owner, bytes); empty otherwise.
  struct Partial {
    int from, to;
    double bytes;
  };
  std::vector<Partial> text_partials;
  double need(int g, int o) const { return bytes[static_cast<size_t>(g) * ranks + o]; }
};

/// With split_text, text query blocks (dense rows in every video DiT) are not computed only by
/// their owner, which would then need every KV block of the layer: every rank computes the text
/// queries against its own KV blocks (partial attention with its log-sum-exp, as ring attention
/// merges partial results), and returns the partial output (tokens x heads x (head_dim * dtype
/// + 4 B log-sum-exp)) to the text block's owner. Text KV blocks are still fetched by all.
Demand compute_demand(const LayerInput& in, bool split_text = false);

/// KV block ids of the union of the needs of `requesters` from owner o, ascending.
std::vector<int32_t> union_blocks(const Demand& d, int o, const std::vector<int>& requesters);
/// Bytes of the union of the needs of `requesters` from owner o at the layer's granularity.
double union_bytes(const LayerInput& in, const Demand& d, int o,
                   const std::vector<int>& requesters);
/// All-heads bytes of a block list.
double blocks_bytes(const LayerInput& in, const std::vector<int32_t>& blocks);

}  // namespace sparsp::policy::detail
