// The topology's measured NCCL figures applied by simulate() to SM-driven GPU-to-GPU transfers
// (include/sparsp/topology.hpp NcclFigures; sim/simulate.cpp). Each expected number derived.
#include <doctest/doctest.h>

#include <string>

#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
// Two H200 on NV18 with the calibrated figures of the two-GPU run, rounded: NVLink 396 GB/s per
// direction (duplex 0.99: 784 GB/s both ways), latency 0; NCCL 360 GB/s one way, 617 GB/s both
// ways, latency 30 us; host path 37 / 48 GB/s, latency 37 us.
std::string two_h200(bool with_nccl) {
  std::string nccl = with_nccl ? R"("nccl": {"p2p_GBps": 360, "p2p_bidir_GBps": 617,
      "host_GBps": 37, "host_bidir_GBps": 48, "p2p_latency_us": 30, "host_latency_us": 37},)"
                               : "";
  return R"({"schema_version": 1, "name": "x2", )" + nccl + R"( "nodes": [
      {"id": "cpu0", "kind": "cpu"},
      {"id": "gpu0", "kind": "gpu", "model": "H200"},
      {"id": "gpu1", "kind": "gpu", "model": "H200"}],
    "links": [{"a": "cpu0", "b": "gpu0", "kind": "pcie", "gen": 5, "width": 16, "capacity_GBps": 55, "latency_us": 0},
              {"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 5, "width": 16, "capacity_GBps": 55, "latency_us": 0},
              {"a": "gpu0", "b": "gpu1", "kind": "nvlink", "count": 18, "capacity_GBps": 396, "latency_us": 0, "duplex_factor": 0.99}]})";
}

topology::Topology topo(const std::string& json) {
  auto t = topology::Topology::from_json_text(json, "<test>");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

sim::SimResult run(const topology::Topology& t, const std::string& workload) {
  auto w = sim::parse_workload(workload, "<w>");
  REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
  auto r = sim::simulate(t, *w);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return std::move(r).value();
}

const char* kOneWay = R"({"schema_version": 1, "transfers": [
    {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "engine": "sm"}]})";
const char* kBothWays = R"({"schema_version": 1, "transfers": [
    {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "engine": "sm"},
    {"id": "b", "src": "gpu1", "dst": "gpu0", "bytes": 1e9, "engine": "sm"}]})";
}  // namespace

TEST_CASE("NCCL figures: one way capped at the measured send/recv rate, latency replaces launch") {
  // Without figures: 2 us launch + 1e9 / 396e9 = 2.5273e-3 s.
  CHECK(run(topo(two_h200(false)), kOneWay).makespan_s ==
        doctest::Approx(2e-6 + 1e9 / 396e9).epsilon(1e-9));
  // With: 30 us + 1e9 / 360e9 = 2.80778e-3 s.
  CHECK(run(topo(two_h200(true)), kOneWay).makespan_s ==
        doctest::Approx(30e-6 + 1e9 / 360e9).epsilon(1e-9));
  // A copy-engine transfer is untouched: 2 us + 1e9 / 396e9.
  const char* ce = R"({"schema_version": 1, "transfers": [
      {"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9}]})";
  CHECK(run(topo(two_h200(true)), ce).makespan_s ==
        doctest::Approx(2e-6 + 1e9 / 396e9).epsilon(1e-9));
}

TEST_CASE("NCCL figures: both ways share the measured both-ways sum") {
  // Without figures the NVLink duplex limit binds: 2 x 0.99 x 396 = 784.08 GB/s -> 392.04 each:
  // 2 us + 1e9 / 392.04e9.
  CHECK(run(topo(two_h200(false)), kBothWays).makespan_s ==
        doctest::Approx(2e-6 + 1e9 / 392.04e9).epsilon(1e-9));
  // With: the pair resource 617 GB/s -> 308.5 GB/s each (below the 360 cap): 30 us + 1e9 / 308.5e9.
  CHECK(run(topo(two_h200(true)), kBothWays).makespan_s ==
        doctest::Approx(30e-6 + 1e9 / 308.5e9).epsilon(1e-9));
}

TEST_CASE("NCCL figures: the host path (host-staged route) uses the host figures") {
  // Forced host staging: two legs pipelined in 4 MiB chunks. One way: each leg capped at 37 GB/s
  // (the pair resource 48 GB/s carries 0.5 x 2 legs x 37 = 37 <= 48). Both ways: 4 legs x 0.5 x r
  // <= 48 -> r = 24 GB/s each. Pipeline fill adds one chunk's time on the second leg and the
  // per-chunk overhead; so the times are bytes / rate within a few percent.
  const auto t = topo(two_h200(true));
  auto staged = [](const std::string& body) {
    return R"({"schema_version": 1, "transfers": [)" + body + "]}";
  };
  const std::string a =
      R"({"id": "a", "src": "gpu0", "dst": "gpu1", "bytes": 1e9, "engine": "sm", "route": "host_staged"})";
  const std::string b =
      R"({"id": "b", "src": "gpu1", "dst": "gpu0", "bytes": 1e9, "engine": "sm", "route": "host_staged"})";
  const double one = run(t, staged(a)).makespan_s;
  CHECK(one > 1e9 / 37e9);
  CHECK(one == doctest::Approx(1e9 / 37e9).epsilon(0.03));
  const double both = run(t, staged(a + "," + b)).makespan_s;
  CHECK(both > 1e9 / 24e9);
  CHECK(both == doctest::Approx(1e9 / 24e9).epsilon(0.03));
}

TEST_CASE("NCCL figures: JSON round trip and bad values") {
  const auto t = topo(two_h200(true));
  CHECK(t.options().nccl.p2p_Bps == doctest::Approx(360e9));
  CHECK(t.options().nccl.host_latency_s == doctest::Approx(37e-6));
  auto back = topology::Topology::from_json_text(t.to_json(), "<back>");
  REQUIRE(back.ok());
  CHECK(back->to_json() == t.to_json());
  CHECK(back->options().nccl.p2p_bidir_Bps == doctest::Approx(617e9));
  std::string bad = two_h200(true);
  bad.replace(bad.find("\"p2p_GBps\": 360"), 15, "\"p2p_GBps\": -1");
  auto e = topology::Topology::from_json_text(bad, "t.json");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("t.json:/nccl/p2p_GBps") == 0);
  std::string unknown = two_h200(true);
  unknown.replace(unknown.find("\"p2p_GBps\""), 10, "\"p2p_gbps\"");
  auto u = topology::Topology::from_json_text(unknown, "t.json");
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().message.find("t.json:/nccl") == 0);
}
