// calibrate's topology writer (replay/calibrate_topology.cpp) without a GPU: NVLink peers.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../../replay/calibrate_topology.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
replay::detail::CalibratedGpu h200(double h2d_Bps, double d2h_Bps) {
  replay::detail::CalibratedGpu g;
  g.model = "NVIDIA H200";
  g.sm_count = 132;
  g.copy_engines = 3;
  g.memory_bytes = 150109880320.0;
  g.h2d_Bps = h2d_Bps;
  g.d2h_Bps = d2h_Bps;
  g.bidir_aggregate_Bps = 99e9;
  g.latency_s = 5e-6;
  g.staged_chunk_s = 6e-6;
  return g;
}
replay::detail::CalibratedPeer peer(int a, int b, double uni_Bps, double lat_s, int nv) {
  replay::detail::CalibratedPeer p;
  p.a = a;
  p.b = b;
  p.uni_Bps = uni_Bps;
  p.latency_s = lat_s;
  p.p2p = true;
  p.nvlink_count = nv;
  return p;
}
}  // namespace

TEST_CASE("two GPUs on NVLink: one nvlink link from the measured peer figures") {
  // The figures for the two-GPU H200 machine: ~396 GB/s per direction, ~784 GB/s both
  // ways. Measured 396 (0->1) and 392 (1->0): capacity = mean = 394 GB/s; duplex factor =
  // 784 / (2 x 394) = 0.99492; latency = mean(6, 5) us - 2 us launch overhead = 3.5 us.
  const std::vector gpus{h200(55e9, 54e9), h200(54e9, 55e9)};
  auto p01 = peer(0, 1, 396e9, 6e-6, 18);
  p01.bidir_aggregate_Bps = 784e9;
  const std::vector peers{p01, peer(1, 0, 392e9, 5e-6, 18)};
  const std::string text = replay::detail::calibrated_topology_json("cal2", gpus, peers, 0, 2e-6);
  const auto j = nlohmann::json::parse(text);
  REQUIRE(j["links"].size() == 3);  // two PCIe links to cpu0, one NVLink
  const auto& nv = j["links"][2];
  CHECK(nv["kind"] == "nvlink");
  CHECK(nv["a"] == "gpu0");
  CHECK(nv["b"] == "gpu1");
  CHECK(nv["count"] == 18);
  CHECK(nv["capacity_GBps"].get<double>() == doctest::Approx(394.0));
  CHECK(nv["duplex_factor"].get<double>() == doctest::Approx(784.0 / 788.0));
  CHECK(nv["latency_us"].get<double>() == doctest::Approx(3.5));
  auto t = topology::Topology::from_json_text(text, "cal2.json");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(t->path_class(0, 1) == topology::PathClass::nvlink);
  CHECK(t->nvlink_count(0, 1) == 18);
  const auto rep = topology::single_flow_report(*t);
  CHECK(rep.bandwidth_Bps[0][1] == doctest::Approx(394e9));
  CHECK(rep.bidir_bandwidth_Bps[0][1] == doctest::Approx(784e9));
}

TEST_CASE("without NV#, a peer path faster than any PCIe link is NVLink, slower is PCIe P2P") {
  const std::vector gpus{h200(55e9, 54e9), h200(54e9, 55e9)};
  // 300 GB/s > 1.25 x 55 GB/s: NVLink, count = round(300 / (25 x 0.88)) = round(13.6) = 14.
  auto fast = peer(0, 1, 300e9, 4e-6, 0);
  CHECK(replay::detail::peer_is_nvlink(fast, gpus));
  const auto j =
      nlohmann::json::parse(replay::detail::calibrated_topology_json("c", gpus, {fast}, 0, 2e-6));
  REQUIRE(j["links"].size() == 3);
  CHECK(j["links"][2]["count"] == 14);
  CHECK(j["links"][2]["duplex_factor"].get<double>() == doctest::Approx(1.0));  // not measured
  // 50 GB/s: what PCIe P2P through the CPU gives; no link added, peers route over PCIe.
  auto slow = peer(0, 1, 50e9, 4e-6, 0);
  CHECK_FALSE(replay::detail::peer_is_nvlink(slow, gpus));
  const auto j2 =
      nlohmann::json::parse(replay::detail::calibrated_topology_json("c", gpus, {slow}, 0, 2e-6));
  CHECK(j2["links"].size() == 2);
  // No P2P at all: never NVLink whatever the figure says.
  slow.p2p = false;
  slow.uni_Bps = 300e9;
  CHECK_FALSE(replay::detail::peer_is_nvlink(slow, gpus));
}

TEST_CASE("the recorded two-GPU machine file rebuilds with its NV18 link") {
  // replay/results/x2/machine.json (first two-GPU run): p2p:0->1 395.94 GB/s, 1->0 393.83 GB/s
  // -> capacity (395.94 + 393.83) / 2 = 394.88 GB/s; nvidia-smi topo -m shows NV18.
  std::ifstream f(SPARSP_SOURCE_DIR "/replay/results/x2/machine.json");
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  auto text = replay::detail::topology_from_machine(ss.str(), "machine.json", 0, 2e-6);
  REQUIRE_MESSAGE(text.ok(), (text.ok() ? "" : text.error().message));
  const auto j = nlohmann::json::parse(*text);
  REQUIRE(j["links"].size() == 3);
  CHECK(j["links"][2]["kind"] == "nvlink");
  CHECK(j["links"][2]["count"] == 18);
  CHECK(j["links"][2]["capacity_GBps"].get<double>() == doctest::Approx(394.88).epsilon(0.002));
  auto t = topology::Topology::from_json_text(*text, "x2.json");
  REQUIRE(t.ok());
  CHECK(t->path_class(0, 1) == topology::PathClass::nvlink);
}

TEST_CASE("concurrent_copies: how many of N copies ran at once, from their end times") {
  using sparsp::replay::detail::concurrent_copies;
  // The H200 probe (replay/RESULTS.md, "Copy-engine concurrency on the H200"), ends in ms.
  // H2D x8, one at a time from two queues: 8 x 4.87 / 38.83 = 1.003.
  CHECK(concurrent_copies({4.87, 14.58, 24.27, 33.98, 9.73, 19.42, 29.11, 38.83}) ==
        doctest::Approx(8 * 4.87 / 38.83));
  CHECK(concurrent_copies({4.87, 14.58, 24.27, 33.98, 9.73, 19.42, 29.11, 38.83}) ==
        doctest::Approx(1.0).epsilon(0.01));
  // Mixed x8 (H2D and D2H alternating), one of each at a time: 8 x 5.28 / 21.31 = 1.98.
  CHECK(concurrent_copies({5.28, 5.31, 10.55, 10.59, 15.94, 15.86, 21.31, 21.12}) ==
        doctest::Approx(1.98).epsilon(0.01));
  // Fair share among 4: every copy ends together -> 4.
  CHECK(concurrent_copies({8.0, 8.0, 8.0, 8.0}) == doctest::Approx(4.0));
  // One copy: 1; nothing or a zero end: 0.
  CHECK(concurrent_copies({3.0}) == doctest::Approx(1.0));
  CHECK(concurrent_copies({}) == 0);
  CHECK(concurrent_copies({0.0, 1.0}) == 0);
}
