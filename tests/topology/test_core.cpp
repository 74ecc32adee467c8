// Topology core: link models, presets, path classes, routes, resources, single-flow figures.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "must_load.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp::topology;

namespace {

using test::must_load;
using test::must_parse;

std::vector<std::vector<std::string>> class_matrix(const Topology& t) {
  std::vector<std::vector<std::string>> m;
  for (int i = 0; i < t.num_gpus(); ++i) {
    m.emplace_back();
    for (int j = 0; j < t.num_gpus(); ++j)
      m.back().push_back(to_string(t.path_class(i, j), t.nvlink_count(i, j)));
  }
  return m;
}

int resource(const Topology& t, const std::string& name) {
  const auto& r = t.resources();
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].name == name) return static_cast<int>(i);
  }
  FAIL("no resource " << name);
  return -1;
}

double single_flow_GBps(const Topology& t, const std::string& src, const std::string& dst,
                        RouteMode mode = RouteMode::automatic) {
  auto r = t.route(src, dst, mode);
  REQUIRE(r.ok());
  std::vector<ResourceUse> all;
  for (const auto& leg : r->legs) all.insert(all.end(), leg.uses.begin(), leg.uses.end());
  // Merge duplicates across legs.
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.resource < b.resource; });
  std::vector<ResourceUse> merged;
  for (const auto& u : all) {
    if (!merged.empty() && merged.back().resource == u.resource) {
      merged.back().coefficient += u.coefficient;
    } else {
      merged.push_back(u);
    }
  }
  return max_min_rates(t, {merged})[0] / 1e9;
}

}  // namespace

TEST_CASE("PCIe usable bandwidth follows the documented formula") {
  // Gen4 x16: 16 GT/s * 16 lanes / 8 = 32 GB/s raw; * 128/130 * 256/280 * 0.92 = 26.502 GB/s.
  CHECK(pcie_usable_Bps(4, 16) / 1e9 == doctest::Approx(26.5025).epsilon(1e-5));
  // Gen5 x16: twice Gen4 = 53.005 GB/s (H200 measured 55.4 H2D: -4.3%).
  CHECK(pcie_usable_Bps(5, 16) / 1e9 == doctest::Approx(53.0049).epsilon(1e-5));
  // Gen3 x16: 8 GT/s -> 13.251 GB/s (RTX 2080 Ti measured 12.2 H2D / 13.2 D2H).
  CHECK(pcie_usable_Bps(3, 16) / 1e9 == doctest::Approx(13.2512).epsilon(1e-5));
  // Gen1 x1: 2.5 GT/s / 8 * 8/10 * 256/280 * 0.92 = 0.21029 GB/s.
  CHECK(pcie_usable_Bps(1, 1) / 1e9 == doctest::Approx(0.210286).epsilon(1e-5));
  // Gen6 x16: 64 GT/s * 16 / 8 * 242/256 * 256/272 * 0.92 = 104.772 GB/s.
  CHECK(pcie_usable_Bps(6, 16) / 1e9 == doctest::Approx(104.7718).epsilon(1e-5));
  CHECK(pcie_usable_Bps(9, 16) == 0);
  // Duplex factor 99.0 / (55.4 + 55.3) = 0.8943 (H200 replay machine, bandwidthTest).
  CHECK(pcie_default_duplex_factor() == doctest::Approx(0.89431).epsilon(1e-4));
  // NV18: 18 * 25 GB/s * 396/450 = 396 GB/s.
  CHECK(nvlink_usable_Bps(18, 25e9) / 1e9 == doctest::Approx(396.0));
}

TEST_CASE("GPU model table lookups") {
  auto g = find_gpu_model("rtx4090");
  REQUIRE(g);
  CHECK(g->model == "NVIDIA GeForce RTX 4090");
  CHECK_FALSE(g->p2p_capable);
  CHECK(g->sm_count == 128);
  REQUIRE(find_gpu_model("NVIDIA RTX PRO 6000 Blackwell Server Edition (96 GB)"));
  REQUIRE(find_gpu_model("NVIDIA H100 SXM 80GB (HGX baseboard)"));
  CHECK(find_gpu_model("NVIDIA H100 SXM 80GB (HGX baseboard)")->model == "NVIDIA H100 SXM");
  CHECK(find_gpu_model("L40S")->p2p_capable);
  CHECK_FALSE(find_gpu_model("rtx4900"));
  CHECK_FALSE(find_gpu_model(""));
}

TEST_CASE("every preset loads by name, and its canonical JSON round-trips") {
  const auto names = preset_names();
  CHECK(names == std::vector<std::string>{
                     "1x-h200-pcie", "2x-h200-nvlink", "2x-h200-nvlink-calibrated",
                     "4x-a100-pcie-phb", "8x-a100-sxm-nvswitch", "8x-gen5-2switch-per-socket",
                     "8x-h100-sxm-nvswitch", "8x-h20-nvswitch", "8x-l40-gen4-4switch",
                     "8x-l40s-gen4-4switch", "8x-rtx4090-epyc-nop2p"});
  for (const auto& n : names) {
    CAPTURE(n);
    Topology t = must_load(n);
    CHECK(t.name() == n);
    CHECK_FALSE(t.source().empty());
    const std::string once = t.to_json();
    Topology back = must_parse(once);
    CHECK(back.to_json() == once);
    CHECK(back.resources().size() == t.resources().size());
    CHECK(class_matrix(back) == class_matrix(t));
  }
  // Also loadable by path from the source tree.
  CHECK(Topology::load(std::string(SPARSP_SOURCE_DIR) +
                       "/configs/topologies/8x-l40s-gen4-4switch.json")
            .ok());
  auto missing = Topology::load("no-such-preset");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("no such preset") != std::string::npos);
}

TEST_CASE("preset path-class matrices match hand-written ones") {
  using M = std::vector<std::vector<std::string>>;
  // Two sockets, four GPUs each on their own root port: NODE inside a socket, SYS across.
  const M rtx = {{"X", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
                 {"NODE", "X", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
                 {"NODE", "NODE", "X", "NODE", "SYS", "SYS", "SYS", "SYS"},
                 {"NODE", "NODE", "NODE", "X", "SYS", "SYS", "SYS", "SYS"},
                 {"SYS", "SYS", "SYS", "SYS", "X", "NODE", "NODE", "NODE"},
                 {"SYS", "SYS", "SYS", "SYS", "NODE", "X", "NODE", "NODE"},
                 {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "X", "NODE"},
                 {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "NODE", "X"}};
  CHECK(class_matrix(must_load("8x-rtx4090-epyc-nop2p")) == rtx);
  // Two GPUs per switch, two switches per socket: PIX, NODE between switches, SYS across.
  const M sw = {{"X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
                {"PIX", "X", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
                {"NODE", "NODE", "X", "PIX", "SYS", "SYS", "SYS", "SYS"},
                {"NODE", "NODE", "PIX", "X", "SYS", "SYS", "SYS", "SYS"},
                {"SYS", "SYS", "SYS", "SYS", "X", "PIX", "NODE", "NODE"},
                {"SYS", "SYS", "SYS", "SYS", "PIX", "X", "NODE", "NODE"},
                {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "X", "PIX"},
                {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "X"}};
  CHECK(class_matrix(must_load("8x-l40s-gen4-4switch")) == sw);
  CHECK(class_matrix(must_load("8x-gen5-2switch-per-socket")) == sw);
  // One host bridge: PHB everywhere.
  const M phb = {{"X", "PHB", "PHB", "PHB"},
                 {"PHB", "X", "PHB", "PHB"},
                 {"PHB", "PHB", "X", "PHB"},
                 {"PHB", "PHB", "PHB", "X"}};
  CHECK(class_matrix(must_load("4x-a100-pcie-phb")) == phb);
  CHECK(class_matrix(must_load("2x-h200-nvlink")) == M{{"X", "NV18"}, {"NV18", "X"}});
  CHECK(class_matrix(must_load("1x-h200-pcie")) == M{{"X"}});
  M nv(8, std::vector<std::string>(8, "NV18"));
  for (int i = 0; i < 8; ++i) nv[i][i] = "X";
  CHECK(class_matrix(must_load("8x-h100-sxm-nvswitch")) == nv);
}

TEST_CASE("PIX route through one switch: hops, uses sorted, latency") {
  Topology t = must_load("8x-l40s-gen4-4switch");
  auto r = t.route("gpu0", "gpu1");
  REQUIRE(r.ok());
  CHECK_FALSE(r->host_staged);
  CHECK(r->path_class == PathClass::pix);
  REQUIRE(r->legs.size() == 1);
  const RouteLeg& leg = r->legs[0];
  CHECK(leg.hops == std::vector<std::string>{"gpu0", "sw0", "gpu1"});
  // gpu0->sw0 direction, sw0<->gpu0 duplex, sw0->gpu1 direction, sw0<->gpu1 duplex: 4 uses.
  REQUIRE(leg.uses.size() == 4);
  CHECK(std::is_sorted(leg.uses.begin(), leg.uses.end(),
                       [](auto& a, auto& b) { return a.resource < b.resource; }));
  std::vector<std::string> names;
  for (const auto& u : leg.uses)
    names.push_back(t.resources()[static_cast<size_t>(u.resource)].name);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"gpu0->sw0", "sw0->gpu1", "sw0<->gpu0", "sw0<->gpu1"});
  // Two PCIe hops of 0.1 us each.
  CHECK(leg.latency_s == doctest::Approx(0.2e-6));
  // Single flow: Gen4 x16 = 26.50 GB/s.
  CHECK(single_flow_GBps(t, "gpu0", "gpu1") == doctest::Approx(26.5025).epsilon(1e-4));
  // route_ref gives the same route without copying.
  CHECK(t.route_ref(t.endpoint_index("gpu0"), t.endpoint_index("gpu1")).value().legs[0].hops ==
        leg.hops);
}

TEST_CASE("switch uplink is shared by flows leaving the switch") {
  Topology t = must_load("8x-l40s-gen4-4switch");
  // gpu0->gpu2 and gpu1->gpu3 both leave sw0 over sw0->cpu0 (26.50 GB/s): 13.25 GB/s each.
  auto a = t.route("gpu0", "gpu2"), b = t.route("gpu1", "gpu3");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->legs[0].hops == std::vector<std::string>{"gpu0", "sw0", "cpu0", "sw1", "gpu2"});
  auto rates = max_min_rates(t, {a->legs[0].uses, b->legs[0].uses});
  CHECK(rates[0] / 1e9 == doctest::Approx(26.5025 / 2).epsilon(1e-4));
  CHECK(rates[1] / 1e9 == doctest::Approx(26.5025 / 2).epsilon(1e-4));
  // Bidirectional PIX pair: each direction alone 26.50, together limited by the duplex resource of
  // each GPU link: 2 * (99 / 110.7) * 26.5025 = 47.403 GB/s summed.
  const auto rep = single_flow_report(t);
  CHECK(rep.bidir_bandwidth_Bps[0][1] / 1e9 == doctest::Approx(47.4028).epsilon(1e-4));
}

TEST_CASE("root complex: peer traffic turning at the CPU pays the peer coefficient") {
  // Two Gen4 x16 GPUs on one CPU whose root complex carries 20 GB/s, Intel-like peer coefficient
  // 1.2: gpu0->gpu1 turns at cpu0 -> 20 / 1.2 = 16.67 GB/s (below the 26.50 GB/s links).
  // gpu0->host0 (not peer traffic) uses it with coefficient 1 -> 20 GB/s.
  const std::string j = R"({"schema_version": 1, "name": "rc", "nodes": [
      {"id": "cpu0", "kind": "cpu", "root_complex_GBps": 20, "peer_coefficient": 1.2, "host_memory_GBps": 100},
      {"id": "gpu0", "kind": "gpu", "model": "L40S"}, {"id": "gpu1", "kind": "gpu", "model": "L40S"}],
    "links": [{"a": "cpu0", "b": "gpu0", "kind": "pcie", "gen": 4, "width": 16},
              {"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16}]})";
  Topology t = must_parse(j);
  CHECK(t.path_class(0, 1) == PathClass::node);
  CHECK(single_flow_GBps(t, "gpu0", "gpu1") == doctest::Approx(20.0 / 1.2));
  CHECK(single_flow_GBps(t, "gpu0", "host0") == doctest::Approx(20.0));
  auto r = t.route("gpu0", "gpu1");
  const int rc = resource(t, "cpu0.rc");
  bool found = false;
  for (const auto& u : r->legs[0].uses) {
    if (u.resource == rc) {
      found = true;
      CHECK(u.coefficient == doctest::Approx(1.2));
    }
  }
  CHECK(found);
}

TEST_CASE("cross-socket flow is bounded by the inter-socket link") {
  // Gen5 x16 GPUs (53.0 GB/s) on two sockets joined by a 10 GB/s UPI link: SYS flow = 10 GB/s,
  // also GPU -> remote host memory; local host memory gets the PCIe 53.0 GB/s.
  const std::string j = R"({"schema_version": 1, "name": "x", "nodes": [
      {"id": "cpu0", "kind": "cpu"}, {"id": "cpu1", "kind": "cpu"},
      {"id": "g0", "kind": "gpu", "model": "H100 PCIe"}, {"id": "g1", "kind": "gpu", "model": "H100 PCIe"}],
    "links": [{"a": "cpu0", "b": "g0", "kind": "pcie", "gen": 5, "width": 16},
              {"a": "cpu1", "b": "g1", "kind": "pcie", "gen": 5, "width": 16},
              {"a": "cpu0", "b": "cpu1", "kind": "upi", "capacity_GBps": 10}]})";
  Topology t = must_parse(j);
  CHECK(t.path_class(0, 1) == PathClass::sys);
  CHECK(t.gpu_numa_node(1) == 1);
  CHECK(single_flow_GBps(t, "gpu0", "gpu1") == doctest::Approx(10.0));
  CHECK(single_flow_GBps(t, "gpu0", "host1") == doctest::Approx(10.0));
  CHECK(single_flow_GBps(t, "gpu0", "host0") == doctest::Approx(53.0049).epsilon(1e-4));
  auto r = t.route("gpu0", "gpu1");
  CHECK(r->legs[0].hops == std::vector<std::string>{"g0", "cpu0", "cpu1", "g1"});
  // 2 PCIe hops (0.1 us) + one inter-socket hop (0.2 us).
  CHECK(r->legs[0].latency_s == doctest::Approx(0.4e-6));
  CHECK(t.route("gpu0", "host1")->path_class == PathClass::sys);
  CHECK(t.route("host0", "gpu0")->path_class == PathClass::phb);
}

TEST_CASE("host staging: GeForce pairs go GPU -> host<numa of source> -> GPU") {
  Topology t = must_load("8x-rtx4090-epyc-nop2p");
  CHECK_FALSE(t.p2p_allowed(0, 1));
  auto p2p = t.route("gpu0", "gpu1", RouteMode::p2p);
  REQUIRE_FALSE(p2p.ok());
  CHECK(p2p.error().message.find("P2P is not available") != std::string::npos);
  auto r = t.route("gpu0", "gpu5");
  REQUIRE(r.ok());
  CHECK(r->host_staged);
  CHECK(r->staging_host == "host0");
  REQUIRE(r->legs.size() == 2);
  CHECK(r->legs[0].hops == std::vector<std::string>{"gpu0", "cpu0", "host0"});
  CHECK(r->legs[1].hops == std::vector<std::string>{"host0", "cpu0", "cpu1", "gpu5"});
  // Pipelined legs: Gen4 x16 up (26.50), host memory used twice (204.8 / 2 = 102.4), xGMI 64,
  // Gen4 x16 down (26.50) -> 26.50 GB/s.
  CHECK(single_flow_GBps(t, "gpu0", "gpu5") == doctest::Approx(26.5025).epsilon(1e-4));
  const int mem = resource(t, "host0.mem");
  double mem_coefficient = 0;
  for (const auto& leg : r->legs) {
    for (const auto& u : leg.uses) mem_coefficient += u.resource == mem ? u.coefficient : 0;
  }
  CHECK(mem_coefficient == doctest::Approx(2.0));
  // Bidirectional staged pair in one socket: both flows cross both GPU links in opposite
  // directions, so each link's duplex capacity 2 * (99 / 110.7) * 26.5025 = 47.403 is shared.
  const auto rep = single_flow_report(t);
  CHECK(rep.bidir_bandwidth_Bps[0][1] / 1e9 == doctest::Approx(47.4028).epsilon(1e-4));
  // Forced staging on a P2P-capable machine works too.
  Topology l40 = must_load("8x-l40s-gen4-4switch");
  auto s = l40.route("gpu0", "gpu1", RouteMode::host_staged);
  REQUIRE(s.ok());
  CHECK(s->host_staged);
  CHECK(s->legs[0].hops == std::vector<std::string>{"gpu0", "sw0", "cpu0", "host0"});
}

TEST_CASE("ACS redirect hairpins switch-local peer traffic through the root port") {
  const std::string j =
      R"({"schema_version": 1, "name": "acs", "template": {"sockets": 1, "switches_per_socket": 1,
      "gpus_per_switch": 2, "gpu_model": "L40S", "pcie_gen": 4, "pcie_width": 16, "acs_redirect": true}})";
  Topology t = must_parse(j);
  CHECK(t.path_class(0, 1) == PathClass::pix);  // nvidia-smi still says PIX
  auto r = t.route("gpu0", "gpu1");
  REQUIRE(r.ok());
  CHECK(r->legs[0].hops == std::vector<std::string>{"gpu0", "sw0", "cpu0", "sw0", "gpu1"});
  const int duplex = resource(t, "cpu0<->sw0");
  for (const auto& u : r->legs[0].uses) {
    if (u.resource == duplex) CHECK(u.coefficient == doctest::Approx(2.0));
  }
  // One flow: the uplink duplex limit 2 * (99 / 110.7) * 26.5025 / 2 = 23.701 GB/s binds
  // (not 26.50).
  CHECK(single_flow_GBps(t, "gpu0", "gpu1") == doctest::Approx(23.7014).epsilon(1e-4));
}

TEST_CASE("NVLink routes and NVSwitch fabric") {
  Topology h200 = must_load("2x-h200-nvlink");
  auto r = h200.route("gpu0", "gpu1");
  REQUIRE(r.ok());
  CHECK(r->path_class == PathClass::nvlink);
  CHECK(r->legs[0].hops == std::vector<std::string>{"gpu0", "gpu1"});
  CHECK(single_flow_GBps(h200, "gpu0", "gpu1") == doctest::Approx(396.0));
  Topology h100 = must_load("8x-h100-sxm-nvswitch");
  auto s = h100.route("gpu0", "gpu7");
  REQUIRE(s.ok());
  CHECK(s->legs[0].hops == std::vector<std::string>{"gpu0", "nvswitch0", "gpu7"});
  CHECK(single_flow_GBps(h100, "gpu0", "gpu7") == doctest::Approx(396.0));
  // Two senders into gpu7 share nvswitch0->gpu7: 198 GB/s each.
  auto s2 = h100.route("gpu1", "gpu7");
  auto rates = max_min_rates(h100, {s->legs[0].uses, s2->legs[0].uses});
  CHECK(rates[0] / 1e9 == doctest::Approx(198.0));
  CHECK(h100.ancestors(5) == std::vector<std::string>{"sw2", "cpu1"});
}

TEST_CASE("endpoints and errors of route()") {
  Topology t = must_load("8x-l40s-gen4-4switch");
  CHECK(t.gpu_endpoints().size() == 8);
  CHECK(t.host_endpoints() == std::vector<std::string>{"host0", "host1"});
  CHECK(t.endpoint_index("gpu7") == 7);
  CHECK(t.endpoint_index("host1") == 9);
  CHECK(t.endpoint_index("gpu8") == -1);
  CHECK(t.endpoint_index("gpu01") == -1);
  CHECK_FALSE(t.route("gpu0", "gpu9").ok());
  CHECK_FALSE(t.route("nic0", "gpu1").ok());
  CHECK_FALSE(t.route("host0", "host1").ok());
  auto self = t.route("gpu3", "gpu3");
  REQUIRE(self.ok());
  CHECK(self->path_class == PathClass::self);
  CHECK(self->legs[0].uses.empty());
}

TEST_CASE("P2P rules: topology switch, cross-socket flag and per-pair overrides") {
  const std::string j =
      R"({"schema_version": 1, "name": "o", "p2p_overrides": [{"a": "gpu0", "b": "gpu1", "p2p": false}],
    "template": {"sockets": 2, "switches_per_socket": 1, "gpus_per_switch": 2, "gpu_model": "L40S",
                 "p2p_cross_socket": false}})";
  Topology t = must_parse(j);
  CHECK_FALSE(t.p2p_allowed(0, 1));  // override
  CHECK(t.p2p_allowed(2, 3));
  CHECK_FALSE(t.p2p_allowed(0, 2));  // across sockets
  CHECK(t.route("gpu0", "gpu1")->host_staged);
  CHECK_FALSE(t.route("gpu2", "gpu3")->host_staged);
  // Overrides survive the canonical round trip.
  Topology back = must_parse(t.to_json());
  CHECK_FALSE(back.p2p_allowed(0, 1));
  CHECK_FALSE(back.p2p_allowed(0, 2));
  CHECK(back.to_json() == t.to_json());
}

TEST_CASE("resources: one per link direction, duplex where factor < 1, host memory") {
  Topology t = must_load("1x-h200-pcie");
  // One PCIe link cpu0-gpu0: cpu0->gpu0, gpu0->cpu0, cpu0<->gpu0 (0.894 < 1), host0.mem.
  std::vector<std::string> names;
  for (const auto& r : t.resources()) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"cpu0->gpu0", "gpu0->cpu0", "cpu0<->gpu0", "host0.mem"});
  CHECK(t.resources()[2].kind == ResourceKind::link_duplex);
  CHECK(t.resources()[2].capacity_Bps / 1e9 ==
        doctest::Approx(2 * 0.89431 * 53.0049).epsilon(1e-4));
  CHECK(t.resources()[3].capacity_Bps / 1e9 == doctest::Approx(307.2));
  // H2D and D2H together: duplex bound 2 * 0.8943 * 53.00 = 94.80 GB/s (measured 99 GB/s, -4%).
  const auto rep = single_flow_report(t);
  CHECK(rep.h2d_Bps[0] / 1e9 == doctest::Approx(53.0049).epsilon(1e-4));
  CHECK(rep.h2d_bidir_Bps[0] / 1e9 == doctest::Approx(94.806).epsilon(1e-3));
}
