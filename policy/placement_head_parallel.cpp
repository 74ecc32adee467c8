// Placement `head_parallel`: the contiguous split; the Ulysses scheme splits heads across ranks.
#include "registry.hpp"

namespace sparsp::policy {
namespace {

// Ulysses keeps the sequence split contiguous before its all-to-all; heads are split by the
// scheme (H / P per rank).
Result<Placement> place_head_parallel(const PlacementContext& c) {
  auto pl = make_placement("contiguous", c);
  if (pl) pl->name = "head_parallel";
  return pl;
}

const detail::RegisterPlacement kRegistered{
    {"head_parallel",
     "contiguous sequence shards; heads split across ranks by the Ulysses "
     "all-to-all",
     4, place_head_parallel}};

}  // namespace
}  // namespace sparsp::policy
