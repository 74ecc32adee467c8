// Placement `striped`: block i on rank i mod P.
#include "registry.hpp"

namespace sparsp::policy {
namespace {

Result<Placement> place_striped(const PlacementContext& c) {
  const int P = c.ranks->ranks;
  Placement pl{"striped", P, std::vector<int>(static_cast<size_t>(c.graph->num_blocks))};
  for (int k = 0; k < c.graph->num_blocks; ++k) pl.block_owner[static_cast<size_t>(k)] = k % P;
  return pl;
}

const detail::RegisterPlacement kRegistered{
    {"striped", "block i on rank i mod P", 1, place_striped}};

}  // namespace
}  // namespace sparsp::policy
