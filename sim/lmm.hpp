#pragma once
// Max-min fair bandwidth sharing over linear constraints (SimGrid's LMM formulation).
//
// ## The model
// Constraints c = 1..C, each a capacity C_c (bytes/s). Variables v = 1..V; in sparsp a variable is
// a *class* of m_v identical flows: same uses-vector (constraint, coefficient a_vc) and the same
// per-flow bound b_v (rate cap; +inf when none). Every flow of a class gets the same rate x_v
// (max-min fairness gives equal rates to flows that are indistinguishable), so the problem over
// flows is the problem over classes with multiplicities:
//
//     for every constraint c:   sum_v  m_v * a_vc * x_v  <=  C_c
//     for every variable v:     0 <= x_v <= b_v
//
// and the allocation is the max-min fair one: the vector x (one entry per *flow*) whose smallest
// entry is as large as possible, then the second smallest, and so on.
//
// ## Progressive filling (the algorithm SimGrid's lmm::System::solve uses for plain max-min,
// Bertsekas & Gallager, Data Networks, sec. 6.5.2)
// All unfixed rates rise together at a common level L. Constraint c saturates when
//     L_c = R_c / U_c,   R_c = C_c - sum_{fixed v} m_v a_vc x_v,   U_c = sum_{unfixed v} m_v a_vc.
// Each round: L* = min_c L_c. If some unfixed bound b_v <= L*, every such variable is fixed at
// its bound (fixing a variable at b <= L* can only raise the other L_c, so this is exact).
// Otherwise every unfixed variable on a constraint with L_c = L* (to a relative 1e-12) is fixed at
// L*. Fixing v subtracts m_v a_vc x_v from R_c and m_v a_vc from U_c on each of its constraints.
// Variables on no constraint take their bound (or +inf). Cost per round: O(C') + O(elements
// fixed); at most one round per distinct bottleneck level.
//
// Large components (more than kHeapConstraints constraints with unfixed variables, e.g. a
// 1,024-GPU cluster, where every NIC saturates at its own level and a solve takes thousands of
// rounds) find L* from a min-heap of the levels R_c / U_c instead of a scan of every constraint
// per round (keys re-computed lazily: fixing at level L only raises other levels), about
// O(elements + rounds log C') per solve instead of O(rounds x C'). Same rounds and same
// fixing order (saturated constraints in component order), so the same allocation; the level is
// taken as R_c / U_c of the heap's minimum rather than the scan's first minimum by
// cross-multiplication, which can differ in the last bit when two levels tie (components below
// the threshold, every server preset, keep the scan and its results bit for bit).
//
// ## Selective update
// The max-min problem splits into independent problems on the connected components of the
// bipartite constraint-variable graph (edges: elements of the variables). After a change (a class's
// multiplicity, a capacity) only the components holding the constraints touched by the change are
// re-solved; the rest keep their rates. This mirrors SimGrid's maxmin/selective-update. The
// components are cached: a new edge (a new class) merges the components it joins; a class that
// empties keeps its edges with weight 0 ("dormant", skipped by the solver), which can only keep
// components merged (solving two independent components together gives the same rates), so
// classes that empty and refill, as they do all the time in a server, cost no graph work. Only a
// compaction of dormant edges triggers a full rebuild.
//
// ## Constraints that never bind
// A constraint added with `binds = false` is one the caller knows can never be the bottleneck:
// every variable using it also uses constraints whose capacities sum to at most its own, with no
// smaller coefficients (a non-blocking spine: a leaf's uplink has the capacity of the NIC links
// below it, and every flow through it crosses one of them). Removing such a constraint from the
// problem leaves the max-min allocation unchanged, so the solver keeps it out of the components
// (it joins nothing: a cluster splits into small independent problems) and out of the filling;
// its load is kept up to date from the rates of the variables using it, for the statistics.
//
// Determinism: all loops run over index-ordered arrays whose order depends only on the sequence of
// calls, never on addresses; same calls, same results bit for bit.
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace sparsp::sim::lmm {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

/// One term of a variable's uses-vector: `coefficient` bytes of `constraint` capacity per byte.
struct Use {
  int constraint = -1;
  double coefficient = 1.0;
};

class System {
 public:
  /// Components with more constraints than this to fill use the heap (see the top).
  static constexpr size_t kHeapConstraints = 512;
  /// Changes that threshold (tests: 0 forces the heap, SIZE_MAX the scan).
  void set_heap_threshold(size_t constraints) { heap_min_ = constraints; }

  /// Adds a constraint `sum <= capacity_Bps`. REQUIRES: capacity_Bps > 0. Returns its index.
  /// `binds = false`: the caller guarantees it can never bind (see "Constraints that never bind"
  /// at the top); it is then only accounted (load()), never solved over.
  int add_constraint(double capacity_Bps, bool binds = true);
  /// Changes a capacity (e.g. SMs taken away from a GPU's compute); marks it for re-solving.
  /// On a constraint that never binds only the stored capacity changes (REQUIRES: it still
  /// cannot bind).
  void set_capacity(int constraint, double capacity_Bps);
  double capacity(int constraint) const { return cap_[constraint]; }

  /// Adds a variable (a class of identical flows) with multiplicity 0. `uses` must name distinct
  /// constraints with coefficients > 0. `bound` is the per-flow rate cap (kInf: none).
  /// REQUIRES: a variable using a constraint that never binds also uses one that binds.
  /// uses(var) lists the binding constraints first (each group in the given order).
  int add_variable(std::span<const Use> uses, double bound = kInf);
  /// Sets how many flows the class holds; marks its constraints for re-solving.
  void set_multiplicity(int var, int64_t m);
  int64_t multiplicity(int var) const { return m_[var]; }

  /// Re-solves the components touched since the last solve. Afterwards value() holds each class's
  /// per-flow rate and changed_variables() / changed_constraints() list what was re-solved.
  void solve();
  bool dirty() const { return !touched_.empty() || !touched_vars_.empty(); }

  /// Per-flow rate of a class (bytes/s); 0 for a class of multiplicity 0.
  double value(int var) const { return value_[var]; }
  /// sum_v m_v a_vc x_v after the last solve.
  double load(int constraint) const { return st_[constraint].load; }

  /// Variables (with m > 0 or just dropped to 0) re-solved by the last solve(), in index order
  /// of discovery (deterministic).
  const std::vector<int>& changed_variables() const { return comp_vars_; }
  const std::vector<int>& changed_constraints() const { return comp_cons_; }

  int num_constraints() const { return static_cast<int>(cap_.size()); }
  int num_variables() const { return static_cast<int>(m_.size()); }
  std::span<const Use> uses(int var) const {
    return {use_.data() + off_[var], static_cast<size_t>(off_[var + 1] - off_[var])};
  }

 private:
  // Data layout: hot per-variable and per-constraint fields in flat arrays (structure of arrays);
  // each variable's uses in one CSR array (immutable after add_variable).
  struct Elem {
    int var;
    double weight;  // m_v * a_vc, kept current by set_multiplicity
  };
  void touch(int constraint) { touched_.push_back(constraint); }  // duplicates de-duped by mark
  void fix(int var, double x);
  void account_never_binding();  // loads of the constraints that never bind, after a solve
  void rebuild_components();
  void compact(int constraint);
  void swap_elems(int constraint, int p, int q);
  void merge_new_edges();
  bool fix_bounds_up_to(double level, size_t& next_bounded);
  void fill_by_scan(size_t next_bounded);
  void fill_by_heap(size_t next_bounded);
  double level_of(int constraint);  // max(R, 0) / U, U recomputed when rounding drove it to <= 0

  // constraints
  struct Work {  // per-constraint solve state, packed: fix() touches one cache line per use
    double remaining = 0, usage = 0, load = 0;
    int unfixed = 0;
  };
  std::vector<double> cap_;
  std::vector<Work> st_;
  std::vector<uint32_t> cmark_;
  std::vector<double> wsum_;              // sum of the elements' weights (incremental)
  std::vector<int> nactive_;              // elements with m > 0 (the rest are dormant, weight 0)
  std::vector<int> ccomp_;                // cached component of each constraint (-1: none yet)
  std::vector<std::vector<Elem>> elems_;  // elements: nactive_ active (m > 0) ones first, then
                                          // dormant (m = 0) ones
  // variables
  std::vector<uint8_t> binds_;  // per constraint: 0 for one that never binds
  std::vector<int> nb_count_;   // per such constraint: variables with a non-zero load on it
  std::vector<int> off_;        // uses of v: [off_[v], off_[v+1]), binding ones [off_[v], bend_[v])
  std::vector<int> bend_;
  std::vector<double> nb_flow_;  // per variable using a never-binding constraint: m_v x_v in force
  std::vector<Use> use_;
  std::vector<int> pos_;  // position of the element in its constraint's elems_
  std::vector<double> bound_, value_;
  std::vector<int64_t> m_;
  std::vector<uint8_t> fixed_;
  std::vector<uint32_t> vmark_;

  // cached connected components (constraints, variables), rebuilt when an edge appears/goes
  std::vector<std::vector<int>> comp_c_, comp_act_;  // constraints; active variables
  std::vector<int> vpos_;                            // variable -> index in its comp_act_ list
  std::vector<int> pending_new_;                     // variables with new edges, not merged yet
  std::vector<uint32_t> comp_mark_;
  bool structure_changed_ = true;

  std::vector<int> touched_;       // constraints touched since the last solve
  std::vector<int> touched_vars_;  // variables dropped to m = 0 or without constraints
  std::vector<int> comp_vars_, comp_cons_;
  std::vector<int> work_cons_, bounded_;
  uint32_t epoch_ = 0;
  // heap filling (fill_by_heap): one entry per constraint (key: a lower bound of its level) and
  // each constraint's position in work_cons_ (component order, the ties' order)
  struct Level {
    double level;
    int pos, c;
  };
  std::vector<Level> heap_;
  size_t heap_min_ = kHeapConstraints;
  std::vector<int> cpos_, saturated_;

 public:
  int64_t rounds_ = 0;  ///< statistics: progressive-filling rounds so far
  int64_t bfs_ = 0;     ///< statistics: solves that rebuilt components
};

}  // namespace sparsp::sim::lmm
