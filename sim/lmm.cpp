// Max-min solver: see the maths at the top of lmm.hpp.
#include "lmm.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sparsp::sim::lmm {

int System::add_constraint(double capacity_Bps) {
  assert(capacity_Bps > 0);
  cap_.push_back(capacity_Bps);
  st_.emplace_back();
  cmark_.push_back(0);
  nactive_.push_back(0);
  wsum_.push_back(0);
  ccomp_.push_back(-1);
  structure_changed_ = true;
  elems_.emplace_back();
  return static_cast<int>(cap_.size()) - 1;
}

void System::set_capacity(int constraint, double capacity_Bps) {
  assert(capacity_Bps > 0);
  if (cap_[constraint] == capacity_Bps) return;
  cap_[constraint] = capacity_Bps;
  touch(constraint);
}

int System::add_variable(std::span<const Use> uses, double bound) {
  if (off_.empty()) off_.push_back(0);
  for (const Use& u : uses) {
    assert(u.constraint >= 0 && u.constraint < num_constraints() && u.coefficient > 0);
    use_.push_back(u);
    pos_.push_back(-1);
  }
  off_.push_back(static_cast<int>(use_.size()));
  bound_.push_back(bound > 0 ? bound : kInf);
  value_.push_back(0);
  m_.push_back(0);
  fixed_.push_back(0);
  vmark_.push_back(0);
  return static_cast<int>(m_.size()) - 1;
}

void System::set_multiplicity(int var, int64_t m) {
  assert(m >= 0);
  const int64_t old = m_[var];
  if (old == m) return;
  m_[var] = m;
  const double md = static_cast<double>(m);
  const int b = off_[var], e = off_[var + 1];
  for (int i = b; i < e; ++i) {
    const int c = use_[i].constraint;
    auto& el = elems_[c];
    const double w = md * use_[i].coefficient;
    if (pos_[i] < 0) {  // first activation (or after a compaction): a new edge in the graph
      pos_[i] = static_cast<int>(el.size());
      el.push_back(Elem{var, w});
      structure_changed_ = true;
    } else {
      // An emptied class keeps its element with weight 0 (a "dormant" edge): the component
      // structure stays valid (a superset of the exact one, which solves the same) and a class
      // that refills costs no rebuild.
      Elem& x = el[pos_[i]];
      wsum_[c] -= x.weight;
      x.weight = w;
    }
    wsum_[c] += w;
    nactive_[c] += (m > 0 ? 1 : 0) - (old > 0 ? 1 : 0);
    if (nactive_[c] == 0) wsum_[c] = 0;  // drop any rounding residue
    touch(c);
    // Compact when dormant elements dominate (amortised O(1) per deactivation).
    const int dormant = static_cast<int>(el.size()) - nactive_[c];
    if (m == 0 && dormant > 1024 && dormant > 4 * nactive_[c]) compact(c);
  }
  if (m == 0 || b == e) touched_vars_.push_back(var);
}

void System::compact(int c) {
  auto& el = elems_[c];
  size_t keep = 0;
  for (size_t k = 0; k < el.size(); ++k) {
    const int v = el[k].var;
    int j = off_[v];
    while (use_[j].constraint != c) ++j;
    if (m_[v] == 0) {
      pos_[j] = -1;
      continue;
    }
    pos_[j] = static_cast<int>(keep);
    el[keep++] = el[k];
  }
  el.resize(keep);
  structure_changed_ = true;
}

void System::rebuild_components() {
  // Connected components of the bipartite constraint-variable graph (active and dormant edges),
  // by BFS from each constraint in index order (deterministic ids).
  ++bfs_;
  const uint32_t mark = ++epoch_;
  size_t ncomp = 0;
  for (int seed = 0; seed < num_constraints(); ++seed) {
    if (cmark_[seed] == mark) continue;
    if (ncomp == comp_c_.size()) {
      comp_c_.emplace_back();
      comp_v_.emplace_back();
      comp_mark_.push_back(0);
    }
    const int id = static_cast<int>(ncomp++);
    auto& cc = comp_c_[id];
    auto& cv = comp_v_[id];
    cc.clear();
    cv.clear();
    cmark_[seed] = mark;
    cc.push_back(seed);
    for (size_t qi = 0; qi < cc.size(); ++qi) {
      const int c = cc[qi];
      ccomp_[c] = id;
      for (const Elem& el : elems_[c]) {
        const int v = el.var;
        if (vmark_[v] == mark) continue;
        vmark_[v] = mark;
        cv.push_back(v);
        for (int i = off_[v], e = off_[v + 1]; i < e; ++i) {
          const int d = use_[i].constraint;
          if (cmark_[d] != mark) {
            cmark_[d] = mark;
            cc.push_back(d);
          }
        }
      }
    }
  }
  comp_c_.resize(ncomp);
  comp_v_.resize(ncomp);
  comp_mark_.assign(ncomp, 0);
  structure_changed_ = false;
}

void System::fix(int var, double x) {
  fixed_[var] = 1;
  value_[var] = x;
  const double m = static_cast<double>(m_[var]);
  for (int i = off_[var], e = off_[var + 1]; i < e; ++i) {
    Work& c = st_[use_[i].constraint];
    const double w = m * use_[i].coefficient;
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
  if (structure_changed_) rebuild_components();
  const uint32_t ep = ++epoch_;
  // 1. The components holding the touched constraints, from the cached component lists
  //    (rebuilt above only when an edge appeared or was compacted away; dormant edges of emptied
  //    classes keep the cache valid, at worst merging components, which solves the same).
  for (int seed : touched_) {
    const int id = ccomp_[seed];
    if (comp_mark_[id] == ep) continue;
    comp_mark_[id] = ep;
    comp_cons_.insert(comp_cons_.end(), comp_c_[id].begin(), comp_c_[id].end());
    for (int v : comp_v_[id]) {
      vmark_[v] = ep;
      comp_vars_.push_back(v);
    }
  }
  for (int v : touched_vars_) {
    if (vmark_[v] == ep) continue;
    vmark_[v] = ep;
    comp_vars_.push_back(v);
  }
  touched_.clear();
  touched_vars_.clear();

  // 2. Remaining capacity and usage of each constraint of the components.
  work_cons_.clear();
  for (int c : comp_cons_) {
    Work& w = st_[c];
    w.remaining = cap_[c];
    w.load = 0;
    w.usage = wsum_[c];
    w.unfixed = nactive_[c];
    if (w.unfixed > 0) work_cons_.push_back(c);
  }
  bounded_.clear();
  for (int v : comp_vars_) {
    fixed_[v] = 0;
    if (m_[v] == 0) {
      value_[v] = 0;
      fixed_[v] = 1;
    } else if (off_[v] == off_[v + 1]) {
      value_[v] = bound_[v];  // kInf when unbounded: the caller completes such flows at once
      fixed_[v] = 1;
    } else if (bound_[v] < kInf) {
      bounded_.push_back(v);
    }
  }
  // Bounded variables by increasing bound (ties by index: deterministic).
  if (bounded_.size() > 1)
    std::sort(bounded_.begin(), bounded_.end(), [&](int a, int b) {
      if (bound_[a] != bound_[b]) return bound_[a] < bound_[b];
      return a < b;
    });
  size_t next_bounded = 0;

  // 3. Progressive filling.
  constexpr double kRelTol = 1e-12;
  while (!work_cons_.empty()) {
    // Drop constraints whose variables are all fixed; find the lowest saturation level.
    // Compare R/U without dividing: R_c * U_best < R_best * U_c (all U > 0).
    double best_r = 1, best_u = 0;  // level +inf
    size_t keep = 0;
    for (size_t i = 0; i < work_cons_.size(); ++i) {
      const int c = work_cons_[i];
      Work& w = st_[c];
      if (w.unfixed == 0) continue;
      if (w.usage <= 0) {  // rounding residue: recompute from the unfixed elements
        double u = 0;
        for (const Elem& el : elems_[c])
          if (!fixed_[el.var]) u += el.weight;
        w.usage = u;
      }
      work_cons_[keep++] = c;
      const double r = std::max(w.remaining, 0.0);
      if (r * best_u < best_r * w.usage || best_u == 0) {
        best_r = r;
        best_u = w.usage;
      }
    }
    work_cons_.resize(keep);
    if (keep == 0) break;
    ++rounds_;
    const double level = best_r / best_u;
    while (next_bounded < bounded_.size() && fixed_[bounded_[next_bounded]]) ++next_bounded;
    if (next_bounded < bounded_.size() && bound_[bounded_[next_bounded]] <= level) {
      // Every unfixed variable whose bound is <= level takes its bound.
      for (; next_bounded < bounded_.size(); ++next_bounded) {
        const int v = bounded_[next_bounded];
        if (fixed_[v]) continue;
        if (bound_[v] > level) break;
        fix(v, bound_[v]);
      }
      continue;
    }
    // Every unfixed variable on a constraint saturated at `level` is fixed at `level`.
    const double threshold = level * (1 + kRelTol);
    for (int c : work_cons_) {
      const Work& w = st_[c];
      if (w.unfixed == 0) continue;
      if (std::max(w.remaining, 0.0) > threshold * w.usage) continue;
      for (const Elem& el : elems_[c])
        if (!fixed_[el.var]) fix(el.var, level);
    }
  }
#ifndef NDEBUG
  for (int v : comp_vars_) assert(fixed_[v] && "variable left unfixed");
  for (int c : comp_cons_) assert(st_[c].load <= cap_[c] * (1 + 1e-9) && "constraint above capacity");
#endif
}

}  // namespace sparsp::sim::lmm
