// Partitioned switch chips and CPU families (issue 17): closed-form single-flow and shared rates.
#include <doctest/doctest.h>

#include <string>

#include "sparsp/topology.hpp"

using namespace sparsp::topology;

namespace {

Topology load(const std::string& text) {
  auto t = Topology::from_json_text(text, "<test>");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

// One socket, two switches of two GPUs; GPU links 20 GB/s, uplinks 10 GB/s per direction.
std::string two_switches(const std::string& extra_template, const std::string& extra_root = "") {
  return R"({"schema_version": 1, "name": "chips", )" + extra_root +
         R"("template": {"sockets": 1, "switches_per_socket": 2, "gpus_per_switch": 2,
          "gpu_model": "L40S", "pcie_gen": 4, "gpu_link_GBps": 20, "uplink_GBps": 10)" +
         extra_template + "}}";
}

double rate_GBps(const Topology& t, const std::vector<std::pair<std::string, std::string>>& flows,
                 size_t k) {
  std::vector<std::vector<ResourceUse>> uses;
  for (const auto& [s, d] : flows) {
    auto r = t.route(s, d);
    REQUIRE(r.ok());
    REQUIRE(r->legs.size() == 1);
    uses.push_back(r->legs[0].uses);
  }
  return max_min_rates(t, uses)[k] / 1e9;
}

}  // namespace

TEST_CASE("chips: peer traffic between two partitions of one chip skips the uplinks") {
  // Without a chip gpu0 -> gpu2 climbs sw0's uplink and descends sw1's: 10 GB/s.
  const auto plain = load(two_switches(""));
  CHECK(rate_GBps(plain, {{"gpu0", "gpu2"}}, 0) == doctest::Approx(10));
  CHECK_FALSE(plain.same_switch_chip(0, 2));
  // Partitions of chip "a" (unlimited fabric): only the two GPU links, 20 GB/s.
  const auto chip = load(two_switches(R"(, "switch_chips": ["a", "a"])"));
  CHECK(chip.same_switch_chip(0, 2));
  CHECK_FALSE(chip.same_switch_chip(0, 1));  // same partition: plain PIX
  CHECK(rate_GBps(chip, {{"gpu0", "gpu2"}}, 0) == doctest::Approx(20));
  const auto r = chip.route("gpu0", "gpu2");
  for (const auto& u : r->legs[0].uses)
    CHECK(chip.resources()[u.resource].name.find("cpu0") == std::string::npos);
  // Fabric capped at 30 GB/s (both directions summed): two flows 0->2 and 1->3 share it, 15 each
  // (links allow 20); one alone gets 20.
  const auto capped = load(
      two_switches(R"(, "switch_chips": ["a", "a"])", R"("chips": {"a": {"fabric_GBps": 30}}, )"));
  CHECK(rate_GBps(capped, {{"gpu0", "gpu2"}}, 0) == doctest::Approx(20));
  CHECK(rate_GBps(capped, {{"gpu0", "gpu2"}, {"gpu1", "gpu3"}}, 0) == doctest::Approx(15));
  CHECK(rate_GBps(capped, {{"gpu0", "gpu2"}, {"gpu3", "gpu1"}}, 1) == doctest::Approx(15));
  // Different chips: back through the CPU at the uplink rate.
  const auto two = load(two_switches(R"(, "switch_chips": ["a", "b"])"));
  CHECK_FALSE(two.same_switch_chip(0, 2));
  CHECK(rate_GBps(two, {{"gpu0", "gpu2"}}, 0) == doctest::Approx(10));
  // topo show: same-chip pairs carry "^" after the path class, and the legend line says why.
  const std::string shown = show_text(chip);
  CHECK(shown.find("NODE^") != std::string::npos);
  CHECK(shown.find("^ = two partitions of one switch chip") != std::string::npos);
  CHECK(show_text(plain).find("^ = two partitions") == std::string::npos);
  // Round trip through the canonical JSON keeps chips.
  const auto back = load(capped.to_json());
  CHECK(rate_GBps(back, {{"gpu0", "gpu2"}, {"gpu1", "gpu3"}}, 0) == doctest::Approx(15));
  // Errors name the place.
  auto bad = Topology::from_json_text(two_switches(R"(, "switch_chips": ["a"])"), "t.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "t.json:/template/switch_chips: expected one chip id per switch (2), got 1");
}

TEST_CASE("families: duplex factor and cross-socket P2P per CPU family") {
  // Two sockets, one Gen5 x16 GPU each, direct attach, AMD Genoa: duplex 0.98, cross-socket P2P
  // 0.75 of the link (the direct-attach case, 43 / 57.2).
  const std::string tmpl = R"({"schema_version": 1, "name": "fam", "template": {"sockets": 2,
      "gpus_per_socket": 1, "gpu_model": "L40S", "pcie_gen": 5, "inter_socket": "xgmi", "family": "amd-genoa"}})";
  const auto t = load(tmpl);
  const double link = pcie_usable_Bps(5, 16);
  for (const auto& l : t.links())
    if (l.kind == LinkKind::pcie) CHECK(l.duplex_factor == 0.98);
  const auto rep = single_flow_report(t);
  // One flow gpu0 -> gpu1 (across sockets): the pair's cap, 0.75 x link (39.8 GB/s, below
  // xGMI's 64).
  CHECK(rep.bandwidth_Bps[0][1] == doctest::Approx(0.75 * link));
  // Both ways: each direction its own pair cap, 0.75 x link; the duplex bound 1.96 x link does
  // not bind: sum 1.5 x link.
  CHECK(rep.bidir_bandwidth_Bps[0][1] == doctest::Approx(1.5 * link));
  // Host copies keep the link rate; H2D + D2H together 2 x 0.98 x link.
  CHECK(rep.h2d_Bps[0] == doctest::Approx(link));
  CHECK(rep.h2d_bidir_Bps[0] == doctest::Approx(2 * 0.98 * link));
  // No family: the default duplex (0.894) and no cross-socket penalty.
  std::string plain = tmpl;
  plain.replace(plain.find(R"(, "family": "amd-genoa")"),
                std::string(R"(, "family": "amd-genoa")").size(), "");
  const auto rp = single_flow_report(load(plain));
  CHECK(rp.bandwidth_Bps[0][1] == doctest::Approx(link));
  CHECK(rp.h2d_bidir_Bps[0] == doctest::Approx(2 * pcie_default_duplex_factor() * link));
  // Intel SPR: nothing published, the defaults.
  std::string spr = tmpl;
  spr.replace(spr.find("amd-genoa"), 9, "intel-spr");
  CHECK(single_flow_report(load(spr)).bandwidth_Bps[0][1] == doctest::Approx(link));
  CHECK(find_cpu_family("amd-turin")->cross_socket_p2p == 0.90);
  CHECK_FALSE(find_cpu_family("amd-rome"));
}
