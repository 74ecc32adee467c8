// NCCL collectives as the simulator times them: nccl::transfer_timing (include/sparsp/
// nccl_model.hpp), the measured points of the topology's nccl.collectives, and simulate() on
// transfers tagged with a collective (sim/simulate.cpp apply_collective). Each expected number
// is derived by hand in its comment from NCCL 2.30.7's constants (tuning.cc, enqueue.cc, init.cc).
#include <doctest/doctest.h>

#include <string>

#include "sparsp/nccl_model.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;
using namespace sparsp::sim::nccl;

namespace {

topology::Topology topo(const std::string& json) {
  auto t = topology::Topology::from_json_text(json, "<test>");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

// Four GPUs under one CPU, each on its own 50 GB/s PCIe link (latency 0, full duplex: 50 GB/s
// each way at once), no peer access, so
// every GPU-to-GPU route is host-staged; `nccl` is spliced into the root object.
std::string four_gpus(const std::string& nccl) {
  std::string links, nodes;
  for (int g = 0; g < 4; ++g) {
    const std::string id = "gpu" + std::to_string(g);
    nodes += R"(, {"id": ")" + id + R"(", "kind": "gpu", "model": "generic"})";
    links +=
        std::string(g ? ", " : "") + R"({"a": "cpu0", "b": ")" + id +
        R"(", "kind": "pcie", "gen": 4, "width": 16, "capacity_GBps": 50, "latency_us": 0, "duplex_factor": 1})";
  }
  return R"({"schema_version": 1, "name": "x4", "p2p": false, )" + nccl +
         R"( "nodes": [{"id": "cpu0", "kind": "cpu"})" + nodes + R"(], "links": [)" + links + "]}";
}

// The 12 transfers of a 4-rank all-to-all of 4e8 bytes per rank (1e8 to each other rank),
// SM-driven and host-staged (NCCL's SHM), tagged as one all-to-all.
std::string alltoall_4(bool tagged) {
  std::string ts;
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) {
      if (s == d) continue;
      if (!ts.empty()) ts += ", ";
      ts += R"({"id": "t)" + std::to_string(s) + std::to_string(d) + R"(", "src": "gpu)" +
            std::to_string(s) + R"(", "dst": "gpu)" + std::to_string(d) +
            R"(", "bytes": 1e8, "engine": "sm", "route": "host_staged")";
      if (tagged) ts += R"(, "collective": {"op": "all_to_all", "ranks": 4, "bytes": 4e8})";
      ts += "}";
    }
  return R"({"schema_version": 1, "transfers": [)" + ts + "]}";
}

double makespan(const topology::Topology& t, const std::string& workload) {
  auto w = sim::parse_workload(workload, "<w>");
  REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
  auto r = sim::simulate(t, *w);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r->makespan_s;
}

}  // namespace

TEST_CASE("nccl collectives: send/recv protocol, channels and latency (enqueue.cc, paths.cc)") {
  // PCIe: 2 channels per peer; NVLink on Hopper: 2 x floor(368 / 20.6) = 2 x 17 = 34.
  CHECK(p2p_channels_per_peer(HwClass::pci, 24e9, Arch::ampere) == 2);
  CHECK(p2p_channels_per_peer(HwClass::nvlink, 368e9, Arch::hopper) == 34);
  // LL up to channels x 16384 bytes: 2 channels -> 32768 LL, 32769 Simple.
  CHECK(p2p_protocol(32768, 2) == Protocol::ll);
  CHECK(p2p_protocol(32769, 2) == Protocol::simple);
  // Latency: base + one PCI hop. LL 6.6 + 1.0 = 7.6 us; Simple 8.4 + 5.7 = 14.1 us.
  CHECK(p2p_latency_s(Protocol::ll, HwClass::pci) == doctest::Approx(7.6e-6));
  CHECK(p2p_latency_s(Protocol::simple, HwClass::pci) == doctest::Approx(14.1e-6));
}

TEST_CASE("nccl collectives: transfer timing of a ring all-gather step and an all-to-all pair") {
  // Ring all-gather, 8 PCIe GPUs, path 24 GB/s -> 2 channels x 12 GB/s; 64 MiB is Simple
  // (above the 951,771-byte LL/Simple switch of nccl_model_test). Latency 8.4 + 7 x 5.7 =
  // 48.3 us over 7 steps = 6.9 us per step; cap = bus bandwidth 24 GB/s.
  TransferContext ring;
  ring.op = Collective::all_gather;
  ring.ranks = 8;
  ring.collective_bytes = 64.0 * 1024 * 1024;
  ring.transfer_bytes = ring.collective_bytes / 8;
  ring.path_Bps = 24e9;
  const TransferTiming r = transfer_timing(ring, {});
  CHECK(r.protocol == Protocol::simple);
  CHECK(r.latency_s == doctest::Approx(48.3e-6 / 7));
  CHECK(r.cap_Bps == doctest::Approx(24e9));
  CHECK_FALSE(r.from_points);
  // Seven steps of 8 MiB at 24 GB/s + 48.3 us = ring_time_s (the collective's NCCL time).
  CHECK(7 * (r.latency_s + ring.transfer_bytes / r.cap_Bps) ==
        doctest::Approx(ring_time_s(Collective::all_gather, Protocol::simple, ring.collective_bytes,
                                    RingSetup{8, 2, 12e9, HwClass::pci, Arch::ampere, false})));
  // All-to-all pair of 16 KiB over SHM (2 channels): LL, 7.6 us, half the path's 20 GB/s.
  TransferContext a2a;
  a2a.ranks = 8;
  a2a.collective_bytes = 8 * 16384.0;
  a2a.transfer_bytes = 16384;
  a2a.transport = Transport::shm;
  a2a.path_Bps = 20e9;
  const TransferTiming a = transfer_timing(a2a, {});
  CHECK(a.protocol == Protocol::ll);
  CHECK(a.latency_s == doctest::Approx(7.6e-6));
  CHECK(a.cap_Bps == doctest::Approx(10e9));
}

TEST_CASE("nccl collectives: measured points interpolate in bytes and replace the model") {
  const std::vector<CollectivePoint> pts = {{8, 1e6, 100e-6, Transport::shm},
                                            {8, 3e6, 300e-6, Transport::shm},
                                            {8, 1e6, 50e-6, Transport::p2p}};
  // Halfway between 1e6 (100 us) and 3e6 (300 us): 200 us.
  CHECK(interpolate_points(pts, 8, 2e6, Transport::shm) == doctest::Approx(200e-6));
  CHECK(interpolate_points(pts, 8, 1e6, Transport::shm) == doctest::Approx(100e-6));
  CHECK(interpolate_points(pts, 8, 1e6, Transport::p2p) == doctest::Approx(50e-6));
  // Not covered: outside the range, another transport's range, other GPU counts.
  CHECK(interpolate_points(pts, 8, 4e6, Transport::shm) < 0);
  CHECK(interpolate_points(pts, 8, 2e6, Transport::p2p) < 0);
  CHECK(interpolate_points(pts, 4, 2e6, Transport::shm) < 0);
  // All-to-all of 2e6 bytes per rank over SHM, 250,000 bytes per pair (Simple: 14.1 us): the
  // point's 200 us keeps the latency 14.1 us, the cap puts the rest on the bytes:
  // 250000 / (200 - 14.1) us = 1.34481 GB/s.
  TransferContext x;
  x.ranks = 8;
  x.collective_bytes = 2e6;
  x.transfer_bytes = 250000;
  x.transport = Transport::shm;
  x.path_Bps = 20e9;
  const TransferTiming t = transfer_timing(x, pts);
  CHECK(t.from_points);
  CHECK(t.latency_s == doctest::Approx(14.1e-6));
  CHECK(t.cap_Bps == doctest::Approx(250000 / (200e-6 - 14.1e-6)));
}

TEST_CASE("nccl collectives: a 4-GPU all-to-all over SHM in the simulator, model and points") {
  // Model: every pair 1e8 bytes (Simple), latency 14.1 us (no 2 us launch). Each GPU's link
  // carries its 3 outgoing D2H legs one way and its 3 incoming H2D legs the other (full duplex),
  // so each transfer moves at 50 / 3 GB/s: 1e8 / 16.667e9 = 6 ms; NCCL's SHM pipeline (128 KiB
  // chunks, 16 slots, no per-chunk launch) adds one chunk on the second leg at the same rate,
  // 131072 / 16.667e9 = 7.86 us. Total 14.1 us + 6 ms + 7.86 us = 6.02197 ms.
  const auto t = topo(four_gpus(""));
  const double rate = 50e9 / 3;
  CHECK(makespan(t, alltoall_4(true)) ==
        doctest::Approx(14.1e-6 + 1e8 / rate + 131072 / rate).epsilon(1e-4));
  // Untagged (today's staged pipeline): 2 us launch, 4 MiB chunks through 2 buffers with 6.25 us
  // each: slower than NCCL's pipeline, so the tag changes the time.
  CHECK(makespan(t, alltoall_4(false)) > 14.1e-6 + 1e8 / rate + 131072 / rate + 1e-6);
  // Points for 4 GPUs over SHM at 2e8 (10 ms) and 8e8 (40 ms): at 4e8, 20 ms. Latency 14.1 us,
  // cap 1e8 / (20 ms - 14.1 us) = 5.0035 GB/s (below the 16.7 GB/s the links give), plus the
  // last chunk at that cap: 20 ms + 131072 / 5.0035e9 = 20.0262 ms.
  const auto tp = topo(four_gpus(R"("nccl": {"collectives": {"all_to_all": [
      {"gpus": 4, "bytes": 2e8, "time_us": 10000, "transport": "shm"},
      {"gpus": 4, "bytes": 8e8, "time_us": 40000, "transport": "shm"}]}},)"));
  const double cap = 1e8 / (20e-3 - 14.1e-6);
  CHECK(makespan(tp, alltoall_4(true)) == doctest::Approx(20e-3 + 131072 / cap).epsilon(1e-4));
}

TEST_CASE("nccl collectives: JSON round trip, p2p_level, and bad points") {
  const std::string good = four_gpus(R"("nccl": {"p2p_level": "SYS", "collectives": {
      "all_gather": [{"gpus": 4, "bytes": 1048576, "time_us": 123.456, "transport": "p2p"}]}},)");
  const auto t = topo(good);
  REQUIRE(t.options().nccl.collectives.size() == 1);
  CHECK(t.options().nccl.p2p_level == "SYS");
  CHECK(t.options().nccl.collectives[0].second[0].time_s == doctest::Approx(123.456e-6));
  auto back = topology::Topology::from_json_text(t.to_json(), "<back>");
  REQUIRE(back.ok());
  CHECK(back->to_json() == t.to_json());
  auto err = [](const std::string& nccl) {
    auto e = topology::Topology::from_json_text(four_gpus(nccl), "t.json");
    REQUIRE_FALSE(e.ok());
    return e.error().message;
  };
  CHECK(err(R"("nccl": {"p2p_level": "NODE"},)").find("t.json:/nccl/p2p_level:") == 0);
  CHECK(err(R"("nccl": {"collectives": {"alltoall": []}},)")
            .find("t.json:/nccl/collectives/alltoall:") == 0);
  CHECK(
      err(R"("nccl": {"collectives": {"all_to_all": [{"gpus": 4, "bytes": 0, "time_us": 1, "transport": "shm"}]}},)")
          .find("t.json:/nccl/collectives/all_to_all/0/bytes:") == 0);
  CHECK(
      err(R"("nccl": {"collectives": {"all_to_all": [{"gpus": 4, "bytes": 8, "time_us": 1, "transport": "nvl"}]}},)")
          .find("t.json:/nccl/collectives/all_to_all/0/transport:") == 0);
  CHECK(err(R"("nccl": {"collectives": {"all_to_all": [{"gpus": 4, "bytes": 8, "time_us": 1}]}},)")
            .find("t.json:/nccl/collectives/all_to_all/0/transport:") == 0);
  CHECK(
      err(R"("nccl": {"collectives": {"all_to_all": [{"gpus": 4, "bytes": 8, "time_us": -1, "transport": "shm"}]}},)")
          .find("t.json:/nccl/collectives/all_to_all/0/time_us:") == 0);
  CHECK(
      err(R"("nccl": {"collectives": {"all_to_all": [{"gpus": "4", "bytes": 8, "time_us": 1, "transport": "shm"}]}},)")
          .find("t.json:/nccl/collectives/all_to_all/0/gpus:") == 0);
  CHECK(
      err(R"("nccl": {"collectives": {"all_to_all": [{"gpus": 4, "bytes": 8, "time_us": 1, "transport": "shm", "x": 1}]}},)")
          .find("t.json:/nccl/collectives/all_to_all/0/x:") == 0);
  // A workload's collective tag is strict too.
  auto w = sim::parse_workload(R"({"schema_version": 1, "transfers": [{"id": "a", "src": "gpu0",
      "dst": "gpu1", "bytes": 8, "collective": {"op": "all_to_all", "ranks": 1, "bytes": 8}}]})",
                               "w.json");
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.find("w.json:/transfers/0/collective/ranks:") == 0);
}
