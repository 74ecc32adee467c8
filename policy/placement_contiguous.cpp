// Placement `contiguous`: equal token ranges in sequence order (Ring attention / USP default).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "registry.hpp"

namespace sparsp::policy {
namespace {

// Equal token ranges in sequence order (Ring attention / USP default): block i goes to the rank
// whose range [r * N / P, (r + 1) * N / P) holds the block's middle token.
Result<Placement> place_contiguous(const PlacementContext& c) {
  const auto& g = *c.graph;
  const int P = c.ranks->ranks;
  const double total = std::accumulate(g.tokens.begin(), g.tokens.end(), 0.0);
  Placement pl{"contiguous", P, std::vector<int>(static_cast<size_t>(g.num_blocks))};
  double before = 0;
  for (int k = 0; k < g.num_blocks; ++k) {
    const double mid = before + g.tokens[static_cast<size_t>(k)] / 2;
    pl.block_owner[static_cast<size_t>(k)] =
        std::min(P - 1, static_cast<int>(std::floor(mid * P / total)));
    before += g.tokens[static_cast<size_t>(k)];
  }
  return pl;
}

const detail::RegisterPlacement kRegistered{
    {"contiguous", "equal token ranges in sequence order (Ring/USP default)", 0, place_contiguous}};

}  // namespace
}  // namespace sparsp::policy
