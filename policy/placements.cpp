// Placements of query/KV blocks on the ranks of the sequence-parallel group. The registry table at
// the bottom is the only place a new placement is listed.
#include <mutex>
#include <metis.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "demand.hpp"

namespace sparsp::policy {

namespace {

using Params = std::map<std::string, double>;

double param(const Params& p, const std::string& k, double def) {
  auto it = p.find(k);
  return it == p.end() ? def : it->second;
}

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

Result<Placement> place_striped(const PlacementContext& c) {
  const int P = c.ranks->ranks;
  Placement pl{"striped", P, std::vector<int>(static_cast<size_t>(c.graph->num_blocks))};
  for (int k = 0; k < c.graph->num_blocks; ++k) pl.block_owner[static_cast<size_t>(k)] = k % P;
  return pl;
}

// Ulysses keeps the sequence split contiguous before its all-to-all; heads are split by the
// scheme (H / P per rank).
Result<Placement> place_head_parallel(const PlacementContext& c) {
  auto pl = place_contiguous(c);
  if (pl) pl->name = "head_parallel";
  return pl;
}

// Symmetrised dependency weight between blocks a and b in "KV tokens moved if split".
double edge_weight(const BlockGraph& g, int a, int b) {
  const size_t n = static_cast<size_t>(g.num_blocks);
  return g.dep[a * n + b] * g.tokens[static_cast<size_t>(b)] +
         g.dep[b * n + a] * g.tokens[static_cast<size_t>(a)];
}

// db-SP-style greedy (Chen et al. 2025, "dual-balanced" sequence parallelism): blocks in
// decreasing attention work, each to the rank minimising  load/target - locality * affinity,
// where affinity is the share of the block's dependency weight already on that rank; a rank over
// target * tolerance is skipped while another can take the block.
Result<Placement> place_balanced(const PlacementContext& c) {
  const auto& g = *c.graph;
  const int P = c.ranks->ranks;
  const int n = g.num_blocks;
  const double tol = param(c.params, "tolerance", 1.03);
  const double locality = param(c.params, "locality", 0.1);
  const double total = std::accumulate(g.work.begin(), g.work.end(), 0.0);
  const double target = total / P;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return g.work[static_cast<size_t>(a)] > g.work[static_cast<size_t>(b)];
  });
  Placement pl{"balanced", P, std::vector<int>(static_cast<size_t>(n), -1)};
  std::vector<double> load(static_cast<size_t>(P), 0.0);
  std::vector<double> aff(static_cast<size_t>(P));
  for (int b : order) {
    std::fill(aff.begin(), aff.end(), 0.0);
    double tot_aff = 0;
    for (int k = 0; k < n; ++k) {
      if (k == b) continue;
      const double w = edge_weight(g, b, k);
      if (w <= 0) continue;
      tot_aff += w;
      const int o = pl.block_owner[static_cast<size_t>(k)];
      if (o >= 0) aff[static_cast<size_t>(o)] += w;
    }
    const double wb = g.work[static_cast<size_t>(b)];
    int best = -1;
    double best_cost = std::numeric_limits<double>::infinity();
    for (int pass = 0; pass < 2 && best < 0; ++pass)
      for (int r = 0; r < P; ++r) {
        if (pass == 0 && target > 0 && load[static_cast<size_t>(r)] + wb > target * tol) continue;
        const double cost = (target > 0 ? (load[static_cast<size_t>(r)] + wb) / target : 0) -
                            locality * (tot_aff > 0 ? aff[static_cast<size_t>(r)] / tot_aff : 0);
        if (cost < best_cost) {
          best_cost = cost;
          best = r;
        }
      }
    pl.block_owner[static_cast<size_t>(b)] = best;
    load[static_cast<size_t>(best)] += wb;
  }
  return pl;
}

// ---- dependency_aware: METIS k-way + topology-aware mapping ---------------------------------

// Recursive bisection of the rank set along the topology tree (socket, then switch): at each
// level the ranks split into the subtrees they hang from, and the parts are split into groups of
// those sizes minimising the part-graph weight cut between groups, so the heaviest cuts fall
// inside a switch, then inside a socket.
void map_parts(const std::vector<int>& ranks, const std::vector<int>& parts,
               const std::vector<double>& pw, int nparts, const RankTopology& rt,
               std::vector<int>& rank_of_part) {
  if (ranks.empty()) return;
  if (ranks.size() == 1) {
    rank_of_part[static_cast<size_t>(parts[0])] = ranks[0];
    return;
  }
  // Ancestor chains root-first.
  auto chain = [&](int r) {
    auto a = rt.ancestors[static_cast<size_t>(r)];
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
    for (int b = a + 1; b < n; ++b) emax = std::max(emax, edge_weight(g, a, b));
  std::vector<idx_t> xadj{0}, adj, adjw, vw;
  for (int a = 0; a < n; ++a) {
    vw.push_back(std::max<idx_t>(1, static_cast<idx_t>(std::llround(
                                        wsum > 0 ? g.work[static_cast<size_t>(a)] / wsum * 1e6 : 1))));
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const double w = edge_weight(g, a, b);
      if (w <= 0) continue;
      adj.push_back(b);
      adjw.push_back(std::max<idx_t>(1, static_cast<idx_t>(std::llround(w / emax * 1e4))));
    }
    xadj.push_back(static_cast<idx_t>(adj.size()));
  }
  idx_t nv = n, ncon = 1, np = P, objval = 0;
  real_t ub = static_cast<real_t>(tol);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 1;
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_CONTIG] = 0;
  std::vector<idx_t> part(static_cast<size_t>(n), 0);
  if (adj.empty()) return place_balanced(c);
  // METIS keeps its random state in a process-wide global (GKlib's random.c, reseeded from
  // options[METIS_OPTION_SEED] at each call), so concurrent calls interleave their streams and the
  // partition would depend on thread timing (seen in parallel sweeps). Serialise the call.
  static std::mutex metis_mutex;
  std::lock_guard<std::mutex> metis_lock(metis_mutex);
  const int rc = METIS_PartGraphKway(&nv, &ncon, xadj.data(), adj.data(), vw.data(), nullptr,
                                     adjw.data(), &np, nullptr, &ub, options, &objval, part.data());
  if (rc != METIS_OK) return Error{"dependency_aware: METIS_PartGraphKway failed (" +
                                   std::to_string(rc) + ")", 1};
  // Part graph: weight between parts.
  std::vector<double> pw(static_cast<size_t>(P) * P, 0.0);
  for (int a = 0; a < n; ++a)
    for (idx_t e = xadj[static_cast<size_t>(a)]; e < xadj[static_cast<size_t>(a) + 1]; ++e) {
      const int pa = static_cast<int>(part[static_cast<size_t>(a)]);
      const int pb = static_cast<int>(part[static_cast<size_t>(adj[static_cast<size_t>(e)])]);
      if (pa != pb) pw[static_cast<size_t>(pa) * P + pb] += static_cast<double>(adjw[static_cast<size_t>(e)]);
    }
  std::vector<int> ranks(static_cast<size_t>(P)), parts(static_cast<size_t>(P));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::iota(parts.begin(), parts.end(), 0);
  std::vector<int> rank_of_part(static_cast<size_t>(P), -1);
  map_parts(ranks, parts, pw, P, *c.ranks, rank_of_part);
  for (int a = 0; a < n; ++a)
    pl.block_owner[static_cast<size_t>(a)] = rank_of_part[static_cast<size_t>(part[static_cast<size_t>(a)])];
  return pl;
}

struct PlacementEntry {
  const char* name;
  const char* description;
  Result<Placement> (*make)(const PlacementContext&);
};

const PlacementEntry kPlacements[] = {
    {"contiguous", "equal token ranges in sequence order (Ring/USP default)", place_contiguous},
    {"striped", "block i on rank i mod P", place_striped},
    {"balanced", "db-SP-style greedy balance of attention work with a locality reward "
                 "(tolerance, locality)", place_balanced},
    {"dependency_aware", "METIS k-way partition of the block dependency graph, parts mapped to "
                         "GPUs by recursive bisection of the switch/socket tree (tolerance)",
     place_dependency_aware},
    {"head_parallel", "contiguous sequence shards; heads split across ranks by the Ulysses "
                      "all-to-all", place_head_parallel},
};

}  // namespace

std::vector<PolicyInfo> placements() {
  std::vector<PolicyInfo> out;
  for (const auto& p : kPlacements) out.push_back({p.name, p.description});
  return out;
}

Result<Placement> make_placement(const std::string& name, const PlacementContext& ctx) {
  for (const auto& p : kPlacements)
    if (name == p.name) {
      if (!ctx.graph || !ctx.ranks || ctx.ranks->ranks < 1) return Error{"placement: empty input"};
      return p.make(ctx);
    }
  return Error{"unknown placement '" + name + "'"};
}

}  // namespace sparsp::policy
