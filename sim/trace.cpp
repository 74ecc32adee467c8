// Chrome / Perfetto trace JSON (the "Trace Event Format"): one process per GPU, one thread
// (track) per lane (copy engine, stream, SM/host transfers, compute), counter tracks for the
// resources that carried traffic. Times in microseconds as the format requires.
#include <map>
#include <nlohmann/json.hpp>

#include "sparsp/sim.hpp"
#include "sparsp/units.hpp"

namespace sparsp::sim {

std::string to_chrome_trace(const Workload& work, const SimResult& result) {
  using json = nlohmann::ordered_json;
  json events = json::array();
  // pid: 1 + gpu index for GPUs, 0 for host-only activities, a separate process for resources.
  int max_gpu = -1;
  for (const auto& a : result.activities) max_gpu = std::max(max_gpu, a.gpu);
  const int res_pid = max_gpu + 2;
  auto pid_of = [](int gpu) { return gpu >= 0 ? gpu + 1 : 0; };
  std::map<int, bool> used_pids;
  std::map<std::pair<int, std::string>, int> tids;  // (pid, lane) -> tid, first appearance order
  std::map<int, int> next_tid;
  for (const auto& a : result.activities) {
    const int pid = pid_of(a.gpu);
    used_pids[pid] = true;
    auto key = std::make_pair(pid, a.lane);
    if (!tids.count(key)) tids[key] = ++next_tid[pid];
  }
  for (const auto& [pid, _] : used_pids) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", pid == 0 ? std::string("host") : "gpu" + std::to_string(pid - 1)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
  }
  for (const auto& [key, tid] : tids)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", key.first}, {"tid", tid},
                      {"args", {{"name", key.second}}}});
  const size_t nt = work.transfers.size();
  for (size_t i = 0; i < result.activities.size(); ++i) {
    const auto& a = result.activities[i];
    const int pid = pid_of(a.gpu);
    json args = {{"where", a.where}};
    if (a.is_transfer) {
      args["bytes"] = a.bytes;
      const double dur = a.end_s - a.start_s;
      if (dur > 0) args["avg_GBps"] = units::Bps_to_GBps(a.bytes / dur);
      if (i < nt && work.transfers[i].layer >= 0) args["layer"] = work.transfers[i].layer;
    } else if (i >= nt && i - nt < work.compute.size() && work.compute[i - nt].layer >= 0) {
      args["layer"] = work.compute[i - nt].layer;
    }
    events.push_back({{"name", a.id}, {"cat", a.is_transfer ? "transfer" : "compute"}, {"ph", "X"},
                      {"ts", units::s_to_us(a.start_s)}, {"dur", units::s_to_us(a.end_s - a.start_s)},
                      {"pid", pid}, {"tid", tids[{pid, a.lane}]}, {"args", args}});
  }
  bool any_counter = false;
  for (const auto& r : result.resources) {
    if (r.busy_s <= 0) continue;
    any_counter = true;
    if (r.timeline.empty()) continue;
    for (const auto& [t, load] : r.timeline)
      events.push_back({{"name", r.name}, {"ph", "C"}, {"ts", units::s_to_us(t)}, {"pid", res_pid},
                        {"args", {{"GBps", units::Bps_to_GBps(load)}}}});
  }
  if (any_counter)
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", res_pid}, {"tid", 0},
                      {"args", {{"name", "resources (load, GB/s)"}}}});
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ns"},
              {"otherData", {{"makespan_s", result.makespan_s}, {"generator", "sparsp sim"}}}};
  return doc.dump();
}

}  // namespace sparsp::sim
