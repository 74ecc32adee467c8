#pragma once
// Private: the dependency weight between two blocks of a BlockGraph, shared by the placements that
// read the graph (balanced, dependency_aware).
#include <algorithm>
#include <numeric>
#include <vector>

#include "sparsp/policy.hpp"

namespace sparsp::policy::detail {

// Symmetrised dependency weight between blocks a and b in "KV tokens moved if split".
inline double edge_weight(const BlockGraph& g, int a, int b) {
  const size_t n = static_cast<size_t>(g.num_blocks);
  return g.dep[a * n + b] * g.tokens[static_cast<size_t>(b)] +
         g.dep[b * n + a] * g.tokens[static_cast<size_t>(a)];
}

/// Most tokens on one rank over the mean, for a placement `owner` ([num_blocks] -> rank 0..P-1):
/// the factor by which the per-token work (QKV/out projections, MLP) of the busiest GPU exceeds
/// an even split. 1 for an even split; 0 when there are no tokens.
inline double token_imbalance(const BlockGraph& g, const std::vector<int>& owner, int P) {
  std::vector<double> per(static_cast<size_t>(P), 0.0);
  for (size_t b = 0; b < owner.size(); ++b) per[static_cast<size_t>(owner[b])] += g.tokens[b];
  const double total = std::accumulate(per.begin(), per.end(), 0.0);
  if (total <= 0) return 0;
  return *std::max_element(per.begin(), per.end()) / (total / P);
}

/// The token balance the attention-balancing placements (balanced, dependency_aware) keep as a
/// second constraint: no GPU holds more than 10% over the mean token count where the first,
/// attention-only placement leaves it so (degenerate masks: an all-zero mask has no attention
/// work to balance, a mask with one dense row concentrates it), since every token costs the
/// same GEMM/MLP time on its GPU. Chosen, not fitted: it bounds the non-attention slowdown of a
/// degenerate mask at 1.1x (it was 8x: break-it defect 7) and leaves most shipped studies'
/// placements as they were (STA, top-k); of the golden cases only dependency_aware on the radial
/// pattern changed (its METIS parts held up to ~1.2x the mean tokens; with the second
/// constraint it moves 572 instead of 595 GB per step and runs 0.5-1.5% faster end to end).
inline constexpr double kTokenTolerance = 1.10;

}  // namespace sparsp::policy::detail
