// The discrete-event engine: see engine.hpp.
#include "engine.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <queue>

#include "network.hpp"

namespace sparsp::sim {

int find_cycle(const Problem& p, std::vector<int>* cycle) {
  const int n = static_cast<int>(p.tasks.size());
  // Edges: dep -> task, stream predecessor -> task.
  std::vector<std::vector<int>> preds(n);
  std::vector<int> last_in_stream;
  for (int i = 0; i < n; ++i) {
    preds[i] = p.tasks[i].deps;
    const int s = p.tasks[i].stream;
    if (s >= 0) {
      if (static_cast<int>(last_in_stream.size()) <= s) last_in_stream.resize(s + 1, -1);
      if (last_in_stream[s] >= 0) preds[i].push_back(last_in_stream[s]);
      last_in_stream[s] = i;
    }
  }
  // Iterative DFS with colours: 0 white, 1 on stack, 2 done.
  std::vector<int> colour(n, 0), parent(n, -1);
  std::vector<std::pair<int, size_t>> stack;
  for (int root = 0; root < n; ++root) {
    if (colour[root]) continue;
    stack.emplace_back(root, 0);
    colour[root] = 1;
    while (!stack.empty()) {
      auto& [v, k] = stack.back();
      if (k < preds[v].size()) {
        const int w = preds[v][k++];
        if (colour[w] == 1) {
          if (cycle) {
            cycle->clear();
            for (int x = v; x != w && x >= 0; x = parent[x]) cycle->push_back(x);
            cycle->push_back(w);
          }
          return w;
        }
        if (colour[w] == 0) {
          colour[w] = 1;
          parent[w] = v;
          stack.emplace_back(w, 0);
        }
      } else {
        colour[v] = 2;
        stack.pop_back();
      }
    }
  }
  return -1;
}

namespace {

// Capacity of a peer resource while it does not bind (finite: the solver compares products).
constexpr double kUnbounded_Bps = 1e30;

constexpr int kStages = 4;  // tag = task * kStages + stage; stage 3 = compute (stage 2: a
                            // compute task's work before its last wave)

struct Event {
  double t;
  uint64_t seq;
  int task;
  int stage;  // -2: release time reached; -1: launch overhead elapsed; 0/1: chunk latency
              // elapsed on that stage
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    return seq > o.seq;
  }
};

struct Pipe {
  int64_t chunks = 1;
  double chunk_bytes = 0, last_bytes = 0;
  int64_t started[2] = {0, 0};  // chunks that entered stage s
  int64_t done[2] = {0, 0};     // chunks that left stage s
  bool busy[2] = {false, false};
};

class Sim {
 public:
  Sim(const Problem& p, bool record) : p_(p), record_(record) {}
  Outcome run();

 private:
  void ready(int task, double t, int pred);
  void start(int task, int pred);
  void finish(int task);
  void advance_pipe(int task);
  void take_sms(int task, int sign);
  void count_ce(int task, int sign);
  void set_compute_capacity(int g);
  void release_ce(int gpu, int ce);
  void count_peers(int task, int sign);
  void count_switches(int task, int sign);
  void push(double t, int task, int stage) { events_.push(Event{t, seq_++, task, stage}); }
  void run_kernel(int task);
  void enter_last_wave(int task);

  const Problem& p_;
  bool record_;
  FlowNetwork net_;
  Outcome out_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  double now_ = 0;
  std::vector<int> deps_left_, last_done_pred_;
  std::vector<std::vector<int>> dependents_;
  std::vector<std::vector<int>> last_wave_dependents_;  // released when the task's last wave starts
  std::vector<uint8_t> last_wave_entered_;
  std::vector<Pipe> pipes_;
  std::vector<int> compute_res_;
  std::vector<int> device_of_;                 // per GPU: the GPU whose compute it shares (or own)
  std::vector<int> kernel_running_;            // per device: compute task holding it, -1 none
  std::vector<std::deque<int>> kernel_queue_;  // per device: ready compute tasks, FIFO
  std::vector<int> sms_taken_;
  std::vector<int> ce_transfers_per_gpu_;  // copy-engine transfers running per GPU (contention)
  std::vector<std::vector<int>> ce_busy_;  // per GPU per CE: task or -1
  std::vector<std::deque<std::pair<uint64_t, int>>> shared_q_;            // per GPU
  std::vector<std::vector<std::deque<std::pair<uint64_t, int>>>> pin_q_;  // per GPU per CE
  std::vector<double> ready_s_;
  std::vector<int> leg_route_;           // task * 2 + leg -> route id
  std::vector<int> ce_active_;           // per GPU per CE (shared mode): copies drawn on it
  std::vector<int> ce_active_base_;      // per GPU: offset into ce_active_
  std::vector<int> peer_in_, peer_out_;  // per GPU: copies received / sent (peer model)
  std::vector<int> switch_on_;           // per switched resource: running tasks switching it on
  uint64_t ready_seq_ = 0;
  int done_ = 0;
};

void Sim::take_sms(int task, int sign) {
  const Task& k = p_.tasks[task];
  if (k.comm_sms <= 0) return;
  for (int g : k.sm_gpus) {
    if (g < 0) continue;
    sms_taken_[g] += sign * k.comm_sms;
    set_compute_capacity(g);
  }
}

void Sim::set_compute_capacity(int g) {
  const GpuModel& m = p_.gpus[g];
  const int sm = std::max(1, m.sm_count);
  const int taken = std::clamp(sms_taken_[g], 0, sm - 1);  // at least one SM keeps computing
  double cap = m.sm_copy_per_sm < 0 ? static_cast<double>(sm - taken) / sm
                                    : 1.0 / (1.0 + m.sm_copy_per_sm * taken);
  if (m.ce_copy > 0 && ce_transfers_per_gpu_[g] > 0) cap /= 1.0 + m.ce_copy;
  net_.set_capacity(compute_res_[g], cap);
}

// Copy-engine transfers slow the attention of their GPU by its HBM share (GpuModel::ce_copy);
// with ce_copy 0 nothing changes, so the capacity is not touched.
void Sim::count_ce(int task, int sign) {
  const Task& k = p_.tasks[task];
  if (k.ce_gpu < 0 || k.comm_sms > 0) return;
  const int g = k.ce_gpu;
  if (!(p_.gpus[g].ce_copy > 0)) return;
  const bool before = ce_transfers_per_gpu_[g] > 0;
  ce_transfers_per_gpu_[g] += sign;
  if (before != (ce_transfers_per_gpu_[g] > 0)) set_compute_capacity(g);
}

void Sim::ready(int task, double t, int pred) {
  ready_s_[task] = t;
  last_done_pred_[task] = pred;
  const Task& k = p_.tasks[task];
  if (k.kind == Task::Kind::transfer && k.ce_gpu >= 0 && k.ce_shared) {
    const int g = k.ce_gpu;
    const int n = static_cast<int>(ce_busy_[g].size());
    int* act = &ce_active_[ce_active_base_[g]];
    int ce = k.copy_engine >= 0 ? k.copy_engine % n : 0;
    if (k.copy_engine < 0)
      for (int e = 1; e < n; ++e)
        if (act[e] < act[ce]) ce = e;
    ++act[ce];
    out_.tasks[task].copy_engine = ce;
    start(task, pred);
    return;
  }
  if (k.kind == Task::Kind::transfer && k.ce_gpu >= 0) {
    const int g = k.ce_gpu;
    auto& busy = ce_busy_[g];
    if (k.copy_engine >= 0) {
      const int ce = k.copy_engine % static_cast<int>(busy.size());
      if (busy[ce] < 0 && pin_q_[g][ce].empty()) {
        busy[ce] = task;
        out_.tasks[task].copy_engine = ce;
        start(task, pred);
      } else {
        pin_q_[g][ce].emplace_back(ready_seq_++, task);
      }
      return;
    }
    for (size_t ce = 0; ce < busy.size(); ++ce) {
      if (busy[ce] < 0 && pin_q_[g][ce].empty()) {
        busy[ce] = task;
        out_.tasks[task].copy_engine = static_cast<int>(ce);
        start(task, pred);
        return;
      }
    }
    shared_q_[g].emplace_back(ready_seq_++, task);
    return;
  }
  start(task, pred);
}

void Sim::start(int task, int pred) {
  TaskOutcome& o = out_.tasks[task];
  o.start_s = now_;
  o.pred = pred;
  const Task& k = p_.tasks[task];
  if (k.kind == Task::Kind::compute) {
    const int d = device_of_[k.gpu];
    if (k.work_s > 0 && kernel_running_[d] >= 0) {
      kernel_queue_[d].push_back(task);
      return;
    }
    if (k.work_s > 0) kernel_running_[d] = task;
    run_kernel(task);
    return;
  }
  take_sms(task, +1);
  count_ce(task, +1);
  count_peers(task, +1);
  count_switches(task, +1);
  Pipe& pp = pipes_[task];
  const bool staged = k.legs.size() == 2;
  double chunk = k.chunk_bytes;
  if (chunk <= 0 || chunk >= k.bytes) chunk = k.bytes;
  if (chunk <= 0) {
    pp.chunks = 1;
    pp.chunk_bytes = pp.last_bytes = 0;
  } else {
    pp.chunks = static_cast<int64_t>(std::ceil(k.bytes / chunk));
    pp.chunk_bytes = chunk;
    pp.last_bytes = k.bytes - chunk * static_cast<double>(pp.chunks - 1);
    if (pp.last_bytes <= 0) {  // rounding of ceil
      pp.chunks -= 1;
      pp.last_bytes = k.bytes - chunk * static_cast<double>(pp.chunks - 1);
    }
  }
  (void)staged;
  push(now_ + k.launch_s, task, -1);
}

// A kernel with tasks waiting for its last wave runs as two flows: the work before its last wave
// (stage 2), then the last wave (stage 3); otherwise as one flow (stage 3).
void Sim::run_kernel(int task) {
  const int route = leg_route_[static_cast<size_t>(task) * 2];
  const Task& k = p_.tasks[task];
  const uint64_t tag = static_cast<uint64_t>(task) * kStages;
  const double last = std::min(k.last_wave_work_s, k.work_s);
  if (last > 0 && !last_wave_dependents_[task].empty()) {
    if (last >= k.work_s) {  // one wave: it is the last from the start
      enter_last_wave(task);
    } else {
      net_.start_flow(route, k.work_s - last, 0, tag + 2);
      return;
    }
  }
  net_.start_flow(route, k.work_s, 0, tag + 3);
}

// The task's last wave starts: the tasks waiting for that moment (Task::at_last_wave) are
// released, in the order they were listed (task index order).
void Sim::enter_last_wave(int task) {
  if (last_wave_entered_[task]) return;
  last_wave_entered_[task] = 1;
  for (int d : last_wave_dependents_[task]) {
    last_done_pred_[d] = task;
    if (--deps_left_[d] == 0) ready(d, now_, task);
  }
}

void Sim::advance_pipe(int task) {
  const Task& k = p_.tasks[task];
  Pipe& pp = pipes_[task];
  const int stages = static_cast<int>(k.legs.size());
  const int64_t buffers = stages == 2 ? std::max(1, k.buffers) : INT64_MAX / 4;
  for (int s = 0; s < stages; ++s) {
    if (pp.busy[s]) continue;
    const int64_t i = pp.started[s];
    if (i >= pp.chunks) continue;
    const bool input_ready = (s == 0) ? (i < pp.done[stages - 1] + buffers) : (i < pp.done[s - 1]);
    if (!input_ready) continue;
    pp.busy[s] = true;
    pp.started[s] = i + 1;
    push(now_ + k.legs[s].latency_s + (s == 0 ? k.chunk_overhead_s : 0.0), task, s);
  }
}

void Sim::count_peers(int task, int sign) {
  const Task& k = p_.tasks[task];
  if (k.peer_gpus[0] < 0 || k.peer_gpus[1] < 0) return;
  peer_out_[k.peer_gpus[0]] += sign;
  peer_in_[k.peer_gpus[1]] += sign;
  for (int g : {k.peer_gpus[0], k.peer_gpus[1]}) {
    const GpuModel& m = p_.gpus[g];
    if (m.peer_resource < 0) continue;
    const int pairs = std::min(peer_in_[g], peer_out_[g]);
    const double cap =
        pairs <= 1 ? kUnbounded_Bps : m.peer_bidir_Bps / (1.0 + m.peer_cost * (pairs - 1));
    net_.set_capacity(m.peer_resource, cap);
  }
}

void Sim::count_switches(int task, int sign) {
  for (int s : p_.tasks[task].switches) {
    const bool was_on = switch_on_[s] > 0;
    switch_on_[s] += sign;
    const bool on = switch_on_[s] > 0;
    if (on != was_on)
      net_.set_capacity(p_.switched[s].resource, on ? p_.switched[s].on_Bps : kUnbounded_Bps);
  }
}

void Sim::release_ce(int g, int ce) {
  auto& busy = ce_busy_[g];
  const int freed_by = busy[ce];
  busy[ce] = -1;
  auto& pq = pin_q_[g][ce];
  auto& sq = shared_q_[g];
  int next = -1;
  if (!pq.empty() && (sq.empty() || pq.front().first < sq.front().first)) {
    next = pq.front().second;
    pq.pop_front();
  } else if (!sq.empty()) {
    next = sq.front().second;
    sq.pop_front();
  }
  if (next < 0) return;
  busy[ce] = next;
  out_.tasks[next].copy_engine = ce;
  // The CE, not a dependency, decided when it starts: that task is its critical predecessor.
  start(next, now_ > ready_s_[next] ? freed_by : last_done_pred_[next]);
}

void Sim::finish(int task) {
  TaskOutcome& o = out_.tasks[task];
  o.end_s = now_;
  ++done_;
  const Task& k = p_.tasks[task];
  if (k.kind == Task::Kind::compute && k.work_s > 0) {
    const int d = device_of_[k.gpu];
    kernel_running_[d] = -1;
    if (!kernel_queue_[d].empty()) {
      const int next = kernel_queue_[d].front();
      kernel_queue_[d].pop_front();
      kernel_running_[d] = next;
      // The device, not a dependency, decided when it ran: its critical predecessor.
      out_.tasks[next].pred = task;
      run_kernel(next);
    }
  }
  if (k.kind == Task::Kind::transfer) {
    take_sms(task, -1);
    count_ce(task, -1);
    count_peers(task, -1);
    count_switches(task, -1);
    if (k.ce_gpu >= 0 && o.copy_engine >= 0) {
      if (k.ce_shared)
        --ce_active_[ce_active_base_[k.ce_gpu] + o.copy_engine];
      else
        release_ce(k.ce_gpu, o.copy_engine);
    }
  }
  enter_last_wave(task);  // at its end, where it had no earlier last-wave moment
  for (int d : dependents_[task]) {
    last_done_pred_[d] = task;
    if (--deps_left_[d] == 0) ready(d, now_, task);
  }
}

Outcome Sim::run() {
  const int n = static_cast<int>(p_.tasks.size());
  const int nres = static_cast<int>(p_.capacity_Bps.size());
  const int ngpu = static_cast<int>(p_.gpus.size());
  out_.tasks.assign(n, TaskOutcome{});
  for (size_t r = 0; r < p_.capacity_Bps.size(); ++r)
    net_.add_resource(p_.capacity_Bps[r], r >= p_.never_binds.size() || !p_.never_binds[r]);
  net_.record_timeline(record_);
  compute_res_.resize(ngpu);
  device_of_.resize(ngpu);
  for (int g = 0; g < ngpu; ++g) {
    const int with = p_.gpus[g].compute_shared_with;
    device_of_[g] = with >= 0 && with < g ? device_of_[with] : g;
    compute_res_[g] = with >= 0 && with < g ? compute_res_[with] : net_.add_resource(1.0);
  }
  kernel_running_.assign(ngpu, -1);
  kernel_queue_.assign(ngpu, {});
  sms_taken_.assign(ngpu, 0);
  ce_transfers_per_gpu_.assign(ngpu, 0);
  ce_busy_.resize(ngpu);
  pin_q_.resize(ngpu);
  shared_q_.resize(ngpu);
  for (int g = 0; g < ngpu; ++g) {
    ce_busy_[g].assign(std::max(1, p_.gpus[g].copy_engines), -1);
    pin_q_[g].resize(ce_busy_[g].size());
  }
  ce_active_base_.assign(ngpu, 0);
  for (int g = 0, off = 0; g < ngpu; off += static_cast<int>(ce_busy_[g].size()), ++g)
    ce_active_base_[g] = off;
  ce_active_.assign(ngpu == 0 ? 0 : ce_active_base_.back() + ce_busy_.back().size(), 0);
  peer_in_.assign(ngpu, 0);
  peer_out_.assign(ngpu, 0);
  for (int g = 0; g < ngpu; ++g)
    if (p_.gpus[g].peer_resource >= 0) net_.set_capacity(p_.gpus[g].peer_resource, kUnbounded_Bps);
  switch_on_.assign(p_.switched.size(), 0);
  for (const SwitchedResource& s : p_.switched) net_.set_capacity(s.resource, kUnbounded_Bps);
  pipes_.assign(n, Pipe{});
  ready_s_.assign(n, 0);
  leg_route_.assign(static_cast<size_t>(n) * 2, -1);
  for (int i = 0; i < n; ++i) {
    const Task& k = p_.tasks[i];
    if (k.kind == Task::Kind::compute) {
      leg_route_[static_cast<size_t>(i) * 2] = net_.add_route({lmm::Use{compute_res_[k.gpu], 1.0}});
    } else {
      for (size_t l = 0; l < k.legs.size() && l < 2; ++l)
        leg_route_[static_cast<size_t>(i) * 2 + l] = net_.add_route(k.legs[l].uses);
    }
  }
  // Dependencies + stream order.
  deps_left_.assign(n, 0);
  last_done_pred_.assign(n, -1);
  dependents_.assign(n, {});
  last_wave_dependents_.assign(n, {});
  last_wave_entered_.assign(n, 0);
  std::vector<int> last_in_stream;
  for (int i = 0; i < n; ++i) {
    std::vector<int> d = p_.tasks[i].deps;
    const int s = p_.tasks[i].stream;
    if (s >= 0) {
      if (static_cast<int>(last_in_stream.size()) <= s) last_in_stream.resize(s + 1, -1);
      if (last_in_stream[s] >= 0) d.push_back(last_in_stream[s]);
      last_in_stream[s] = i;
    }
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    deps_left_[i] = static_cast<int>(d.size());
    const auto& lw = p_.tasks[i].at_last_wave;
    for (int x : d) {
      const bool at_wave =
          p_.tasks[x].kind == Task::Kind::compute && std::find(lw.begin(), lw.end(), x) != lw.end();
      (at_wave ? last_wave_dependents_ : dependents_)[x].push_back(i);
    }
    if (p_.tasks[i].release_s > 0) {
      ++deps_left_[i];
      push(p_.tasks[i].release_s, i, -2);
    }
  }
  for (int i = 0; i < n; ++i)
    if (deps_left_[i] == 0) ready(i, 0.0, -1);

  std::vector<FlowNetwork::Completion> done;
  while (true) {
    if (!events_.empty() && events_.top().t <= now_) {
      const Event e = events_.top();
      events_.pop();
      ++out_.events;
      if (e.stage == -2) {
        if (--deps_left_[e.task] == 0) ready(e.task, now_, last_done_pred_[e.task]);
      } else if (e.stage < 0) {
        advance_pipe(e.task);
      } else {
        const Task& k = p_.tasks[e.task];
        const Pipe& pp = pipes_[e.task];
        const int64_t i = pp.started[e.stage] - 1;
        const double b = (i == pp.chunks - 1) ? pp.last_bytes : pp.chunk_bytes;
        net_.start_flow(leg_route_[static_cast<size_t>(e.task) * 2 + e.stage], b, k.cap_Bps,
                        static_cast<uint64_t>(e.task) * kStages + e.stage);
      }
      continue;
    }
    const double t_net = net_.next_completion();
    const double t_ev = events_.empty() ? lmm::kInf : events_.top().t;
    if (t_net >= lmm::kInf && t_ev >= lmm::kInf) break;
    if (t_net <= t_ev) {
      assert(t_net >= now_ && "simulated time went back");
      now_ = std::max(now_, t_net);
      done.clear();
      net_.advance(now_, done);
      for (const auto& c : done) {
        ++out_.events;
        const int task = static_cast<int>(c.tag / kStages);
        const int stage = static_cast<int>(c.tag % kStages);
        if (stage == 3) {
          finish(task);
          continue;
        }
        if (stage == 2) {  // a compute task's work before its last wave is done
          enter_last_wave(task);
          net_.start_flow(leg_route_[static_cast<size_t>(task) * 2],
                          std::min(p_.tasks[task].last_wave_work_s, p_.tasks[task].work_s), 0,
                          static_cast<uint64_t>(task) * kStages + 3);
          continue;
        }
        Pipe& pp = pipes_[task];
        pp.busy[stage] = false;
        pp.done[stage] += 1;
        const int last = static_cast<int>(p_.tasks[task].legs.size()) - 1;
        if (stage == last && pp.done[stage] == pp.chunks) {
          finish(task);
        } else {
          advance_pipe(task);
        }
      }
    } else {
      assert(t_ev >= now_ && "simulated time went back");
      now_ = t_ev;
      net_.set_time(now_);
    }
  }
  assert(done_ == n && "tasks left unfinished (dependency cycle?)");
  net_.flush();
  out_.makespan_s = 0;
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (out_.tasks[i].end_s > out_.makespan_s || last < 0) {
      if (last < 0 || out_.tasks[i].end_s > out_.tasks[last].end_s) last = i;
    }
  }
  if (last >= 0) out_.makespan_s = out_.tasks[last].end_s;
  for (int x = last; x >= 0; x = out_.tasks[x].pred) {
    out_.critical_path.push_back(x);
    if (out_.critical_path.size() > static_cast<size_t>(n)) break;  // defensive
  }
  std::reverse(out_.critical_path.begin(), out_.critical_path.end());
  out_.bytes.resize(nres);
  out_.busy_s.resize(nres);
  out_.peak_load.resize(nres);
  if (record_) out_.timeline.resize(nres);
  for (int r = 0; r < nres; ++r) {
    out_.bytes[r] = net_.resource_bytes(r);
    out_.busy_s[r] = net_.resource_busy_s(r);
    out_.peak_load[r] = net_.resource_peak_load(r);
    if (record_)
      for (const auto& lp : net_.timeline(r)) out_.timeline[r].emplace_back(lp.t_s, lp.load_Bps);
  }
#ifndef NDEBUG
  // Bytes delivered equal bytes sent: every resource's integrated load equals the sum over the
  // transfers using it of coefficient * bytes.
  {
    std::vector<double> expect(nres, 0.0);
    for (const Task& k : p_.tasks)
      for (const NetLeg& l : k.legs)
        for (const lmm::Use& u : l.uses) expect[u.constraint] += u.coefficient * k.bytes;
    for (int r = 0; r < nres; ++r)
      assert(std::abs(expect[r] - out_.bytes[r]) <= 1e-6 * std::max(1.0, expect[r]) &&
             "bytes delivered differ from bytes sent");
  }
#endif
  return std::move(out_);
}

}  // namespace

Outcome run(const Problem& problem, bool record_timeline) {
  Sim sim(problem, record_timeline);
  return sim.run();
}

}  // namespace sparsp::sim
