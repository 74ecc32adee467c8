// Chrome / Perfetto trace JSON (the "Trace Event Format"): one process per GPU, one thread
// (track) per lane (copy engine, stream, SM/host transfers, compute), counter tracks for the
// resources that carried traffic. Times in microseconds as the format requires.
//
// Written straight into one string, event by event, rather than through a JSON document: a
// layer of a host-staged NCCL scheme has hundreds of thousands of counter points (one per
// 128 KiB SHM chunk and resource), and building them as a DOM took most of a traced study's time.
// Numbers are printed as the shortest text that reads back to the same double (std::to_chars),
// so the values are exactly those of the simulation.
#include <charconv>
#include <cmath>
#include <map>

#include "sparsp/sim.hpp"
#include "sparsp/units.hpp"

namespace sparsp::sim {
namespace {

// Appends `s` as a JSON string (quotes, backslashes and control characters escaped).
void put_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
}

// Appends a double (shortest round-trip form; non-finite values, which JSON cannot hold, as
// null, as nlohmann::json writes them).
void put_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void put_int(std::string& out, long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// A metadata event: {"name":NAME,"ph":"M","pid":P,"tid":T,"args":{KEY:VALUE}}.
void put_meta(std::string& out, const char* name, int pid, int tid, const char* key,
              const std::string* text, long long number) {
  out += "{\"name\":\"";
  out += name;
  out += "\",\"ph\":\"M\",\"pid\":";
  put_int(out, pid);
  out += ",\"tid\":";
  put_int(out, tid);
  out += ",\"args\":{\"";
  out += key;
  out += "\":";
  if (text)
    put_string(out, *text);
  else
    put_int(out, number);
  out += "}},";
}

}  // namespace

std::string to_chrome_trace(const Workload& work, const SimResult& result) {
  std::string out;
  out.reserve(256 + 200 * result.activities.size());
  out += "{\"traceEvents\":[";
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
    const std::string name = pid == 0 ? std::string("host") : "gpu" + std::to_string(pid - 1);
    put_meta(out, "process_name", pid, 0, "name", &name, 0);
    put_meta(out, "process_sort_index", pid, 0, "sort_index", nullptr, pid);
  }
  for (const auto& [key, tid] : tids)
    put_meta(out, "thread_name", key.first, tid, "name", &key.second, 0);
  const size_t nt = work.transfers.size();
  for (size_t i = 0; i < result.activities.size(); ++i) {
    const auto& a = result.activities[i];
    const int pid = pid_of(a.gpu);
    out += "{\"name\":";
    put_string(out, a.id);
    out += a.is_transfer ? ",\"cat\":\"transfer\"" : ",\"cat\":\"compute\"";
    out += ",\"ph\":\"X\",\"ts\":";
    put_number(out, units::s_to_us(a.start_s));
    out += ",\"dur\":";
    put_number(out, units::s_to_us(a.end_s - a.start_s));
    out += ",\"pid\":";
    put_int(out, pid);
    out += ",\"tid\":";
    put_int(out, tids[{pid, a.lane}]);
    out += ",\"args\":{\"where\":";
    put_string(out, a.where);
    int layer = -1;
    if (a.is_transfer) {
      out += ",\"bytes\":";
      put_number(out, a.bytes);
      const double dur = a.end_s - a.start_s;
      if (dur > 0) {
        out += ",\"avg_GBps\":";
        put_number(out, units::Bps_to_GBps(a.bytes / dur));
      }
      if (i < nt) layer = work.transfers[i].layer;
    } else if (i >= nt && i - nt < work.compute.size()) {
      layer = work.compute[i - nt].layer;
    }
    if (layer >= 0) {
      out += ",\"layer\":";
      put_int(out, layer);
    }
    out += "}},";
  }
  bool any_counter = false;
  for (const auto& r : result.resources) {
    if (r.busy_s <= 0) continue;
    any_counter = true;
    std::string name;
    put_string(name, r.name);
    for (const auto& [t, load] : r.timeline) {
      out += "{\"name\":";
      out += name;
      out += ",\"ph\":\"C\",\"ts\":";
      put_number(out, units::s_to_us(t));
      out += ",\"pid\":";
      put_int(out, res_pid);
      out += ",\"args\":{\"GBps\":";
      put_number(out, units::Bps_to_GBps(load));
      out += "}},";
    }
  }
  if (any_counter) {
    const std::string name = "resources (load, GB/s)";
    put_meta(out, "process_name", res_pid, 0, "name", &name, 0);
  }
  if (out.back() == ',') out.pop_back();
  out += "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"makespan_s\":";
  put_number(out, result.makespan_s);
  out += ",\"generator\":\"sparsp sim\"}}";
  return out;
}

}  // namespace sparsp::sim
