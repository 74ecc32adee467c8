// Placement `dependency_aware`: METIS k-way partition of the block dependency graph, parts mapped
// to GPUs by recursive bisection of the node/socket/switch tree (nodes first in a cluster).
//
// More ranks than blocks (P > n, e.g. HunyuanVideo STA at block 384, 301 blocks, on 1,024 GPUs):
// some ranks must own no block, and METIS cannot partition into more parts than vertices (its
// recursive bisection then meets empty graphs and prints "Cannot bisect a graph with 0
// vertices!" to stdout). The rule: METIS is not called, and the blocks are placed as `balanced`
// places them (under this placement's name), as where the graph has no dependency at all.
#include <metis.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include "placement_graph.hpp"
#include "registry.hpp"

namespace sparsp::policy {
namespace {

using detail::param;

// Recursive bisection of the rank set along the topology tree (server node, socket, then
// switch): at each level the ranks split into the subtrees they hang from, and the parts are
// split into groups of those sizes minimising the part-graph weight cut between groups, so the
// heaviest cuts fall inside a switch, then inside a socket, then inside a node.
void map_parts(const std::vector<int>& ranks, const std::vector<int>& parts,
               const std::vector<double>& pw, int nparts, const RankTopology& rt,
               std::vector<int>& rank_of_part) {
  if (ranks.empty()) return;
  if (ranks.size() == 1) {
    rank_of_part[static_cast<size_t>(parts[0])] = ranks[0];
    return;
  }
  // Ancestor chains root-first, under the rank's server node: in a cluster the first split is
  // by node (a server's sockets are separate roots of its tree, so without it the parts would
  // go to sockets of any node alike, and heavy cuts could cross the network). In one server
  // every rank is on node 0, so that level is one group and the split starts at the sockets.
  auto chain = [&](int r) {
    auto a = rt.ancestors[static_cast<size_t>(r)];
    a.push_back("node" + std::to_string(rt.node_of(r)));
    std::reverse(a.begin(), a.end());
    return a;
  };
  size_t depth = 0;
  std::vector<std::vector<int>> groups;
  for (;; ++depth) {
    std::map<std::string, std::vector<int>> by;
    bool any = false;
    for (int r : ranks) {
      auto c = chain(r);
      std::string key = depth < c.size() ? c[depth] : "rank" + std::to_string(r);
      if (depth < c.size()) any = true;
      by[key].push_back(r);
    }
    if (by.size() > 1 || !any) {
      // Deterministic group order: by first rank.
      for (auto& [k, v] : by) groups.push_back(v);
      std::sort(groups.begin(), groups.end());
      break;
    }
  }
  if (groups.size() == 1) {  // all under one node and no deeper split: one rank per group
    groups.clear();
    for (int r : ranks) groups.push_back({r});
  }
  // Assign parts to groups, largest group first, choosing the subset with the heaviest internal
  // weight (equivalently the smallest cut to the rest); exhaustive for small sets, else greedy.
  std::vector<int> remaining = parts;
  auto pwt = [&](int a, int b) { return pw[static_cast<size_t>(a) * nparts + b]; };
  std::vector<size_t> gorder(groups.size());
  std::iota(gorder.begin(), gorder.end(), 0);
  std::stable_sort(gorder.begin(), gorder.end(),
                   [&](size_t a, size_t b) { return groups[a].size() > groups[b].size(); });
  std::vector<std::vector<int>> assigned(groups.size());
  for (size_t gi = 0; gi + 1 < gorder.size(); ++gi) {
    const size_t want = groups[gorder[gi]].size();
    const size_t m = remaining.size();
    std::vector<int> best;
    double best_w = -1;
    if (m <= 16) {
      for (uint32_t mask = 0; mask < (1u << m); ++mask) {
        if (static_cast<size_t>(std::popcount(mask)) != want) continue;
        // Always include the first remaining part to break symmetry when all sizes are equal.
        double w = 0;
        std::vector<int> sel;
        for (size_t i = 0; i < m; ++i)
          if (mask >> i & 1u) sel.push_back(remaining[i]);
        for (size_t a = 0; a < sel.size(); ++a)
          for (size_t b = a + 1; b < sel.size(); ++b) w += pwt(sel[a], sel[b]);
        if (w > best_w) {
          best_w = w;
          best = sel;
        }
      }
    } else {
      best.push_back(remaining[0]);
      while (best.size() < want) {
        int pick = -1;
        double pw_best = -1;
        for (int x : remaining) {
          if (std::find(best.begin(), best.end(), x) != best.end()) continue;
          double w = 0;
          for (int y : best) w += pwt(x, y);
          if (w > pw_best) {
            pw_best = w;
            pick = x;
          }
        }
        best.push_back(pick);
      }
    }
    assigned[gorder[gi]] = best;
    std::vector<int> rest;
    for (int x : remaining)
      if (std::find(best.begin(), best.end(), x) == best.end()) rest.push_back(x);
    remaining = rest;
  }
  assigned[gorder.back()] = remaining;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    map_parts(groups[gi], assigned[gi], pw, nparts, rt, rank_of_part);
}

Result<Placement> place_dependency_aware(const PlacementContext& c) {
  const auto& g = *c.graph;
  const int P = c.ranks->ranks;
  const int n = g.num_blocks;
  Placement pl{"dependency_aware", P, std::vector<int>(static_cast<size_t>(n), 0)};
  if (P == 1) return pl;
  const double tol = param(c.params, "tolerance", 1.03);
  // Integer weights for METIS: vertex = attention work scaled to <= 1e6 in total; edge = KV
  // tokens moved if split, scaled to a max of 1e4 (at least 1 where any dependency exists).
  const double wsum = std::accumulate(g.work.begin(), g.work.end(), 0.0);
  double emax = 0;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) emax = std::max(emax, detail::edge_weight(g, a, b));
  std::vector<idx_t> xadj{0}, adj, adjw, vw;
  for (int a = 0; a < n; ++a) {
    vw.push_back(std::max<idx_t>(
        1, static_cast<idx_t>(
               std::llround(wsum > 0 ? g.work[static_cast<size_t>(a)] / wsum * 1e6 : 1))));
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const double w = detail::edge_weight(g, a, b);
      if (w <= 0) continue;
      adj.push_back(b);
      adjw.push_back(std::max<idx_t>(1, static_cast<idx_t>(std::llround(w / emax * 1e4))));
    }
    xadj.push_back(static_cast<idx_t>(adj.size()));
  }
  if (adj.empty()) return make_placement("balanced", c);
  if (P > n) {  // more ranks than blocks: see the top
    auto pb = make_placement("balanced", c);
    if (!pb) return pb.error();
    pl.block_owner = pb->block_owner;
    return pl;
  }
  std::vector<idx_t> part(static_cast<size_t>(n), 0);
  // Attention work as the one balance constraint first; where that leaves the tokens (the
  // per-token GEMM/MLP work) over kTokenTolerance on some GPU, tokens as a second constraint.
  auto partition = [&](bool cap_tokens) -> Status {
    std::vector<idx_t> weights = vw;
    std::vector<real_t> ub = {static_cast<real_t>(tol)};
    idx_t ncon = 1;
    if (cap_tokens) {
      const double tsum = std::accumulate(g.tokens.begin(), g.tokens.end(), 0.0);
      weights.clear();
      for (int a = 0; a < n; ++a) {
        weights.push_back(vw[static_cast<size_t>(a)]);
        weights.push_back(std::max<idx_t>(
            1, static_cast<idx_t>(
                   std::llround(tsum > 0 ? g.tokens[static_cast<size_t>(a)] / tsum * 1e6 : 1))));
      }
      ub.push_back(static_cast<real_t>(detail::kTokenTolerance));
      ncon = 2;
    }
    idx_t nv = n, np = P, objval = 0;
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = 1;
    options[METIS_OPTION_NUMBERING] = 0;
    options[METIS_OPTION_CONTIG] = 0;
    // METIS keeps its random state in a process-wide global (GKlib's random.c, reseeded from
    // options[METIS_OPTION_SEED] at each call), so concurrent calls interleave their streams and
    // the partition would depend on thread timing (seen in parallel sweeps). Serialise the call.
    static std::mutex metis_mutex;
    std::lock_guard<std::mutex> metis_lock(metis_mutex);
    const int rc =
        METIS_PartGraphKway(&nv, &ncon, xadj.data(), adj.data(), weights.data(), nullptr,
                            adjw.data(), &np, nullptr, ub.data(), options, &objval, part.data());
    if (rc != METIS_OK)
      return Error{"dependency_aware: METIS_PartGraphKway failed (" + std::to_string(rc) + ")", 1};
    return Ok{};
  };
  if (auto st = partition(false); !st) return st.error();
  std::vector<int> owner(part.begin(), part.end());
  if (detail::token_imbalance(g, owner, P) > detail::kTokenTolerance) {
    if (auto st = partition(true); !st) return st.error();
    owner.assign(part.begin(), part.end());
    // METIS meets several constraints only approximately; where one block alone outweighs a
    // GPU's share of the attention work (a dense row), it may keep the tokens uneven: the greedy
    // balance, which caps tokens, then places the blocks.
    if (detail::token_imbalance(g, owner, P) > detail::kTokenTolerance) {
      auto pb = make_placement("balanced", c);
      if (!pb) return pb.error();
      pl.block_owner = pb->block_owner;
      return pl;
    }
  }
  // Part graph: weight between parts.
  std::vector<double> pw(static_cast<size_t>(P) * P, 0.0);
  for (int a = 0; a < n; ++a)
    for (idx_t e = xadj[static_cast<size_t>(a)]; e < xadj[static_cast<size_t>(a) + 1]; ++e) {
      const int pa = static_cast<int>(part[static_cast<size_t>(a)]);
      const int pb = static_cast<int>(part[static_cast<size_t>(adj[static_cast<size_t>(e)])]);
      if (pa != pb)
        pw[static_cast<size_t>(pa) * P + pb] += static_cast<double>(adjw[static_cast<size_t>(e)]);
    }
  std::vector<int> ranks(static_cast<size_t>(P)), parts(static_cast<size_t>(P));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::iota(parts.begin(), parts.end(), 0);
  std::vector<int> rank_of_part(static_cast<size_t>(P), -1);
  map_parts(ranks, parts, pw, P, *c.ranks, rank_of_part);
  for (int a = 0; a < n; ++a)
    pl.block_owner[static_cast<size_t>(a)] =
        rank_of_part[static_cast<size_t>(part[static_cast<size_t>(a)])];
  return pl;
}

const detail::RegisterPlacement kRegistered{
    {"dependency_aware",
     "METIS k-way partition of the block dependency graph, parts mapped to "
     "GPUs by recursive bisection of the switch/socket tree (tolerance)",
     3, place_dependency_aware}};

}  // namespace
}  // namespace sparsp::policy
