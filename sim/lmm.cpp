// Max-min solver: see the maths at the top of lmm.hpp.
#include "lmm.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sparsp::sim::lmm {
namespace {
// Min-heap order of constraint levels for std::*_heap: lowest level, then component order.
constexpr auto level_after = [](const auto& a, const auto& b) {
  if (a.level != b.level) return a.level > b.level;
  return a.pos > b.pos;
};
}  // namespace

int System::add_constraint(double capacity_Bps, bool binds) {
  assert(capacity_Bps > 0);
  cap_.push_back(capacity_Bps);
  binds_.push_back(binds ? 1 : 0);
  nb_count_.push_back(0);
  st_.emplace_back();
  cmark_.push_back(0);
  cpos_.push_back(-1);
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
  if (binds_[constraint]) touch(constraint);
}

int System::add_variable(std::span<const Use> uses, double bound) {
  if (off_.empty()) off_.push_back(0);
  int binding = 0;
  for (int pass = 1; pass >= 0; --pass)  // binding constraints first, then those that never bind
    for (const Use& u : uses) {
      assert(u.constraint >= 0 && u.constraint < num_constraints() && u.coefficient > 0);
      if (binds_[u.constraint] != pass) continue;
      use_.push_back(u);
      pos_.push_back(-1);
      binding += pass;
    }
  assert((binding > 0 || uses.empty()) && "a variable needs a constraint that binds");
  bend_.push_back(off_.back() + binding);
  off_.push_back(static_cast<int>(use_.size()));
  nb_flow_.push_back(0);
  bound_.push_back(bound > 0 ? bound : kInf);
  value_.push_back(0);
  m_.push_back(0);
  fixed_.push_back(0);
  vmark_.push_back(0);
  vpos_.push_back(-1);
  return static_cast<int>(m_.size()) - 1;
}

void System::swap_elems(int c, int p, int q) {
  if (p == q) return;
  auto& el = elems_[c];
  std::swap(el[p], el[q]);
  for (int k : {p, q}) {
    const int v = el[k].var;
    for (int j = off_[v]; j < bend_[v]; ++j)
      if (use_[j].constraint == c) {
        pos_[j] = k;
        break;
      }
  }
}

void System::set_multiplicity(int var, int64_t m) {
  assert(m >= 0);
  const int64_t old = m_[var];
  if (old == m) return;
  m_[var] = m;
  const double md = static_cast<double>(m);
  const bool on = old == 0 && m > 0, off = old > 0 && m == 0;
  const int b = off_[var], e = bend_[var];
  bool new_edge = false;
  for (int i = b; i < e; ++i) {
    const int c = use_[i].constraint;
    auto& el = elems_[c];
    const double w = md * use_[i].coefficient;
    if (pos_[i] < 0) {  // first activation (or after a compaction): a new edge in the graph
      pos_[i] = static_cast<int>(el.size());
      el.push_back(Elem{var, 0.0});
      new_edge = true;
    }
    // An emptied class keeps its element with weight 0 (a "dormant" edge, kept after the active
    // ones): the component structure stays valid (a superset of the exact one, which solves the
    // same) and a class that refills costs no rebuild.
    Elem& x = el[pos_[i]];
    wsum_[c] += w - x.weight;
    x.weight = w;
    if (on) swap_elems(c, pos_[i], nactive_[c]++);
    if (off) swap_elems(c, pos_[i], --nactive_[c]);
    if (nactive_[c] == 0) wsum_[c] = 0;  // drop any rounding residue
    touch(c);
    // Compact when dormant elements dominate (amortised O(1) per deactivation).
    const int dormant = static_cast<int>(el.size()) - nactive_[c];
    if (off && dormant > 1024 && dormant > 4 * nactive_[c]) compact(c);
  }
  // New edges merge components at the next solve (merge_new_edges); otherwise keep the cached
  // component's list of active variables current (a rebuild redoes it anyway). The list a
  // variable sits in is always that of its first constraint's component.
  if (new_edge) {
    pending_new_.push_back(var);
  } else if (!structure_changed_ && b != e) {
    auto& act = comp_act_[ccomp_[use_[b].constraint]];
    if (on && vpos_[var] < 0) {
      vpos_[var] = static_cast<int>(act.size());
      act.push_back(var);
    } else if (off && vpos_[var] >= 0) {
      const int p = vpos_[var];
      act[p] = act.back();
      vpos_[act[p]] = p;
      act.pop_back();
      vpos_[var] = -1;
    }
  }
  if (m == 0 || b == e) touched_vars_.push_back(var);
}

void System::compact(int c) {
  auto& el = elems_[c];
  for (size_t k = static_cast<size_t>(nactive_[c]); k < el.size(); ++k) {
    const int v = el[k].var;
    for (int j = off_[v]; j < bend_[v]; ++j)
      if (use_[j].constraint == c) {
        pos_[j] = -1;
        break;
      }
  }
  el.resize(static_cast<size_t>(nactive_[c]));
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
      comp_act_.emplace_back();
      comp_mark_.push_back(0);
    }
    const int id = static_cast<int>(ncomp++);
    auto& cc = comp_c_[id];
    auto& act = comp_act_[id];
    cc.clear();
    act.clear();
    cmark_[seed] = mark;
    cc.push_back(seed);
    for (size_t qi = 0; qi < cc.size(); ++qi) {
      const int c = cc[qi];
      ccomp_[c] = id;
      for (const Elem& el : elems_[c]) {
        const int v = el.var;
        if (vmark_[v] == mark) continue;
        vmark_[v] = mark;
        vpos_[v] = -1;
        if (m_[v] > 0) {
          vpos_[v] = static_cast<int>(act.size());
          act.push_back(v);
        }
        for (int i = off_[v], e = bend_[v]; i < e; ++i) {
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
  comp_act_.resize(ncomp);
  comp_mark_.assign(ncomp, 0);
  structure_changed_ = false;
  pending_new_.clear();
}

void System::merge_new_edges() {
  // A new edge joins the components of its variable's constraints: append the smaller lists to
  // the largest (ties: lower id). In a server everything is one component already, so this is
  // usually just adding the variable to the active list. O(merged lists), no graph traversal.
  for (int v : pending_new_) {
    const int b = off_[v], e = bend_[v];
    int target = -1;
    for (int i = b; i < e; ++i) {
      const int id = ccomp_[use_[i].constraint];
      if (target < 0 || comp_c_[id].size() > comp_c_[target].size() ||
          (comp_c_[id].size() == comp_c_[target].size() && id < target))
        target = id;
    }
    for (int i = b; i < e; ++i) {
      const int id = ccomp_[use_[i].constraint];
      if (id == target) continue;
      for (int c : comp_c_[id]) {
        ccomp_[c] = target;
        comp_c_[target].push_back(c);
      }
      for (int w : comp_act_[id]) {
        vpos_[w] = static_cast<int>(comp_act_[target].size());
        comp_act_[target].push_back(w);
      }
      comp_c_[id].clear();
      comp_act_[id].clear();
    }
    if (m_[v] > 0 && vpos_[v] < 0) {
      vpos_[v] = static_cast<int>(comp_act_[target].size());
      comp_act_[target].push_back(v);
    }
  }
  pending_new_.clear();
}

void System::fix(int var, double x) {
  fixed_[var] = 1;
  value_[var] = x;
  const double m = static_cast<double>(m_[var]);
  for (int i = off_[var], e = bend_[var]; i < e; ++i) {
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
  if (structure_changed_)
    rebuild_components();
  else if (!pending_new_.empty())
    merge_new_edges();
  const uint32_t ep = ++epoch_;
  // 1. The components holding the touched constraints, from the cached component lists
  //    (rebuilt above only when an edge appeared or was compacted away; dormant edges of emptied
  //    classes keep the cache valid, at worst merging components, which solves the same).
  //    Constraints of the component that carry no active variable and were not touched keep
  //    their (zero) load and are skipped.
  for (int c : touched_) cmark_[c] = ep;
  for (int seed : touched_) {
    const int id = ccomp_[seed];
    if (comp_mark_[id] == ep) continue;
    comp_mark_[id] = ep;
    for (int c : comp_c_[id])
      if (nactive_[c] > 0 || cmark_[c] == ep) comp_cons_.push_back(c);
    for (int v : comp_act_[id]) {
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
    } else if (off_[v] == bend_[v]) {
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
  if (work_cons_.size() > heap_min_)
    fill_by_heap(next_bounded);
  else
    fill_by_scan(next_bounded);
#ifndef NDEBUG
  for (int v : comp_vars_) assert(fixed_[v] && "variable left unfixed");
  for (int c : comp_cons_)
    assert(st_[c].load <= cap_[c] * (1 + 1e-9) && "constraint above capacity");
#endif
  account_never_binding();
}

// The loads of the constraints that never bind follow the rates just solved: each variable of
// the re-solved components moves its contribution m_v a_vc x_v; a constraint that no variable
// loads any more is set to exactly 0 (no rounding residue). They join changed_constraints().
void System::account_never_binding() {
  const uint32_t ep = ++epoch_;
  const size_t n = comp_vars_.size();
  for (size_t i = 0; i < n; ++i) {
    const int v = comp_vars_[i];
    const int b = bend_[v], e = off_[v + 1];
    if (b == e) continue;
    const double now = m_[v] > 0 ? static_cast<double>(m_[v]) * value_[v] : 0.0;
    const double was = nb_flow_[v];
    if (now == was) continue;
    nb_flow_[v] = now;
    const int dcount = (now != 0) - (was != 0);
    for (int j = b; j < e; ++j) {
      const int c = use_[j].constraint;
      Work& w = st_[c];
      nb_count_[c] += dcount;
      w.load = nb_count_[c] == 0 ? 0.0 : w.load + use_[j].coefficient * (now - was);
      if (cmark_[c] != ep) {
        cmark_[c] = ep;
        comp_cons_.push_back(c);
      }
    }
  }
}

// A round's bound step: when the lowest unfixed bound is <= level, every unfixed variable whose
// bound is <= level takes its bound (true: the round is done). `next` walks bounded_.
bool System::fix_bounds_up_to(double level, size_t& next) {
  while (next < bounded_.size() && fixed_[bounded_[next]]) ++next;
  if (next == bounded_.size() || bound_[bounded_[next]] > level) return false;
  for (; next < bounded_.size(); ++next) {
    const int v = bounded_[next];
    if (fixed_[v]) continue;
    if (bound_[v] > level) break;
    fix(v, bound_[v]);
  }
  return true;
}

// Progressive filling, finding each round's level by a scan of the constraints (small components).
void System::fill_by_scan(size_t next_bounded) {
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
        for (int k = 0; k < nactive_[c]; ++k)
          if (!fixed_[elems_[c][k].var]) u += elems_[c][k].weight;
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
    if (fix_bounds_up_to(level, next_bounded)) continue;
    // Every unfixed variable on a constraint saturated at `level` is fixed at `level`.
    const double threshold = level * (1 + kRelTol);
    for (int c : work_cons_) {
      const Work& w = st_[c];
      if (w.unfixed == 0) continue;
      if (std::max(w.remaining, 0.0) > threshold * w.usage) continue;
      const auto& el = elems_[c];
      for (int k = 0; k < nactive_[c]; ++k)
        if (!fixed_[el[k].var]) fix(el[k].var, level);
    }
  }
}

double System::level_of(int c) {
  Work& w = st_[c];
  if (w.usage <= 0) {  // rounding residue: recompute from the unfixed elements
    double u = 0;
    for (int k = 0; k < nactive_[c]; ++k)
      if (!fixed_[elems_[c][k].var]) u += elems_[c][k].weight;
    w.usage = u;
  }
  return std::max(w.remaining, 0.0) / w.usage;
}

// Progressive filling, finding each round's level from a min-heap of the constraints' levels
// (large components). Fixing variables at the current level L only raises the level of the
// constraints they use ((R - w L) / (U - w) >= R / U when R / U >= L), so each constraint keeps
// one heap entry whose key is a lower bound of its level, re-keyed lazily when it reaches the
// top: constraints that never bind (a non-blocking spine) stay deep in the heap. Each round: the
// lowest level; bounds at or below it first (as the scan); else every constraint within the
// tolerance of it, in component order, fixes its unfixed variables.
void System::fill_by_heap(size_t next_bounded) {
  constexpr double kRelTol = 1e-12;
  heap_.clear();
  for (size_t i = 0; i < work_cons_.size(); ++i) {
    const int c = work_cons_[i];
    cpos_[c] = static_cast<int>(i);
    heap_.push_back(Level{level_of(c), static_cast<int>(i), c});
  }
  std::make_heap(heap_.begin(), heap_.end(), level_after);
  auto pop = [&] {
    const Level e = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), level_after);
    heap_.pop_back();
    return e;
  };
  auto push = [&](int c) {
    heap_.push_back(Level{level_of(c), cpos_[c], c});
    std::push_heap(heap_.begin(), heap_.end(), level_after);
  };
  while (true) {
    // The lowest current level: re-key entries that went stale until the top is current.
    double level = kInf;
    while (!heap_.empty()) {
      const Level& top = heap_.front();
      if (st_[top.c].unfixed == 0) {
        pop();
        continue;
      }
      const double cur = level_of(top.c);
      if (cur <= top.level) {
        level = cur;
        break;
      }
      push(pop().c);
    }
    if (heap_.empty()) break;
    ++rounds_;
    if (fix_bounds_up_to(level, next_bounded)) continue;
    const double threshold = level * (1 + kRelTol);
    saturated_.clear();
    while (!heap_.empty() && heap_.front().level <= threshold) {
      const Level e = pop();
      if (st_[e.c].unfixed == 0) continue;
      if (level_of(e.c) <= threshold)
        saturated_.push_back(e.c);
      else
        push(e.c);
    }
    std::sort(saturated_.begin(), saturated_.end(),
              [&](int x, int y) { return cpos_[x] < cpos_[y]; });
    bool any = false;
    for (size_t i = 0; i < saturated_.size(); ++i) {
      const int c = saturated_[i];
      const Work& w = st_[c];
      if (w.unfixed == 0) continue;
      // As the scan: skip one that the fixes before it moved off the level (rounding), unless
      // nothing was fixed yet and it is the last candidate (progress is guaranteed).
      if (std::max(w.remaining, 0.0) > threshold * w.usage && (any || i + 1 < saturated_.size())) {
        push(c);
        continue;
      }
      any = true;
      const auto& el = elems_[c];
      for (int k = 0; k < nactive_[c]; ++k)
        if (!fixed_[el[k].var]) fix(el[k].var, level);
    }
  }
}

}  // namespace sparsp::sim::lmm
