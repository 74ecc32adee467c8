// FlowNetwork: see network.hpp.
#include "network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sparsp::sim {
namespace {
// Min-heap comparator for std::*_heap.
constexpr auto flow_later = [](const auto& a, const auto& b) {
  if (a.target != b.target) return a.target > b.target;
  return a.seq > b.seq;
};
// A flow whose target is within this relative distance of V is complete (rounding of V).
constexpr double kDoneRelTol = 1e-12;
}  // namespace

int FlowNetwork::add_resource(double capacity_Bps, bool binds) {
  stats_.emplace_back();
  stats_.back().t_last = now_;
  return lmm_.add_constraint(capacity_Bps, binds);
}

void FlowNetwork::set_capacity(int resource, double capacity_Bps) {
  lmm_.set_capacity(resource, capacity_Bps);
}

int FlowNetwork::add_route(std::vector<lmm::Use> uses) {
  std::sort(uses.begin(), uses.end(),
            [](const lmm::Use& a, const lmm::Use& b) { return a.constraint < b.constraint; });
  std::vector<std::pair<int, double>> key;
  key.reserve(uses.size());
  for (const auto& u : uses) key.emplace_back(u.constraint, u.coefficient);
  auto [it, inserted] = route_ids_.emplace(std::move(key), static_cast<int>(routes_.size()));
  if (inserted) routes_.push_back(std::move(uses));
  return it->second;
}

void FlowNetwork::materialize(Class& k) {
  if (now_ > k.t_last) {
    if (k.rate > 0 && k.rate < lmm::kInf) k.v += k.rate * (now_ - k.t_last);
    k.t_last = now_;
  }
}

int64_t FlowNetwork::start_flow(int route, double bytes, double cap_Bps, uint64_t tag) {
  assert(bytes >= 0);
  const double cap = (cap_Bps > 0) ? cap_Bps : lmm::kInf;
  auto [it, inserted] = class_ids_.emplace(std::make_pair(route, cap), static_cast<int>(classes_.size()));
  if (inserted) {
    Class k;
    k.var = lmm_.add_variable(routes_[route], cap);
    k.t_last = now_;
    classes_.push_back(std::move(k));
    if (var_class_.size() <= static_cast<size_t>(classes_.back().var))
      var_class_.resize(classes_.back().var + 1, -1);
    var_class_[classes_.back().var] = it->second;
  }
  const int ci = it->second;
  Class& k = classes_[ci];
  materialize(k);
  int64_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int64_t>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[slot];
  f.cls = ci;
  f.bytes = bytes;
  f.start_s = now_;
  f.tag = tag;
  f.seq = next_seq_++;
  if (k.active_pos < 0) {
    k.active_pos = static_cast<int>(active_classes_.size());
    active_classes_.push_back(ci);
  }
  const bool new_head = k.heap.empty() || k.v + bytes < k.heap.front().target;
  k.heap.push_back(FlowRef{k.v + bytes, f.seq, slot});
  std::push_heap(k.heap.begin(), k.heap.end(), flow_later);
  lmm_.set_multiplicity(k.var, static_cast<int64_t>(k.heap.size()));
  if (new_head && !k.reschedule) {
    k.reschedule = true;
    pending_.push_back(ci);
  }
  ++active_;
  return slot;
}

void FlowNetwork::schedule(int ci) {
  Class& k = classes_[ci];
  min_valid_ = false;
  if (k.heap.empty()) {
    k.next_t = lmm::kInf;
    if (k.active_pos >= 0) {  // swap-remove from the active list
      const int last = active_classes_.back();
      active_classes_[k.active_pos] = last;
      classes_[last].active_pos = k.active_pos;
      active_classes_.pop_back();
      k.active_pos = -1;
    }
    return;
  }
  const double rem = std::max(0.0, k.heap.front().target - k.v);
  if (k.rate >= lmm::kInf || rem == 0) {
    k.next_t = k.t_last;
  } else if (k.rate <= 0) {
    k.next_t = lmm::kInf;  // starved: no completion until the rate changes
  } else {
    k.next_t = k.t_last + rem / k.rate;
  }
}

void FlowNetwork::update() {
  if (lmm_.dirty()) {
    lmm_.solve();
    for (int var : lmm_.changed_variables()) {
      const int ci = var_class_[var];
      Class& k = classes_[ci];
      const double r = lmm_.value(var);
      if (r != k.rate) {
        materialize(k);
        k.rate = r;
        if (!k.reschedule) {
          k.reschedule = true;
          pending_.push_back(ci);
        }
      }
    }
    for (int c : lmm_.changed_constraints()) {
      Stats& s = stats_[c];
      s.advance(now_);
      const double load = lmm_.load(c);
      if (load != s.load) {
        s.load = load;
        s.peak_load = std::max(s.peak_load, load);
        if (record_) {
          if (!s.timeline.empty() && s.timeline.back().t_s == now_)
            s.timeline.back().load_Bps = load;
          else
            s.timeline.push_back(LoadPoint{now_, load});
        }
      }
    }
  }
  if (!pending_.empty()) {
    for (int ci : pending_) {
      classes_[ci].reschedule = false;
      schedule(ci);
    }
    pending_.clear();
  }
}

double FlowNetwork::next_completion() {
  update();
  if (!min_valid_) {
    double t = lmm::kInf;
    for (int ci : active_classes_) t = std::min(t, classes_[ci].next_t);
    min_t_ = t;
    min_valid_ = true;
  }
  return min_t_;
}

void FlowNetwork::set_time(double t) {
  assert(t >= now_ && "simulated time went back");
  now_ = std::max(now_, t);
}

void FlowNetwork::advance(double t, std::vector<Completion>& out) {
  update();
  set_time(t);
  const size_t first = out.size();
  if (next_completion() > t) return;
  due_.clear();
  for (int ci : active_classes_)
    if (classes_[ci].next_t <= t) due_.push_back(ci);
  std::sort(due_.begin(), due_.end());
  for (int ci : due_) {
    Class& k = classes_[ci];
    materialize(k);
    // The class was timed to reach its head's target exactly now: snap V to it.
    if (!k.heap.empty()) k.v = std::max(k.v, k.heap.front().target);
    while (!k.heap.empty() &&
           k.heap.front().target <= k.v + kDoneRelTol * std::max(1.0, std::abs(k.v))) {
      const FlowRef ref = k.heap.front();
      std::pop_heap(k.heap.begin(), k.heap.end(), flow_later);
      k.heap.pop_back();
      Flow& f = flows_[ref.slot];
      out.push_back(Completion{ref.slot, f.tag, f.bytes, f.start_s, f.seq});
      free_slots_.push_back(ref.slot);
      --active_;
    }
    lmm_.set_multiplicity(k.var, static_cast<int64_t>(k.heap.size()));
    if (k.heap.empty()) k.v = 0;  // restart the counter: keeps V small
    if (!k.reschedule) {
      k.reschedule = true;
      pending_.push_back(ci);
    }
  }
  // Completion order: flow creation order, independent of class heap order.
  if (out.size() - first > 1)
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
              [](const Completion& x, const Completion& y) { return x.seq < y.seq; });
}

double FlowNetwork::flow_rate(int64_t flow) const { return classes_[flows_[flow].cls].rate; }

void FlowNetwork::flush() {
  for (Stats& s : stats_) s.advance(now_);
}

}  // namespace sparsp::sim
