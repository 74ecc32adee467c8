// Max-min solver: see the maths at the top of lmm.hpp.
#include "lmm.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sparsp::sim::lmm {

int System::add_constraint(double capacity_Bps) {
  assert(capacity_Bps > 0);
  Constraint c;
  c.capacity = capacity_Bps;
  cons_.push_back(std::move(c));
  return static_cast<int>(cons_.size()) - 1;
}

void System::set_capacity(int constraint, double capacity_Bps) {
  assert(capacity_Bps > 0);
  if (cons_[constraint].capacity == capacity_Bps) return;
  cons_[constraint].capacity = capacity_Bps;
  touch(constraint);
}

int System::add_variable(std::span<const Use> uses, double bound) {
  Variable v;
  v.uses.assign(uses.begin(), uses.end());
  v.pos.assign(uses.size(), -1);
  v.bound = bound > 0 ? bound : kInf;
  vars_.push_back(std::move(v));
  return static_cast<int>(vars_.size()) - 1;
}

void System::touch(int constraint) {
  // touched_ may hold duplicates; solve() de-duplicates with the epoch mark.
  touched_.push_back(constraint);
}

void System::activate(int var) {
  Variable& v = vars_[var];
  for (size_t i = 0; i < v.uses.size(); ++i) {
    Constraint& c = cons_[v.uses[i].constraint];
    v.pos[i] = static_cast<int>(c.elems.size());
    c.elems.push_back(Elem{var, 0.0, v.uses[i].coefficient});
  }
}

void System::deactivate(int var) {
  Variable& v = vars_[var];
  for (size_t i = 0; i < v.uses.size(); ++i) {
    Constraint& c = cons_[v.uses[i].constraint];
    const int p = v.pos[i];
    const int last = static_cast<int>(c.elems.size()) - 1;
    if (p != last) {
      c.elems[p] = c.elems[last];
      // fix the moved element's back-pointer
      Variable& w = vars_[c.elems[p].var];
      for (size_t j = 0; j < w.uses.size(); ++j)
        if (w.uses[j].constraint == v.uses[i].constraint) {
          w.pos[j] = p;
          break;
        }
    }
    c.elems.pop_back();
    v.pos[i] = -1;
  }
}

void System::set_multiplicity(int var, int64_t m) {
  assert(m >= 0);
  Variable& v = vars_[var];
  if (v.m == m) return;
  const bool was = v.m > 0;
  v.m = m;
  if (!was && m > 0) activate(var);
  if (was && m == 0) {
    deactivate(var);
    touched_vars_.push_back(var);
  }
  for (const Use& u : v.uses) touch(u.constraint);
  if (v.uses.empty()) touched_vars_.push_back(var);
}

void System::fix(int var, double x) {
  Variable& v = vars_[var];
  v.fixed = true;
  v.value = x;
  const double m = static_cast<double>(v.m);
  for (const Use& u : v.uses) {
    Constraint& c = cons_[u.constraint];
    const double w = m * u.coefficient;
    const double used = w * x;
    c.remaining -= used;
    c.load += used;
    c.usage -= w;
    if (--c.unfixed == 0) c.usage = 0;
  }
}

void System::solve() {
  comp_vars_.clear();
  comp_cons_.clear();
  if (touched_.empty() && touched_vars_.empty()) return;
  ++epoch_;
  // 1. Collect the components reachable from the touched constraints (BFS over the bipartite
  //    graph). comp_cons_ doubles as the BFS queue.
  for (int c : touched_) {
    if (cons_[c].mark == epoch_) continue;
    cons_[c].mark = epoch_;
    comp_cons_.push_back(c);
  }
  for (size_t qi = 0; qi < comp_cons_.size(); ++qi) {
    const Constraint& c = cons_[comp_cons_[qi]];
    for (const Elem& e : c.elems) {
      Variable& v = vars_[e.var];
      if (v.mark == epoch_) continue;
      v.mark = epoch_;
      comp_vars_.push_back(e.var);
      for (const Use& u : v.uses) {
        Constraint& d = cons_[u.constraint];
        if (d.mark != epoch_) {
          d.mark = epoch_;
          comp_cons_.push_back(u.constraint);
        }
      }
    }
  }
  for (int var : touched_vars_) {
    Variable& v = vars_[var];
    if (v.mark == epoch_) continue;
    v.mark = epoch_;
    comp_vars_.push_back(var);
  }
  touched_.clear();
  touched_vars_.clear();

  // 2. Initialise remaining capacity and usage of each constraint of the component.
  for (int ci : comp_cons_) {
    Constraint& c = cons_[ci];
    c.remaining = c.capacity;
    c.load = 0;
    double usage = 0;
    for (Elem& e : c.elems) {
      e.weight = static_cast<double>(vars_[e.var].m) * e.coefficient;
      usage += e.weight;
    }
    c.usage = usage;
    c.unfixed = static_cast<int>(c.elems.size());
  }
  bounded_.clear();
  for (int vi : comp_vars_) {
    Variable& v = vars_[vi];
    v.fixed = false;
    if (v.m == 0) {
      v.value = 0;
      v.fixed = true;
      continue;
    }
    if (v.uses.empty()) {
      v.value = v.bound;  // kInf when unbounded: the engine completes such flows at once
      v.fixed = true;
      continue;
    }
    if (v.bound < kInf) bounded_.push_back(vi);
  }
  // Bounded variables by increasing bound (ties by index: deterministic).
  std::sort(bounded_.begin(), bounded_.end(), [&](int a, int b) {
    if (vars_[a].bound != vars_[b].bound) return vars_[a].bound < vars_[b].bound;
    return a < b;
  });
  size_t next_bounded = 0;

  // 3. Progressive filling over the constraints still carrying unfixed variables.
  work_cons_.clear();
  for (int ci : comp_cons_)
    if (!cons_[ci].elems.empty()) work_cons_.push_back(ci);
  constexpr double kRelTol = 1e-12;
  while (!work_cons_.empty()) {
    // Drop constraints whose variables are all fixed; find the lowest saturation level.
    double level = kInf;
    size_t keep = 0;
    for (size_t i = 0; i < work_cons_.size(); ++i) {
      const int ci = work_cons_[i];
      Constraint& c = cons_[ci];
      if (c.unfixed == 0) continue;
      if (c.usage <= 0) {  // rounding residue: recompute from the unfixed elements
        c.usage = 0;
        for (const Elem& e : c.elems)
          if (!vars_[e.var].fixed) c.usage += e.weight;
      }
      work_cons_[keep++] = ci;
      const double l = std::max(c.remaining, 0.0) / c.usage;
      if (l < level) level = l;
    }
    work_cons_.resize(keep);
    if (work_cons_.empty()) break;
    while (next_bounded < bounded_.size() && vars_[bounded_[next_bounded]].fixed) ++next_bounded;
    if (next_bounded < bounded_.size() && vars_[bounded_[next_bounded]].bound <= level) {
      // Fix every unfixed variable whose bound is <= level at its bound.
      while (next_bounded < bounded_.size()) {
        const int vi = bounded_[next_bounded];
        if (vars_[vi].fixed) {
          ++next_bounded;
          continue;
        }
        if (vars_[vi].bound > level) break;
        fix(vi, vars_[vi].bound);
        ++next_bounded;
      }
      continue;
    }
    // Fix every unfixed variable on a constraint saturated at `level`.
    const double threshold = level * (1 + kRelTol);
    for (int ci : work_cons_) {
      Constraint& c = cons_[ci];
      if (c.unfixed == 0 || c.usage <= 0) continue;
      if (std::max(c.remaining, 0.0) / c.usage > threshold) continue;
      for (size_t k = 0; k < c.elems.size(); ++k) {
        const int vi = c.elems[k].var;
        if (!vars_[vi].fixed) fix(vi, level);
      }
    }
  }
  // Variables left unfixed (only possible through rounding in usage) take the last level; none
  // expected. Clamp loads for the invariant check.
  for (int vi : comp_vars_) {
    Variable& v = vars_[vi];
    if (!v.fixed) fix(vi, 0.0);
  }
#ifndef NDEBUG
  for (int ci : comp_cons_) {
    const Constraint& c = cons_[ci];
    assert(c.load <= c.capacity * (1 + 1e-9) && "constraint above capacity");
  }
#endif
}

}  // namespace sparsp::sim::lmm
