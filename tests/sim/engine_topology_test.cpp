// simulate() on small topologies built from JSON: closed-form times through the real Topology
// routes, and the errors of bad workloads. Each expected number is derived in its comment.
#include <doctest/doctest.h>

#include <string>

#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
// cpu0 -- sw0 (uplink 10 GB/s per direction, 1 us, no duplex limit) -- gpu0, gpu1 (20 GB/s per
// direction, both directions together 2 * 0.8 * 20 = 32 GB/s, 0.5 us each). Host memory 1 TB/s.
std::string switch_topology(const std::string& model) {
  return R"({"schema_version": 1, "name": "sw", "nodes": [
      {"id": "cpu0", "kind": "cpu", "host_memory_GBps": 1000},
      {"id": "sw0", "kind": "pcie_switch"},
      {"id": "gpu0", "kind": "gpu", "model": ")" +
         model + R"("},
      {"id": "gpu1", "kind": "gpu", "model": ")" +
         model + R"("}],
    "links": [{"a": "cpu0", "b": "sw0", "kind": "pcie", "gen": 4, "width": 16, "capacity_GBps": 10, "latency_us": 1, "duplex_factor": 1},
              {"a": "sw0", "b": "gpu0", "kind": "pcie", "gen": 4, "width": 16, "capacity_GBps": 20, "latency_us": 0.5, "duplex_factor": 0.8},
              {"a": "sw0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16, "capacity_GBps": 20, "latency_us": 0.5, "duplex_factor": 0.8}]})";
}

topology::Topology topo(const std::string& json) {
  auto t = topology::Topology::from_json_text(json, "<test>");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

sim::SimResult run(const topology::Topology& t, const std::string& workload,
                   const sim::SimOptions& options = {}) {
  auto w = sim::parse_workload(workload, "<w>");
  REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
  auto r = sim::simulate(t, *w, options);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return std::move(r).value();
}

std::string error_of(const topology::Topology& t, const std::string& workload) {
  auto w = sim::parse_workload(workload, "w.json");
  if (!w) return w.error().message;
  auto r = sim::simulate(t, *w);
  if (!r) {
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  }
  return "";
}
}  // namespace

TEST_CASE("simulate: P2P through a switch, one direction and both") {
  const auto t = topo(switch_topology("L40S"));
  // gpu0 -> sw0 -> gpu1: 20 GB/s, latency 0.5 + 0.5 us, launch 2 us:
  // 3e-6 + 1e9 / 20e9 = 0.050003 s.
  auto r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(0.050003).epsilon(1e-12));
  CHECK(r.makespan_s == r.activities[0].end_s);
  // Both directions: each GPU link carries one flow per direction, 32 GB/s together -> 16 GB/s
  // each: 3e-6 + 1e9 / 16e9 = 0.062503 s.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "b", "src": "gpu1", "dst": "gpu0", "bytes": 1e9}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(0.062503).epsilon(1e-12));
  CHECK(r.activities[1].end_s == doctest::Approx(0.062503).epsilon(1e-12));
  // Per-resource statistics: sw0<->gpu0 carried 2 GB at full utilisation.
  for (const auto& s : r.resources)
    if (s.name == "sw0<->gpu0") {
      CHECK(s.bytes == doctest::Approx(2e9));
      CHECK(s.peak_utilization == doctest::Approx(1.0));
      CHECK(s.busy_s == doctest::Approx(0.0625));
    }
}

TEST_CASE("simulate: host-staged transfer, k chunks and first-chunk latency") {
  // RTX 4090: no P2P, so gpu0 -> host0 -> gpu1 in 4 MiB chunks, 2 staging buffers.
  // Leg 1 gpu0 -> sw0 -> cpu0 is held to 10 GB/s by the uplink (up direction), leg 2
  // cpu0 -> sw0 -> gpu1 to 10 GB/s (down direction; the uplink has no duplex limit); latency of
  // each leg 0.5 + 1 = 1.5 us. Per chunk and leg: L + c/r = 1.5e-6 + 4194304 / 1e10
  // = 4.209304e-4 s. Every chunk also holds leg 1 for the staging overhead o = 6.25 us
  // (SimOptions::staging_chunk_overhead_s), so leg 1 takes o + L + c/r = 4.271804e-4 s per chunk
  // and is the bottleneck; leg 2 (4.209304e-4 s) always finds chunk i ready when chunk i-1 has
  // left it, and the buffer of chunk i (chunk i-2 out of leg 2) is free before leg 1 wants it.
  // T = launch + k (o + L + c/r) + (L + c/r).
  // 64 MiB -> k = 16: 2e-6 + 16 * 4.271804e-4 + 4.209304e-4 = 7.2578168e-3 s
  // (= the pipeline without overhead, 2e-6 + 17 * 4.209304e-4 = 7.1578168e-3, + 16 * 6.25e-6).
  // Host reads under writes off: both legs cross the uplink, so with it on leg 2 would read at
  // 0.49 of it (the host-reads test below); this case checks the pipeline alone.
  const auto t = topo(switch_topology("rtx4090"));
  sim::SimOptions plain;
  plain.host_read_under_write = 1;
  auto r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 67108864}]})",
               plain);
  CHECK(r.activities[0].end_s == doctest::Approx(7.2578168e-3).epsilon(1e-12));
  // One chunk (first-chunk latency): 2e-6 + 6.25e-6 + 2 * 4.209304e-4 = 8.501108e-4 s.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 4194304}]})",
          plain);
  CHECK(r.activities[0].end_s == doctest::Approx(8.501108e-4).epsilon(1e-12));
  // Chunk size and buffers from the workload: 1 buffer, 16 MiB chunks, 64 MiB -> k = 4 chunks
  // done strictly one after the other: launch + k (o + 2 (L + c/r)),
  // c/r = 16777216 / 1e10 = 1.6777216e-3 -> 2e-6 + 4 * (6.25e-6 + 2 * 1.6792216e-3)
  // = 1.34607728e-2 s.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 67108864, "chunk_bytes": 16777216,
       "staging_buffers": 1}]})",
          plain);
  CHECK(r.activities[0].end_s == doctest::Approx(1.34607728e-2).epsilon(1e-12));
  // Overhead 0: the bare pipeline, 2e-6 + 17 * 4.209304e-4 = 7.1578168e-3 s (as above).
  {
    auto w = sim::parse_workload(R"({"schema_version": 1, "transfers": [
        {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 67108864}]})",
                                 "<w>");
    REQUIRE(w.ok());
    sim::SimOptions o = plain;
    o.staging_chunk_overhead_s = 0;
    auto r0 = sim::simulate(t, *w, o);
    REQUIRE(r0.ok());
    CHECK(r0->activities[0].end_s == doctest::Approx(7.1578168e-3).epsilon(1e-12));
  }
  // A direct (P2P) chunked transfer pays no staging overhead: L40S has P2P, gpu0 -> sw0 -> gpu1
  // at 20 GB/s, latency 1 us per chunk: 2e-6 + 4 * (1e-6 + 16777216 / 2e10)
  // = 2e-6 + 4 * 8.398608e-4 = 3.3614432e-3 s (with the overhead it would be 2.5e-5 more).
  r = run(topo(switch_topology("L40S")), R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 67108864, "chunk_bytes": 16777216}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(3.3614432e-3).epsilon(1e-12));
  // Asking for P2P where there is none is an error naming the transfer.
  CHECK(error_of(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "route": "p2p"}]})")
            .find("w.json:/transfers/0: no route from gpu0 to gpu1") == 0);
}

TEST_CASE("simulate: peer traffic through a root complex pays its coefficient") {
  // Two L40S direct on cpu0 whose root complex carries 20 GB/s and charges peer traffic 1.2x:
  // rate 20 / 1.2 = 16.667 GB/s; latency 2 x 0.5 us; 1 GB: 3e-6 + 1e9 * 1.2 / 20e9 = 0.060003 s.
  const auto t = topo(R"({"schema_version": 1, "name": "rc", "nodes": [
      {"id": "cpu0", "kind": "cpu", "root_complex_GBps": 20, "peer_coefficient": 1.2, "host_memory_GBps": 100},
      {"id": "gpu0", "kind": "gpu", "model": "L40S"}, {"id": "gpu1", "kind": "gpu", "model": "L40S"}],
    "links": [{"a": "cpu0", "b": "gpu0", "kind": "pcie", "gen": 4, "width": 16, "latency_us": 0.5},
              {"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16, "latency_us": 0.5}]})");
  const auto r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(0.060003).epsilon(1e-12));
  for (const auto& s : r.resources)
    if (s.name == "cpu0.rc") CHECK(s.bytes == doctest::Approx(1.2e9));  // coefficient-weighted
}

TEST_CASE("simulate: SM-driven transfer slows compute on its GPUs, DAG and critical path") {
  // L40S: 142 SMs (topology preset table). c0 (1 ms of work on gpu0) runs alongside an SM-driven
  // transfer taking 32 SMs: 10 MB at 20 GB/s = 0.5 ms + 1 us latency + 2 us launch = 0.503 ms.
  // Compute runs at (142 - 32) / 142 while the transfer runs, then at full speed:
  // end = 0.503e-3 + (1e-3 - 0.503e-3 * 110 / 142).
  // c1 on gpu1 waits for the transfer (after), 0.2 ms -> ends at 0.703 ms.
  const auto t = topo(switch_topology("L40S"));
  REQUIRE(t.gpu(0).sm_count > 32);
  const double sms = t.gpu(0).sm_count;
  const auto r = run(t, R"({"schema_version": 1,
      "transfers": [{"id": "x", "src": "gpu0", "dst": "gpu1", "bytes": 1e7, "engine": "sm", "comm_sms": 32}],
      "compute": [{"id": "c0", "gpu": "gpu0", "duration_s": 0.001},
                  {"id": "c1", "gpu": "gpu1", "duration_s": 0.0002, "after": ["x"]}]})");
  const double t_x = 0.503e-3;
  CHECK(r.activities[0].end_s == doctest::Approx(t_x).epsilon(1e-12));
  CHECK(r.activities[1].end_s ==
        doctest::Approx(t_x + (1e-3 - t_x * (sms - 32) / sms)).epsilon(1e-12));
  CHECK(r.activities[2].start_s == doctest::Approx(t_x).epsilon(1e-12));
  CHECK(r.activities[2].end_s == doctest::Approx(t_x + 0.2e-3).epsilon(1e-12));
  // Makespan is c0's end (1.1 ms > 0.703 ms); the critical path is c0 alone.
  CHECK(r.makespan_s == r.activities[1].end_s);
  CHECK(r.critical_path == std::vector<std::string>{"c0"});
}

TEST_CASE("simulate: streams are FIFO and copy engines serve in order (per-engine FIFO model)") {
  sim::SimOptions fifo;
  fifo.copy_engines_shared = false;
  // L40S have 2 copy engines (preset table). Three 1 GB gpu0 -> gpu1 copies ready at 0: two run
  // together (10 GB/s each: both share gpu0->sw0 at 20 GB/s), the third waits for a CE:
  // first two end at 3e-6 + 1e9 / 10e9 = 0.100003 s; the third then runs alone at 20 GB/s:
  // 0.100003 + 3e-6 + 0.05 = 0.150006 s.
  const auto t = topo(switch_topology("L40S"));
  REQUIRE(t.gpu(0).copy_engines == 2);
  auto r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "c", "src": "gpu0", "dst": "gpu1", "bytes": 1e9}]})",
               fifo);
  CHECK(r.activities[0].end_s == doctest::Approx(0.100003).epsilon(1e-12));
  CHECK(r.activities[2].start_s == doctest::Approx(0.100003).epsilon(1e-12));
  CHECK(r.activities[2].end_s == doctest::Approx(0.150006).epsilon(1e-12));
  CHECK(r.activities[2].lane == "ce0");
  CHECK(r.critical_path == std::vector<std::string>{"a", "c"});
  // One stream: strictly one after the other, 0.050003 s each -> 0.150009 s.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "stream": "s"},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "stream": "s"},
      {"id": "c", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "stream": "s"}]})",
          fifo);
  CHECK(r.activities[2].end_s == doctest::Approx(0.150009).epsilon(1e-12));
  CHECK(r.critical_path == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("simulate: shared copy engines run every ready copy at once (default model)") {
  // The same three 1 GB copies with the default (shared) model: all start at 0 and share
  // gpu0->sw0 (20 GB/s) three ways, 6.67 GB/s each: each ends at 3e-6 + 3e9 / 20e9 = 0.150003 s
  // (FIFO: 0.100003 for two and 0.150006 for the third). Lanes: the CE with fewest copies,
  // ce0, ce1, ce0.
  const auto t = topo(switch_topology("L40S"));
  auto r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "c", "src": "gpu0", "dst": "gpu1", "bytes": 1e9}]})");
  for (int k = 0; k < 3; ++k) {
    CHECK(r.activities[k].start_s == 0);
    CHECK(r.activities[k].end_s == doctest::Approx(0.150003).epsilon(1e-12));
  }
  CHECK(r.activities[0].lane == "ce0");
  CHECK(r.activities[1].lane == "ce1");
  CHECK(r.activities[2].lane == "ce0");
}

TEST_CASE("simulate: bad workloads give one-line errors naming the place") {
  const auto t = topo(switch_topology("L40S"));
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu9", "bytes": 1}]})") ==
      "w.json:/transfers/0/dst: unknown endpoint 'gpu9'");
  // A rate cap below 1 B/s (a unit mix-up) would give times of 1e291 s.
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "rate_cap_GBps": 1e-300}]})") ==
      "w.json:/transfers/0/rate_cap_GBps: rate cap must be 0 (none) or at least 1 B/s");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": -1}]})") ==
      "w.json:/transfers/0/bytes: expected a number >= 0, got -1");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1}],
        "compute": [{"id": "a", "gpu": "gpu0", "duration_s": 1}]})") ==
      "w.json:/compute/0/id: duplicate id 'a'");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "after": ["zz"]}]})") ==
      "w.json:/transfers/0/after/0: dangling dependency 'zz' (no activity has this id)");
  const std::string cyc = error_of(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "after": ["b"]},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1, "after": ["a"]}]})");
  CHECK(cyc.find("w.json:/transfers/") == 0);
  CHECK(cyc.find("dependency cycle") != std::string::npos);
  CHECK(error_of(t, R"({"schema_version": 2})") == "w.json:/schema_version: expected 1, got 2");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "byts": 1}]})") ==
      "w.json:/transfers/0/byts: unknown field 'byts'");
  CHECK(error_of(t, "{\n\"schema_version\": 1,\n  \"transfers\": [\n}")
            .find("w.json:4: invalid JSON") == 0);
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "compute": [{"id": "c", "gpu": "host0", "duration_s": 1}]})") ==
      "w.json:/compute/0/gpu: unknown GPU 'host0'");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "engine": "dma"}]})") ==
      "w.json:/transfers/0/engine: expected \"ce\", \"sm\" or \"host\", got \"dma\"");
  // Sanity limits: 1e18 B is above 2^50 B (1 PiB); 2^49 B in 1 MiB chunks is 2^29 > 1e7 chunks.
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e18}]})") ==
      "w.json:/transfers/0/bytes: bytes must be at most 2^50 (1 PiB), got 1e+18");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 562949953421312, "chunk_bytes": 1048576}]})") ==
      "w.json:/transfers/0/chunk_bytes: more than 1e7 chunks (5.36871e+08); raise chunk_bytes");
}

TEST_CASE("simulate: deterministic, bit for bit") {
  const auto t = topo(switch_topology("rtx4090"));
  std::string w = R"({"schema_version": 1, "transfers": [)";
  for (int i = 0; i < 40; ++i) {
    if (i) w += ",";
    w += R"({"id": "t)" + std::to_string(i) + R"(", "src": "gpu)" + std::to_string(i % 2) +
         R"(", "dst": ")" + (i % 3 ? "gpu" + std::to_string(1 - i % 2) : std::string("host0")) +
         R"(", "bytes": )" + std::to_string(1000000 * (1 + i % 7)) +
         (i > 3 ? R"(, "after": ["t)" + std::to_string(i - 3) + "\"]" : "") + "}";
  }
  w += "]}";
  const auto a = run(t, w), b = run(t, w);
  REQUIRE(a.activities.size() == 40);
  for (size_t i = 0; i < a.activities.size(); ++i) {
    CHECK(a.activities[i].start_s == b.activities[i].start_s);
    CHECK(a.activities[i].end_s == b.activities[i].end_s);
  }
  CHECK(a.makespan_s == b.makespan_s);
}

TEST_CASE("simulate: a number too large for a double is an input error, not a crash") {
  // Found by fuzz/fuzz_workload.cpp: nlohmann throws out_of_range (not parse_error) here.
  const auto t = topo(switch_topology("L40S"));
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e999}]})")
          .find("w.json:/transfers/0/bytes: invalid JSON: number overflow") == 0);
}

TEST_CASE("simulate: peer concurrency caps a GPU that sends and receives several copies") {
  // Two 1 GB copies gpu0 -> gpu1 and two gpu1 -> gpu0 at once: each GPU sends 2 and receives 2,
  // m = min(2, 2) = 2, so its peer capacity is 2 * 0.8 * 20 / (1 + 0.2 * (2 - 1)) = 26.67 GB/s,
  // which all four copies cross (each touches both GPUs): 4 r <= 26.67 -> r = 6.667 GB/s, below
  // the duplex bound 4 r <= 32 (r = 8). End: 1 us path + 2 us launch + 1e9 / 6.667e9 = 0.150003 s
  // (0.125003 s with the cost off).
  const auto t = topo(switch_topology("L40S"));
  const std::string w = R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "c", "src": "gpu1", "dst": "gpu0", "bytes": 1e9},
      {"id": "d", "src": "gpu1", "dst": "gpu0", "bytes": 1e9}]})";
  auto r = run(t, w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.150003).epsilon(1e-12));
  sim::SimOptions off;
  off.peer_concurrency_cost = 0;
  r = run(t, w, off);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.125003).epsilon(1e-12));
  // One copy each way (m = 1): no cap; the duplex bound 2 r <= 32 gives 16 GB/s: 0.0625 + 3e-6.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9},
      {"id": "c", "src": "gpu1", "dst": "gpu0", "bytes": 1e9}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(0.062503).epsilon(1e-12));
}

// Two SM-driven 1 GB copies gpu0 -> gpu1 and two gpu1 -> gpu0 at once (m = 2 at each GPU).
const std::string kFourSmCopies = R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "engine": "sm"},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "engine": "sm"},
      {"id": "c", "src": "gpu1", "dst": "gpu0", "bytes": 1e9, "engine": "sm"},
      {"id": "d", "src": "gpu1", "dst": "gpu0", "bytes": 1e9, "engine": "sm"}]})";

TEST_CASE(
    "simulate: NCCL P2P (SM-driven) copies count in peer concurrency, a topology sets its cost") {
  // The four 1 GB copies of the test above, SM-driven (NCCL's P2P transport: SM stores into the
  // peer's memory are PCIe peer writes too): same cap, 4 r <= 2 * 0.8 * 20 / (1 + 0.2) = 26.67
  // GB/s -> r = 6.667 GB/s, end 1e9 / 6.667e9 + 1 us path + 2 us launch = 0.150003 s.
  const std::string w = kFourSmCopies;
  auto r = run(topo(switch_topology("L40S")), w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.150003).epsilon(1e-12));
  // The machine's own cost replaces the default: "peer_concurrency_cost": 5.4 (the 8x L20 file's,
  // fitted to NVIDIA/nccl issue 1603) -> 4 r <= 32 / (1 + 5.4) = 5 GB/s -> r = 1.25 GB/s, end
  // 1e9 / 1.25e9 + 3e-6 = 0.800003 s.
  std::string costly = switch_topology("L40S");
  costly.insert(1, R"("peer_concurrency_cost": 5.4, )");
  r = run(topo(costly), w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.800003).epsilon(1e-12));
  // The key survives the JSON writer (topo show --json, calibrate's topology output).
  CHECK(topo(topo(costly).to_json()).options().peer_concurrency_cost == 5.4);
  CHECK(topo(switch_topology("L40S")).options().peer_concurrency_cost < 0);  // not given
  // Cost 0 in the topology turns the cap off (duplex bound 4 r <= 32: 0.125003 s).
  std::string off = switch_topology("L40S");
  off.insert(1, R"("peer_concurrency_cost": 0, )");
  r = run(topo(off), w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.125003).epsilon(1e-12));
}

TEST_CASE("simulate: a switch chip's peer-concurrency cost replaces the machine's") {
  // The four SM-driven 1 GB copies of the test above, gpu0 and gpu1 both below sw0, now a chip
  // "x". With "chips": {"x": {"peer_concurrency_cost": 5.4}} and no machine key, both GPUs take
  // the chip's cost: 4 r <= 2 * 0.8 * 20 / (1 + 5.4 * (2 - 1)) = 5 GB/s -> r = 1.25 GB/s, end
  // 1e9 / 1.25e9 + 1 us path + 2 us launch = 0.800003 s.
  const std::string w = kFourSmCopies;
  std::string chip = switch_topology("L40S");
  chip.replace(chip.find(R"("kind": "pcie_switch")"), 21, R"("kind": "pcie_switch", "chip": "x")");
  std::string costly = chip;
  costly.insert(1, R"("chips": {"x": {"peer_concurrency_cost": 5.4}}, )");
  auto r = run(topo(costly), w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.800003).epsilon(1e-12));
  CHECK(topo(costly).peer_concurrency_cost(0) == 5.4);
  // The chip's 0 wins over the machine's 5.4: no cap, the duplex bound 4 r <= 32 GB/s gives
  // r = 8 GB/s: 0.125 s + 3 us.
  std::string off = chip;
  off.insert(1, R"("peer_concurrency_cost": 5.4, "chips": {"x": {"peer_concurrency_cost": 0}}, )");
  r = run(topo(off), w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.125003).epsilon(1e-12));
  // A chip without its own cost (only a fabric cap) keeps the machine's 5.4: 0.800003 s again.
  std::string machine = chip;
  machine.insert(1, R"("peer_concurrency_cost": 5.4, "chips": {"x": {"fabric_GBps": 100}}, )");
  r = run(topo(machine), w);
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(0.800003).epsilon(1e-12));
  // Neither given: < 0 (the simulator's default 0.2 applies). The chip's cost survives the
  // JSON writer.
  CHECK(topo(chip).peer_concurrency_cost(1) < 0);
  CHECK(topo(topo(costly).to_json()).peer_concurrency_cost(1) == 5.4);
}

TEST_CASE("simulate: host reads under writes inside a cluster's server") {
  // Two nodes of switch_topology("L40S") joined by a rail fabric; node 1 runs the workload of the
  // test above on its own GPUs and host. Nothing leaves the node, so the times are the server's:
  // the write ends at 0.1 s + 3.5 us, the read gets 0.49 x 10 = 4.9 GB/s meanwhile (0.49e9 B),
  // then 10 GB/s for 0.51e9 B: 0.151 s + 3.5 us. The link ends are prefixed ("node1/cpu0",
  // "node1/sw0"), so the rule must find the uplink's two directions by link, not by name.
  auto cluster = [](const std::string& server_extra) {
    std::string server = switch_topology("L40S");
    server.insert(1, server_extra);
    return R"({"schema_version": 1, "name": "c", "cluster": {"version": 1, "nodes": 2, "server": )" +
           server + R"(, "nics": [{"parent": "cpu0", "model": "ConnectX-6 Dx"}],
           "fabric": {"kind": "rail", "port_GBps": 12.5, "latency_us": 1}}})";
  };
  const std::string w = R"({"schema_version": 1, "transfers": [
      {"id": "w", "src": "node1/gpu1", "dst": "node1/host0", "bytes": 1e9},
      {"id": "r", "src": "node1/host0", "dst": "node1/gpu0", "bytes": 1e9}]})";
  auto r = run(topo(cluster("")), w);
  CHECK(r.activities[0].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
  CHECK(r.activities[1].end_s == doctest::Approx(0.1510035).epsilon(1e-12));
  // The server's own fraction 0.25 applies in every node: 2.5 GB/s for 0.1 s (0.25e9 B), then
  // 10 GB/s for 0.75e9 B (0.075 s): 0.175 s + 3.5 us.
  r = run(topo(cluster(R"("host_read_under_write": 0.25, )")), w);
  CHECK(r.activities[1].end_s == doctest::Approx(0.1750035).epsilon(1e-12));
}

TEST_CASE("simulate: push vs pull (driver src / dst)") {
  const auto t = topo(switch_topology("L40S"));
  // Pull: gpu1's engine drives gpu0 -> gpu1 (drawn under gpu1, on its CE).
  auto r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "driver": "dst"},
      {"id": "b", "src": "host0", "dst": "gpu0", "bytes": 1e9},
      {"id": "c", "src": "gpu0", "dst": "host0", "bytes": 1e9, "driver": "src"}]})");
  CHECK(r.activities[0].gpu == 1);
  CHECK(r.activities[1].gpu == 0);  // default for host -> GPU: the destination
  CHECK(r.activities[2].gpu == 0);
  // Alone, a pull moves at the link rate: 1e9 / 20e9 + 3e-6.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "driver": "dst"}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(0.050003).epsilon(1e-12));
  // Under peer contention a pull costs 1 / 0.9 of the peer capacity: the four copies of the test
  // above, all pulled: 4 r / 0.9 <= 26.67 -> r = 6 GB/s -> 1e9 / 6e9 + 3e-6 = 0.1666697 s.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "driver": "dst"},
      {"id": "b", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "driver": "dst"},
      {"id": "c", "src": "gpu1", "dst": "gpu0", "bytes": 1e9, "driver": "dst"},
      {"id": "d", "src": "gpu1", "dst": "gpu0", "bytes": 1e9, "driver": "dst"}]})");
  for (int k = 0; k < 4; ++k)
    CHECK(r.activities[k].end_s == doctest::Approx(1.0 / 6 + 3e-6).epsilon(1e-12));
  // A driver end without a copy engine, and a driver that is not src/dst, are input errors.
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "host0", "dst": "gpu0", "bytes": 1, "driver": "src"}]})") ==
      "w.json:/transfers/0/driver: driver \"src\" is host0, which has no copy engine");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "driver": "both"}]})") ==
      "w.json:/transfers/0/driver: expected \"src\" or \"dst\", got \"both\"");
  CHECK(
      error_of(
          t,
          R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1, "staging": "fast"}]})") ==
      "w.json:/transfers/0/staging: expected \"pipelined\" or \"driver\", got \"fast\"");
}

TEST_CASE("simulate: host reads under writes (a copy-engine read of host memory beside a write)") {
  // switch_topology: the uplink cpu0 -- sw0 carries 10 GB/s per direction (Gen 4). gpu1 writes
  // 1 GB to host0 (D2H, up the uplink) while gpu0 reads 1 GB from host0 (H2D, down the uplink).
  // Both start at 2 us launch + 1.5 us path = 3.5 us. The write runs at 10 GB/s and ends at
  // 0.1 s + 3.5 us; meanwhile the read gets 0.49 x 10 = 4.9 GB/s (0.49e9 B by then), then the
  // whole 10 GB/s for the other 0.51e9 B: 0.051 s more, end 0.151 s + 3.5 us.
  const auto t = topo(switch_topology("L40S"));
  const std::string w = R"({"schema_version": 1, "transfers": [
      {"id": "w", "src": "gpu1", "dst": "host0", "bytes": 1e9},
      {"id": "r", "src": "host0", "dst": "gpu0", "bytes": 1e9}]})";
  auto r = run(t, w);
  CHECK(r.activities[0].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
  CHECK(r.activities[1].end_s == doctest::Approx(0.1510035).epsilon(1e-12));
  // Off (fraction 1): both at 10 GB/s, 0.1 s + 3.5 us.
  sim::SimOptions off;
  off.host_read_under_write = 1;
  r = run(t, w, off);
  CHECK(r.activities[1].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
  // A Gen 5 uplink keeps both directions (host_read_under_write_max_gen 4): 0.1 s + 3.5 us.
  std::string gen5 = switch_topology("L40S");
  gen5.replace(gen5.find(R"("gen": 4, "width": 16, "capacity_GBps": 10)"), 10,
               R"("gen": 5, )");  // uplink only
  r = run(topo(gen5), w);
  CHECK(r.activities[1].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
  // The read alone: 10 GB/s, 0.1 s + 3.5 us (no write switches the limit on).
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "r", "src": "host0", "dst": "gpu0", "bytes": 1e9}]})");
  CHECK(r.activities[0].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
  // The machine's own fraction (topology "host_read_under_write": 0.25) replaces 0.49: the read
  // gets 2.5 GB/s for the write's 0.1 s (0.25e9 B), then 10 GB/s for 0.75e9 B (0.075 s): end
  // 0.175 s + 3.5 us. It survives the JSON writer; 1 turns the rule off (0.1 s + 3.5 us).
  std::string quarter = switch_topology("L40S");
  quarter.insert(1, R"("host_read_under_write": 0.25, )");
  r = run(topo(quarter), w);
  CHECK(r.activities[1].end_s == doctest::Approx(0.1750035).epsilon(1e-12));
  CHECK(topo(topo(quarter).to_json()).options().host_read_under_write == 0.25);
  CHECK(topo(switch_topology("L40S")).options().host_read_under_write < 0);  // not given
  std::string one = switch_topology("L40S");
  one.insert(1, R"("host_read_under_write": 1, )");
  r = run(topo(one), w);
  CHECK(r.activities[1].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
  // SM-driven copies are not copy-engine reads: engine "sm" both ways, 0.1 s + 3.5 us.
  r = run(t, R"({"schema_version": 1, "transfers": [
      {"id": "w", "src": "gpu1", "dst": "host0", "bytes": 1e9, "engine": "sm"},
      {"id": "r", "src": "host0", "dst": "gpu0", "bytes": 1e9, "engine": "sm"}]})");
  CHECK(r.activities[1].end_s == doctest::Approx(0.1000035).epsilon(1e-12));
}

TEST_CASE("simulate: a 2-rank ring step released at the attention's last wave") {
  // Rank 0's attention a0 (4 ms, 4 waves: last_wave_fraction 0.25) is launched beside the
  // exchange kv of its next step (gpu0 -> gpu1, 1e8 B at 20 GB/s = 5 ms + 1 us latency + 2 us
  // launch); rank 1's attention b1 (4 ms) needs kv. The exchange starts as a0's last wave
  // starts: 4 ms * (1 - 0.25) = 3 ms; it ends at 3 + 5.003 = 8.003 ms, b1 at 12.003 ms.
  const auto t = topo(switch_topology("L40S"));
  const std::string ring = R"({"schema_version": 1,
      "transfers": [{"id": "kv", "src": "gpu0", "dst": "gpu1", "bytes": 1e8, "engine": "sm",
                     "after": ["a0"], "released_by_last_wave": ["a0"]}],
      "compute": [{"id": "a0", "gpu": "gpu0", "duration_s": 0.004, "last_wave_fraction": 0.25},
                  {"id": "b1", "gpu": "gpu1", "duration_s": 0.004, "after": ["kv"]}]})";
  auto r = run(t, ring);
  CHECK(r.activities[0].start_s == doctest::Approx(0.003).epsilon(1e-12));
  CHECK(r.activities[0].end_s == doctest::Approx(0.008003).epsilon(1e-9));
  CHECK(r.makespan_s == doctest::Approx(0.012003).epsilon(1e-9));
  // The exchange takes comm_sms of gpu0 (SM-driven, default 0 here): a0 still ends at 4 ms.
  CHECK(r.activities[1].end_s == doctest::Approx(0.004).epsilon(1e-12));
  // Without released_by_last_wave: after a0's end, today's high_priority_comm=0 rule:
  // 4 + 5.003 = 9.003 ms, b1 at 13.003 ms; one step's last wave (1 ms) longer.
  std::string at_end = ring;
  at_end.replace(at_end.find(R"(, "released_by_last_wave": ["a0"])"),
                 std::string(R"(, "released_by_last_wave": ["a0"])").size(), "");
  r = run(t, at_end);
  CHECK(r.activities[0].start_s == doctest::Approx(0.004).epsilon(1e-12));
  CHECK(r.makespan_s == doctest::Approx(0.013003).epsilon(1e-9));
  // Bad input: an id not in after; a transfer named; a fraction above 1.
  CHECK(error_of(t, R"({"schema_version": 1,
      "transfers": [{"id": "kv", "src": "gpu0", "dst": "gpu1", "bytes": 1e8,
                     "released_by_last_wave": ["a0"]}],
      "compute": [{"id": "a0", "gpu": "gpu0", "duration_s": 0.004}]})") ==
        "w.json:/transfers/0/released_by_last_wave/0: 'a0' is not in this transfer's after");
  CHECK(error_of(t, R"({"schema_version": 1,
      "transfers": [{"id": "x", "src": "gpu0", "dst": "gpu1", "bytes": 1},
                    {"id": "kv", "src": "gpu0", "dst": "gpu1", "bytes": 1e8, "after": ["x"],
                     "released_by_last_wave": ["x"]}]})") ==
        "w.json:/transfers/1/released_by_last_wave/0: 'x' is a transfer; only a compute task "
        "has a last wave");
  CHECK(error_of(t, R"({"schema_version": 1,
      "compute": [{"id": "a0", "gpu": "gpu0", "duration_s": 0.004, "last_wave_fraction": 1.5}]})") ==
        "w.json:/compute/0/last_wave_fraction: expected a fraction in 0..1, got 1.5");
}
