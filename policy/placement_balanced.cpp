// Placement `balanced`: db-SP-style greedy balance of attention work with a locality reward.
#include <algorithm>
#include <limits>
#include <numeric>

#include "placement_graph.hpp"
#include "registry.hpp"

namespace sparsp::policy {
namespace {

using detail::param;

// db-SP-style greedy (Chen et al. 2025, "dual-balanced" sequence parallelism): blocks in
// decreasing attention work, each to the rank minimising  load/target - locality * affinity,
// where affinity is the share of the block's dependency weight already on that rank; a rank over
// target * tolerance is skipped while another can take the block. With `cap_tokens`, a rank over
// kTokenTolerance x its even share of tokens is skipped too; where there is no attention work at
// all (an all-zero mask), tokens are balanced instead.
Placement greedy_balance(const PlacementContext& c, bool cap_tokens) {
  const auto& g = *c.graph;
  const int P = c.ranks->ranks;
  const int n = g.num_blocks;
  const double tol = param(c.params, "tolerance", 1.03);
  const double locality = param(c.params, "locality", 0.1);
  const double total = std::accumulate(g.work.begin(), g.work.end(), 0.0);
  const double target = total / P;
  const double token_target = std::accumulate(g.tokens.begin(), g.tokens.end(), 0.0) / P;
  const bool by_tokens = target <= 0 && token_target > 0;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return g.work[static_cast<size_t>(a)] > g.work[static_cast<size_t>(b)];
  });
  Placement pl{"balanced", P, std::vector<int>(static_cast<size_t>(n), -1)};
  std::vector<double> load(static_cast<size_t>(P), 0.0), tok(static_cast<size_t>(P), 0.0);
  std::vector<double> aff(static_cast<size_t>(P));
  for (int b : order) {
    std::fill(aff.begin(), aff.end(), 0.0);
    double tot_aff = 0;
    for (int k = 0; k < n; ++k) {
      if (k == b) continue;
      const double w = detail::edge_weight(g, b, k);
      if (w <= 0) continue;
      tot_aff += w;
      const int o = pl.block_owner[static_cast<size_t>(k)];
      if (o >= 0) aff[static_cast<size_t>(o)] += w;
    }
    const double wb = g.work[static_cast<size_t>(b)];
    const double tb = g.tokens[static_cast<size_t>(b)];
    auto over_tokens = [&](int r) {
      return cap_tokens && token_target > 0 &&
             tok[static_cast<size_t>(r)] + tb > token_target * detail::kTokenTolerance;
    };
    int best = -1;
    double best_cost = std::numeric_limits<double>::infinity();
    // Pass 0: both constraints; pass 1: tokens only; pass 2: any rank.
    for (int pass = 0; pass < 3 && best < 0; ++pass)
      for (int r = 0; r < P; ++r) {
        if (pass == 0 && target > 0 && load[static_cast<size_t>(r)] + wb > target * tol) continue;
        if (pass <= 1 && over_tokens(r)) continue;
        const double share = by_tokens    ? (tok[static_cast<size_t>(r)] + tb) / token_target
                             : target > 0 ? (load[static_cast<size_t>(r)] + wb) / target
                                          : 0;
        const double cost =
            share - locality * (tot_aff > 0 ? aff[static_cast<size_t>(r)] / tot_aff : 0);
        if (cost < best_cost) {
          best_cost = cost;
          best = r;
        }
      }
    pl.block_owner[static_cast<size_t>(b)] = best;
    load[static_cast<size_t>(best)] += wb;
    tok[static_cast<size_t>(best)] += tb;
  }
  return pl;
}

// Attention balance first; where that leaves the tokens (the per-token GEMM/MLP work) over
// kTokenTolerance on some GPU, again with tokens as a second constraint.
Result<Placement> place_balanced(const PlacementContext& c) {
  const int P = c.ranks->ranks;
  Placement pl = greedy_balance(c, false);
  if (detail::token_imbalance(*c.graph, pl.block_owner, P) > detail::kTokenTolerance)
    pl = greedy_balance(c, true);
  return pl;
}

const detail::RegisterPlacement kRegistered{
    {"balanced",
     "db-SP-style greedy balance of attention work with a locality reward "
     "(tolerance, locality)",
     2, place_balanced}};

}  // namespace
}  // namespace sparsp::policy
