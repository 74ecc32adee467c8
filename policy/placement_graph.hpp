#pragma once
// Private: the dependency weight between two blocks of a BlockGraph, shared by the placements that
// read the graph (balanced, dependency_aware).
#include "sparsp/policy.hpp"

namespace sparsp::policy::detail {

// Symmetrised dependency weight between blocks a and b in "KV tokens moved if split".
inline double edge_weight(const BlockGraph& g, int a, int b) {
  const size_t n = static_cast<size_t>(g.num_blocks);
  return g.dep[a * n + b] * g.tokens[static_cast<size_t>(b)] +
         g.dep[b * n + a] * g.tokens[static_cast<size_t>(a)];
}

}  // namespace sparsp::policy::detail
