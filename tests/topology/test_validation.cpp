// Single-flow predictions against the measured figures of ../shared/cases (copied to
// tests/data/topology/cases) and the H200 replay machine. Every topology is imported from the
// case's own `nvidia-smi topo -m` text with the facts in its measured.json (GPU model, PCIe gen and
// width); no figure is tuned per case. topology/VALIDATION.md holds the table this test prints with
// SPARSP_PRINT_VALIDATION=1; rows with a tolerance are asserted, the others are reported only
// (their gap is explained in VALIDATION.md).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "read_file.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp::topology;
using nlohmann::json;

namespace {

const std::string kCases = std::string(SPARSP_TEST_DATA_DIR) + "/topology/cases/";

using sparsp::topology::test::read;

struct Case {
  Topology topo;
  json facts;
};

// pcie_gen_default: the datasheet figure where measured.json does not give it (H100 SXM: Gen5 x16).
Case load_case(const std::string& name, int pcie_gen_default = 0) {
  const json facts = json::parse(read(kCases + name + "/measured.json"));
  ImportOptions opt;
  opt.gpu_model = facts.at("gpu_model").get<std::string>();
  opt.pcie_gen = facts.value("pcie_gen", pcie_gen_default);
  opt.pcie_width = facts.value("pcie_width", 16);
  auto t = import_nvidia_smi(read(kCases + name + "/topo.txt"), name, opt);
  if (!t) FAIL(t.error().message);
  return Case{std::move(t).value(), facts};
}

struct Row {
  std::string case_name, quantity;
  double predicted_GBps, measured_GBps;
  double tolerance;  ///< relative; 0 = reported only
  std::string note;
};

std::vector<Row>& rows() {
  static std::vector<Row> r;
  return r;
}

void row(const std::string& c, const std::string& q, double pred_Bps, double meas_GBps, double tol,
         const std::string& note = "") {
  rows().push_back(Row{c, q, pred_Bps / 1e9, meas_GBps, tol, note});
}

// Mean over the off-diagonal, non-null cells (i, j) of `m` for which keep(i, j) holds.
template <class Keep>
std::pair<double, int> mean_of(const json& m, Keep keep) {
  double s = 0;
  int n = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    for (size_t j = 0; j < m[i].size(); ++j) {
      if (i == j || m[i][j].is_null() || !keep(static_cast<int>(i), static_cast<int>(j))) continue;
      s += m[i][j].get<double>();
      ++n;
    }
  }
  return {n ? s / n : 0, n};
}

std::vector<ResourceUse> uses_of(const Topology& t, int src, int dst) {
  const Route& r = t.route_ref(src, dst).value();
  std::vector<ResourceUse> out;
  for (const auto& leg : r.legs) out.insert(out.end(), leg.uses.begin(), leg.uses.end());
  return out;
}

double total_rate(const Topology& t, const std::vector<std::pair<int, int>>& flows) {
  std::vector<std::vector<ResourceUse>> f;
  for (auto [s, d] : flows) f.push_back(uses_of(t, s, d));
  double sum = 0;
  for (double r : max_min_rates(t, f)) sum += r;
  return sum;
}

}  // namespace

TEST_CASE("validation: predicted vs measured single-flow bandwidth") {
  rows().clear();
  {  // 2x RTX 2080 Ti, Gen3 x16, one switch, no P2P.
    Case c = load_case("2x-gen3-switch-no-p2p");
    const auto rep = single_flow_report(c.topo);
    row("2x-gen3-switch-no-p2p", "H2D (bandwidthTest, pinned)", rep.h2d_Bps[0],
        c.facts["h2d_GBps"].get<double>(), 0.10);
    row("2x-gen3-switch-no-p2p", "D2H (bandwidthTest, pinned)", rep.d2h_Bps[0],
        c.facts["d2h_GBps"].get<double>(), 0.10);
    row("2x-gen3-switch-no-p2p", "staged GPU->GPU uni (P2P=Disabled, mean)",
        rep.bandwidth_Bps[0][1],
        mean_of(c.facts["p2p_disabled_unidirectional_GBps"], [](int, int) { return true; }).first,
        0, "driver staging not pipelined");
    row("2x-gen3-switch-no-p2p", "staged GPU->GPU bidir (P2P=Disabled, mean)",
        rep.bidir_bandwidth_Bps[0][1],
        mean_of(c.facts["p2p_disabled_bidirectional_GBps"], [](int, int) { return true; }).first, 0,
        "driver staging not pipelined");
  }
  {  // 6x RTX 4090, Gen4 x16, PHB/SYS, no P2P.
    Case c = load_case("6x-rtx4090-phb-sys-no-p2p");
    const auto rep = single_flow_report(c.topo);
    const json& m = c.facts["p2p_disabled_unidirectional_GBps"];
    const auto& t = c.topo;
    const auto phb = mean_of(m, [&](int i, int j) { return t.path_class(i, j) == PathClass::phb; });
    const auto sys = mean_of(m, [&](int i, int j) { return t.path_class(i, j) == PathClass::sys; });
    row("6x-rtx4090-phb-sys-no-p2p",
        "staged uni, PHB pairs (mean of " + std::to_string(phb.second) + ")",
        rep.bandwidth_Bps[0][1], phb.first, 0, "PHB hairpin through the host bridge");
    row("6x-rtx4090-phb-sys-no-p2p",
        "staged uni, SYS pairs (mean of " + std::to_string(sys.second) + ")",
        rep.bandwidth_Bps[0][2], sys.first, 0.25);
    const json& b = c.facts["p2p_disabled_bidirectional_GBps"];
    row("6x-rtx4090-phb-sys-no-p2p", "staged bidir 0<->1 (PHB)", rep.bidir_bandwidth_Bps[0][1],
        b[0][1].get<double>(), 0, "driver staging; only row 0 known");
    row("6x-rtx4090-phb-sys-no-p2p", "staged bidir 0<->2 (SYS)", rep.bidir_bandwidth_Bps[0][2],
        b[0][2].get<double>(), 0, "driver staging; only row 0 known");
  }
  {  // 8x RTX PRO 6000, Gen5 x16 direct attach, two sockets, P2P.
    Case c = load_case("8x-gen5-direct-attach-dual-socket");
    const auto rep = single_flow_report(c.topo);
    const auto& t = c.topo;
    const json& uni = c.facts["unidirectional_p2p_by_tier_GBps"];
    row("8x-gen5-direct-attach-dual-socket", "P2P uni NODE (tier summary)", rep.bandwidth_Bps[0][1],
        uni["NODE"].get<double>(), 0.10);
    row("8x-gen5-direct-attach-dual-socket", "P2P uni SYS (tier summary, mid of 42-44)",
        rep.bandwidth_Bps[0][4],
        0.5 * (uni["SYS"]["min"].get<double>() + uni["SYS"]["max"].get<double>()), 0.25,
        "cross-socket P2P penalty not modelled");
    const json& m = c.facts["bidirectional_p2p_GBps"];
    const auto node =
        mean_of(m, [&](int i, int j) { return t.path_class(i, j) == PathClass::node; });
    const auto sys = mean_of(m, [&](int i, int j) { return t.path_class(i, j) == PathClass::sys; });
    row("8x-gen5-direct-attach-dual-socket",
        "P2P bidir NODE (mean of " + std::to_string(node.second) + ")",
        rep.bidir_bandwidth_Bps[0][1], node.first, 0.20);
    row("8x-gen5-direct-attach-dual-socket",
        "P2P bidir SYS (mean of " + std::to_string(sys.second) + ")", rep.bidir_bandwidth_Bps[0][4],
        sys.first, 0.25);
  }
  {  // 8x RTX PRO 6000 behind two Gen5 switches, one socket, P2P.
    Case c = load_case("8x-gen5-two-switches-one-socket");
    const auto rep = single_flow_report(c.topo);
    const auto& t = c.topo;
    const std::string n = "8x-gen5-two-switches-one-socket";
    row(n, "P2P uni PIX 0->1", rep.bandwidth_Bps[0][1],
        c.facts["unidirectional_p2p_pairs_GBps"][0]["baseline"].get<double>(), 0.10);
    row(n, "P2P uni NODE 0->4", rep.bandwidth_Bps[0][4],
        c.facts["unidirectional_p2p_pairs_GBps"][1]["baseline"].get<double>(), 0.10);
    const json& m = c.facts["bidirectional_p2p_GBps"];
    const auto pix = mean_of(m, [&](int i, int j) { return t.path_class(i, j) == PathClass::pix; });
    const auto node =
        mean_of(m, [&](int i, int j) { return t.path_class(i, j) == PathClass::node; });
    row(n, "P2P bidir PIX (mean of " + std::to_string(pix.second) + ")",
        rep.bidir_bandwidth_Bps[0][1], pix.first, 0.10);
    row(n, "P2P bidir NODE (mean of " + std::to_string(node.second) + ")",
        rep.bidir_bandwidth_Bps[0][4], node.first, 0.10);
    // Switch-1 uplink forced to Gen2 x16: 5 GT/s * 16 / 8 * 8/10 * 256/280 * 0.92 = 6.73 GB/s.
    auto slow_json = json::parse(t.to_json());
    for (auto& l : slow_json["links"]) {
      if (l["a"] == "cpu0" && l["b"] == "sw0") l["gen"] = 2;
    }
    auto slow = Topology::from_json_text(slow_json.dump(), "gen2.json");
    REQUIRE(slow.ok());
    row(n, "P2P uni NODE 0->4, switch-1 uplink at Gen2",
        single_flow_report(*slow).bandwidth_Bps[0][4],
        c.facts["unidirectional_p2p_pairs_GBps"][1]["uplink_20_01_1_gen2"].get<double>(), 0.10);
    // Multi-flow totals (max-min over the routes; the single x16 uplink per switch binds).
    row(n, "2 flows PIX (0->1, 2->3), total", total_rate(t, {{0, 1}, {2, 3}}), 107.5, 0.10);
    row(n, "2 flows NODE from one switch (0->4, 1->5), total", total_rate(t, {{0, 4}, {1, 5}}),
        53.8, 0.10);
    row(n, "4 flows NODE 1:1 (i->i+4), total", total_rate(t, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}),
        53.3, 0.10);
    std::vector<std::pair<int, int>> intra, cross, all;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        if (i != j) intra.emplace_back(i, j);
        cross.emplace_back(i, 4 + j);
      }
    }
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        if (i != j) all.emplace_back(i, j);
      }
    }
    row(n, "12 flows all-to-all inside one switch, total", total_rate(t, intra), 148.9, 0,
        "GPU-side limit under many flows");
    row(n, "16 flows sw0 -> sw1, total", total_rate(t, cross), 51.6, 0.10);
    row(n, "56 flows all-to-all, total", total_rate(t, all), 168.4, 0,
        "GPU-side limit under many flows");
  }
  {  // 8x H100 SXM, NV18 through NVSwitch; PCIe Gen5 x16 per the H100 SXM datasheet.
    Case c = load_case("8x-h100-sxm-nvswitch", 5);
    const auto rep = single_flow_report(c.topo);
    const std::string n = "8x-h100-sxm-nvswitch";
    const json& row0 = c.facts["unidirectional_p2p_GBps"][0];
    double s = 0;
    int k = 0;
    for (const auto& v : row0) {
      if (!v.is_null()) {
        s += v.get<double>();
        ++k;
      }
    }
    row(n, "P2P uni NV18 (row 0 mean of " + std::to_string(k) + ")", rep.bandwidth_Bps[0][1], s / k,
        0.10);
    row(n, "P2P bidir NV18 (mean of 56)", rep.bidir_bandwidth_Bps[0][1],
        mean_of(c.facts["bidirectional_p2p_GBps"], [](int, int) { return true; }).first, 0.10);
    // P2P=Disabled: force host staging (gpu0 -> host0 -> gpu1, both GPUs on socket 0).
    const auto staged = max_min_rates(
        c.topo, {[&] {
          std::vector<ResourceUse> u;
          for (const auto& leg : c.topo.route_ref(0, 1, RouteMode::host_staged).value().legs) {
            u.insert(u.end(), leg.uses.begin(), leg.uses.end());
          }
          return u;
        }()})[0];
    row(n, "staged uni (P2P=Disabled, mean of 56)", staged,
        mean_of(c.facts["p2p_disabled_unidirectional_GBps"], [](int, int) { return true; }).first,
        0, "driver staging not pipelined");
  }
  {  // The H200 replay machine (lead's measurement, bandwidthTest pinned, cudaMemcpy peer).
    auto t = Topology::load("2x-h200-nvlink");
    REQUIRE(t.ok());
    const auto rep = single_flow_report(*t);
    row("2x-h200-nvlink (replay machine)", "H2D", rep.h2d_Bps[0], 55.4, 0.10);
    row("2x-h200-nvlink (replay machine)", "D2H", rep.d2h_Bps[0], 55.3, 0.10);
    row("2x-h200-nvlink (replay machine)", "H2D + D2H at once", rep.h2d_bidir_Bps[0], 99.0, 0.10,
        "source of the duplex factor");
    row("2x-h200-nvlink (replay machine)", "P2P uni NV18", rep.bandwidth_Bps[0][1], 396.0, 0.01,
        "source of the NVLink efficiency");
  }

  for (const Row& r : rows()) {
    CAPTURE(r.case_name);
    CAPTURE(r.quantity);
    const double err = (r.predicted_GBps - r.measured_GBps) / r.measured_GBps;
    if (r.tolerance > 0) CHECK(std::fabs(err) <= r.tolerance);
  }
  if (std::getenv("SPARSP_PRINT_VALIDATION")) {
    std::printf(
        "| case | quantity | predicted GB/s | measured GB/s | error | tolerance "
        "|\n|---|---|---:|---:|---:|---|\n");
    for (const Row& r : rows()) {
      const double err = (r.predicted_GBps - r.measured_GBps) / r.measured_GBps;
      char tol[32];
      if (r.tolerance > 0) {
        std::snprintf(tol, sizeof tol, "±%.0f%%", r.tolerance * 100);
      } else {
        std::snprintf(tol, sizeof tol, "reported");
      }
      std::printf("| %s | %s | %.1f | %.1f | %+.1f%% | %s%s%s |\n", r.case_name.c_str(),
                  r.quantity.c_str(), r.predicted_GBps, r.measured_GBps, 100 * err, tol,
                  r.note.empty() ? "" : "; ", r.note.c_str());
    }
  }
}
