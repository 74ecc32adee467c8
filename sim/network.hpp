#pragma once
// FlowNetwork: flows over abstract resources, advanced through simulated time.
//
// A flow moves `bytes` over a route (a uses-vector of (resource, coefficient)) at the rate the
// max-min solver (lmm.hpp) gives it. Flows with the same route and the same per-flow cap form a
// class: one solver variable with multiplicity = number of flows. Within a class all flows run at
// the same rate, so the class keeps one counter V(t) = integral of its per-flow rate; a flow
// started at time s with b bytes ends when V reaches V(s) + b. Each class keeps its flows in a
// min-heap of those targets and its next completion time; the network finds the earliest by a
// scan of the active classes (every re-solve of a server's single component re-times most of
// them anyway, so a scan beats a heap). An event costs the selective re-solve plus O(classes).
//
// Time is seconds (double). Ties are broken by sequence numbers (flow creation order, class
// index), never by address. Resource statistics (bytes, busy time, peak utilisation, optionally a
// load timeline) are accumulated piecewise between solves.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "lmm.hpp"

namespace sparsp::sim {

class FlowNetwork {
 public:
  struct Completion {
    int64_t flow;     ///< id returned by start_flow
    uint64_t tag;     ///< caller's tag
    double bytes;
    double start_s;   ///< when the flow started loading the resources
    uint64_t seq;     ///< creation sequence number (global order of start_flow calls)
  };
  struct LoadPoint {
    double t_s;
    double load_Bps;
  };

  /// Adds a resource (constraint) of the given capacity; returns its index. `binds = false`: the
  /// caller guarantees it can never be a bottleneck (lmm.hpp, "Constraints that never bind"):
  /// its statistics are kept, but it never joins flows into one sharing problem.
  int add_resource(double capacity_Bps, bool binds = true);
  /// Changes a capacity from now on.
  void set_capacity(int resource, double capacity_Bps);
  int num_resources() const { return lmm_.num_constraints(); }

  /// Registers a uses-vector (distinct resources, coefficients > 0); identical vectors share an id.
  int add_route(std::vector<lmm::Use> uses);

  /// Starts a flow now. cap_Bps <= 0 or kInf: uncapped. bytes >= 0. Returns the flow id.
  int64_t start_flow(int route, double bytes, double cap_Bps, uint64_t tag);

  double now() const { return now_; }
  /// Time of the next flow completion (re-solves first if anything changed); kInf when no flow.
  double next_completion();
  /// Moves the clock to t (REQUIRES: now() <= t <= next_completion()) and appends the flows that
  /// complete at t to `out`, in flow creation order.
  void advance(double t, std::vector<Completion>& out);
  /// Moves the clock to t without completions (REQUIRES: t <= next_completion()).
  void set_time(double t);

  int64_t active_flows() const { return active_; }
  /// Current per-flow rate of a running flow (after next_completion() has solved).
  double flow_rate(int64_t flow) const;

  /// Statistics up to now(); call flush() first to include the current interval.
  void flush();
  double resource_bytes(int r) const { return stats_[r].bytes; }
  double resource_busy_s(int r) const { return stats_[r].busy_s; }
  double resource_peak_load(int r) const { return stats_[r].peak_load; }
  double resource_load(int r) const { return stats_[r].load; }
  void record_timeline(bool on) { record_ = on; }
  const std::vector<LoadPoint>& timeline(int r) const { return stats_[r].timeline; }

  const lmm::System& system() const { return lmm_; }

 private:
  struct FlowRef {
    double target;
    uint64_t seq;
    int64_t slot;
  };
  struct Flow {
    int cls = -1;
    double bytes = 0;
    double start_s = 0;
    uint64_t tag = 0;
    uint64_t seq = 0;
  };
  struct Class {
    int var = -1;
    double v = 0;        // bytes per flow delivered since the class last emptied
    double t_last = 0;   // time v refers to
    double rate = 0;     // per-flow rate in force since t_last
    double next_t = lmm::kInf;  // time its head flow completes at the current rate
    int active_pos = -1;        // index in active_classes_, -1 when it holds no flow
    bool reschedule = false;
    std::vector<FlowRef> heap;  // min-heap by (target, seq)
  };
  struct Stats {
    double load = 0, t_last = 0;
    double bytes = 0, busy_s = 0, peak_load = 0;
    std::vector<LoadPoint> timeline;
    /// Accounts the constant load since t_last up to `now` (bytes and busy time).
    void advance(double now) {
      const double dt = now - t_last;
      if (dt > 0) {
        bytes += load * dt;
        if (load > 0) busy_s += dt;
      }
      t_last = now;
    }
  };
  void materialize(Class& k);
  void schedule(int cls);
  void update();

  lmm::System lmm_;
  std::map<std::vector<std::pair<int, double>>, int> route_ids_;
  std::vector<std::vector<lmm::Use>> routes_;
  std::map<std::pair<int, double>, int> class_ids_;  // (route, cap) -> class
  std::vector<Class> classes_;
  std::vector<int> var_class_;                        // lmm variable -> class
  std::vector<Flow> flows_;
  std::vector<int64_t> free_slots_;
  std::vector<int> active_classes_;
  std::vector<int> due_;
  double min_t_ = lmm::kInf;
  bool min_valid_ = true;
  std::vector<int> pending_;                          // classes needing a new schedule entry
  std::vector<Stats> stats_;
  double now_ = 0;
  uint64_t next_seq_ = 0;
  int64_t active_ = 0;
  bool record_ = false;
};

}  // namespace sparsp::sim
