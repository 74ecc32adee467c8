// libFuzzer target: the workload JSON reader and simulate() on a fixed small topology. Any input
// must give either an error or a result: no crash, no hang, no sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

namespace {
const sparsp::topology::Topology& topo() {
  // 2 sockets x 1 switch x 2 GPUs (P2P) plus host memory: direct, cross-socket and host routes.
  static const auto t = sparsp::topology::Topology::from_json_text(
      R"({"schema_version": 1, "name": "fuzz", "template": {"sockets": 2, "switches_per_socket": 1,
          "gpus_per_switch": 2, "gpu_model": "L40S", "pcie_gen": 4, "p2p": true,
          "host_memory_GBps": 200}})",
      "<fuzz>");
  if (!t.ok()) __builtin_trap();
  return *t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto w = sparsp::sim::parse_workload(text, "<fuzz>");
  if (!w.ok()) return 0;
  // Keep runs short: the fuzzer explores validation and scheduling, not long pipelines.
  size_t chunks = 0;
  for (auto& t : w->transfers) {
    if (t.bytes > 1e12) t.bytes = 1e12;
    if (t.chunk_bytes > 0 && t.chunk_bytes < 1e6) t.chunk_bytes = 1e6;
    chunks += static_cast<size_t>(t.bytes / 4e6) + 1;
  }
  if (chunks > 200000) return 0;
  auto r = sparsp::sim::simulate(topo(), *w);
  if (r.ok()) (void)sparsp::sim::to_chrome_trace(*w, *r);
  return 0;
}
