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
// ## Selective update
// The max-min problem splits into independent problems on the connected components of the
// bipartite constraint-variable graph (edges: active elements, m_v > 0). After a change (a class's
// multiplicity, a bound, a capacity) only the components reachable from the constraints touched by
// the change are re-solved; the rest keep their rates. This mirrors SimGrid's
// maxmin/selective-update.
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
  /// Adds a constraint `sum <= capacity_Bps`. REQUIRES: capacity_Bps > 0. Returns its index.
  int add_constraint(double capacity_Bps);
  /// Changes a capacity (e.g. SMs taken away from a GPU's compute); marks it for re-solving.
  void set_capacity(int constraint, double capacity_Bps);
  double capacity(int constraint) const { return cons_[constraint].capacity; }

  /// Adds a variable (a class of identical flows) with multiplicity 0. `uses` must name distinct
  /// constraints with coefficients > 0. `bound` is the per-flow rate cap (kInf: none).
  int add_variable(std::span<const Use> uses, double bound = kInf);
  /// Sets how many flows the class holds; marks its constraints for re-solving.
  void set_multiplicity(int var, int64_t m);
  int64_t multiplicity(int var) const { return vars_[var].m; }

  /// Re-solves the components touched since the last solve. Afterwards value() holds each class's
  /// per-flow rate and changed_variables() / changed_constraints() list what was re-solved.
  void solve();
  bool dirty() const { return !touched_.empty(); }

  /// Per-flow rate of a class (bytes/s); 0 for a class of multiplicity 0.
  double value(int var) const { return vars_[var].value; }
  /// sum_v m_v a_vc x_v after the last solve.
  double load(int constraint) const { return cons_[constraint].load; }

  /// Variables (with m > 0 or just dropped to 0) re-solved by the last solve(), in index order
  /// of discovery (deterministic).
  const std::vector<int>& changed_variables() const { return comp_vars_; }
  const std::vector<int>& changed_constraints() const { return comp_cons_; }

  int num_constraints() const { return static_cast<int>(cons_.size()); }
  int num_variables() const { return static_cast<int>(vars_.size()); }
  std::span<const Use> uses(int var) const { return vars_[var].uses; }

 private:
  struct Elem {
    int var;
    double weight;  // m_v * a_vc, refreshed at solve time
    double coefficient;
  };
  struct Constraint {
    double capacity = 0;
    double load = 0;
    std::vector<Elem> elems;  // active elements (variables with m > 0)
    // solve scratch
    double remaining = 0, usage = 0;
    int unfixed = 0;
    uint32_t mark = 0;
  };
  struct Variable {
    std::vector<Use> uses;
    std::vector<int> pos;  // position of this variable's element in each constraint's elems
    double bound = kInf;
    int64_t m = 0;
    double value = 0;
    bool fixed = false;
    uint32_t mark = 0;
  };
  void touch(int constraint);
  void activate(int var);
  void deactivate(int var);
  void fix(int var, double x);

  std::vector<Constraint> cons_;
  std::vector<Variable> vars_;
  std::vector<int> touched_;        // constraints touched since the last solve
  std::vector<int> touched_vars_;   // variables dropped to m = 0 (no elements any more)
  std::vector<int> comp_vars_, comp_cons_;
  std::vector<int> work_cons_, bounded_;
  uint32_t epoch_ = 0;
};

}  // namespace sparsp::sim::lmm
