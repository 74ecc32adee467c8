// Placement `zigzag`: ring-flash-attention's load-balanced split for causal attention
// (zhuzilin/ring-flash-attention, ring_flash_attn/zigzag_ring_flash_attn.py and its test's
// extract_local: the sequence is cut into 2P chunks and rank r keeps chunks r and 2P - 1 - r).
//
// Blocks, not tokens, are the unit: with n blocks, chunk c (0 <= c < 2P) is blocks
// [floor(c n / 2P), floor((c + 1) n / 2P)), so chunk sizes differ by at most one block when 2P
// does not divide n (ring-flash-attention itself asserts divisibility; this is sparsp's balanced
// rule). Fewer than 2P blocks cannot be split (a chunk would be empty): an error (exit 2).
#include <string>

#include "registry.hpp"

namespace sparsp::policy {
namespace {

Result<Placement> place_zigzag(const PlacementContext& c) {
  const int P = c.ranks->ranks;
  const int n = c.graph->num_blocks;
  if (n < 2 * P)
    return Error{"placement zigzag: " + std::to_string(n) + " blocks cannot be cut into 2 x " +
                 std::to_string(P) + " = " + std::to_string(2 * P) +
                 " non-empty chunks (rank r holds chunks r and 2P-1-r); use a smaller --block or "
                 "fewer GPUs (policy/README.md, zigzag)"};
  Placement pl{"zigzag", P, std::vector<int>(static_cast<size_t>(n))};
  const int64_t chunks = 2 * static_cast<int64_t>(P);
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int rank = static_cast<int>(ch < P ? ch : chunks - 1 - ch);
    const int64_t lo = ch * n / chunks, hi = (ch + 1) * n / chunks;
    for (int64_t k = lo; k < hi; ++k) pl.block_owner[static_cast<size_t>(k)] = rank;
  }
  return pl;
}

const detail::RegisterPlacement kRegistered{
    {"zigzag", "ring-flash-attention's causal balance: 2P chunks, rank r holds chunks r and 2P-1-r",
     7, place_zigzag}};

}  // namespace
}  // namespace sparsp::policy
