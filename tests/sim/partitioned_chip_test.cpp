// A published server with partitioned switch chips (issue 17, "Why"): 8x RTX PRO 6000 Blackwell
// Server Edition on one Threadripper PRO 7955WX behind two Microchip Switchtec PM50100 chips, each
// split into two virtual switches whose x16 Gen5 uplinks land on different root ports
// (voipmonitor/rtx6kpro hardware/wrx90-cpayne-8gpu-2vs-per-chip.md, original wiring; found
// through the stored pages corpus). The topology (tests/data/sim/published/8x-rtxpro6000-trpro-
// 2chip-4vs/topology.json) carries only what the write-up states: the switch tree, chip A = SW1 +
// SW3, chip B = SW2 + SW4 (`switch_chips`), Gen5 x16, P2P on, ACS redirect off, the CPU. The
// write-up's figures (measured.json beside it) are checked the way issue 17 asks for further
// public many-flow measurements: `sim run` of each copy set with the default engine, pushed as
// its `dst.copy_(src)` on a source-GPU stream is, 256 MiB per flow, aggregate = total bytes /
// makespan; median error <= 10%, max <= 20%.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {

const std::string kDir =
    std::string(SPARSP_TEST_DATA_DIR) + "/sim/published/8x-rtxpro6000-trpro-2chip-4vs/";
constexpr double kBytes = 256.0 * 1024 * 1024;  // the write-up's SIZE

using Flows = std::vector<std::pair<int, int>>;

topology::Topology load_topology(const std::string& dir = kDir) {
  auto t = topology::Topology::from_json_file(dir + "topology.json");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

nlohmann::json load_measured(const std::string& dir = kDir) {
  std::ifstream in(dir + "measured.json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

/// The topology of `dir` without its top-level "chips" (so no chip's peer-concurrency cost: the
/// machine's default applies), and with `drop_partitions` also without the template's
/// "switch_chips" (every switch its own chip, the model before issue 17).
topology::Topology load_without_chips(const std::string& dir, bool drop_partitions = false) {
  std::ifstream in(dir + "topology.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  if (drop_partitions) j["template"].erase("switch_chips");
  j.erase("chips");  // a chip's cost would name a chip that is gone
  auto t = topology::Topology::from_json_text(j.dump(), "<" + dir + " without chips>");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

/// `sim run` of a copy set: one pushed transfer per flow, each on its own stream, default engine.
sim::SimResult run(const topology::Topology& t, const Flows& flows,
                   const sim::SimOptions& options = {}) {
  sim::Workload w;
  for (size_t k = 0; k < flows.size(); ++k) {
    sim::Transfer x;
    x.id = "m" + std::to_string(k);
    x.src = "gpu" + std::to_string(flows[k].first);
    x.dst = "gpu" + std::to_string(flows[k].second);
    x.bytes = kBytes;
    x.route = topology::RouteMode::automatic;
    w.transfers.push_back(x);
  }
  auto r = sim::simulate(t, w, options);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return std::move(r).value();
}

double aggregate_GBps(const topology::Topology& t, const Flows& flows,
                      const sim::SimOptions& options = {}) {
  return static_cast<double>(flows.size()) * kBytes / run(t, flows, options).makespan_s / 1e9;
}

/// Bytes that crossed any resource whose name mentions `part` (e.g. "cpu": uplinks to the CPU,
/// its root complex).
double bytes_through(const topology::Topology& t, const sim::SimResult& r,
                     const std::string& part) {
  double b = 0;
  for (size_t i = 0; i < r.resources.size(); ++i)
    if (t.resources()[i].name.find(part) != std::string::npos) b += r.resources[i].bytes;
  return b;
}

// Switch k of the write-up (SW1..SW4) holds GPUs 2(k-1), 2(k-1)+1.
std::vector<int> vs(const std::string& name) {
  const int k = name[2] - '1';
  return {2 * k, 2 * k + 1};
}

}  // namespace

TEST_CASE("published chips: partitions of one Switchtec PM50100 bypass uplinks and CPU at 2x") {
  const auto t = load_topology();
  const auto m = load_measured();
  // SW1 (GPUs 0,1) and SW3 (GPUs 4,5) are partitions of chip a; SW2 (GPUs 2,3) is on chip b.
  CHECK(t.same_switch_chip(0, 4));
  CHECK(t.same_switch_chip(2, 6));
  CHECK_FALSE(t.same_switch_chip(0, 2));
  // One uplink's rate: a single flow across chips, 0 -> 2 (SW1 uplink -> CPU -> SW2 uplink).
  const double uplink_GBps = aggregate_GBps(t, {{0, 2}});
  // Two flows SW1 -> SW3 (0->4, 1->5) inside chip a: each on its own GPU links, both at the
  // single-flow rate -> 2 x the uplink's rate; no byte reaches a CPU-side resource.
  const auto intra = run(t, {{0, 4}, {1, 5}});
  const double intra_GBps = 2 * kBytes / intra.makespan_s / 1e9;
  CHECK(intra_GBps / uplink_GBps == doctest::Approx(2.0).epsilon(0.05));
  CHECK(bytes_through(t, intra, "cpu") == 0);
  CHECK(bytes_through(t, intra, "host") == 0);
  // The same two flows SW1 -> SW2 (0->2, 1->3) across chips share SW1's uplink: 1 x.
  const auto cross = run(t, {{0, 2}, {1, 3}});
  const double cross_GBps = 2 * kBytes / cross.makespan_s / 1e9;
  CHECK(cross_GBps / uplink_GBps == doctest::Approx(1.0).epsilon(0.05));
  CHECK(bytes_through(t, cross, "cpu") > 0);
  // As published: 112.5 vs 56.4 GB/s, ratio 1.99.
  const auto& two = m["two_pair_vs_to_vs_GBps"];
  const double published_ratio = two["SW1->SW3"].get<double>() / two["SW1->SW2"].get<double>();
  CHECK(published_ratio == doctest::Approx(2.0).epsilon(0.01));
  CHECK(intra_GBps / cross_GBps == doctest::Approx(published_ratio).epsilon(0.05));
  // Without the chip keys (the model before issue 17) SW1 -> SW3 also climbs SW1's uplink: 1 x.
  const auto plain = load_without_chips(kDir, true);
  CHECK(aggregate_GBps(plain, {{0, 4}, {1, 5}}) / uplink_GBps ==
        doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("published chips: every copy-set row of the write-up within the further-cases bar") {
  const auto t = load_topology();
  const auto m = load_measured();
  std::vector<double> errors;
  auto check_row = [&](const std::string& what, double measured_GBps, const Flows& flows) {
    const double predicted = aggregate_GBps(t, flows);
    const double err = std::abs(predicted - measured_GBps) / measured_GBps;
    INFO(what << ": measured " << measured_GBps << " GB/s, predicted " << predicted);
    CHECK(err <= 0.20);
    errors.push_back(err);
  };
  // Single pair, one direction.
  for (const auto& [pair, v] : m["single_pair_write_GBps"].items()) {
    const int s = pair[0] - '0', d = pair[3] - '0';
    check_row("single " + pair, v.get<double>(), {{s, d}});
  }
  // Two pairs, the two GPUs of one VS to the two GPUs of another (first to first, second to
  // second).
  for (const auto& [key, v] : m["two_pair_vs_to_vs_GBps"].items()) {
    const auto a = vs(key.substr(0, 3)), b = vs(key.substr(5, 3));
    check_row("two pair " + key, v.get<double>(), {{a[0], b[0]}, {a[1], b[1]}});
  }
  // One VS to two VSs: its first GPU to the first destination, its second to the second.
  for (const auto& [key, v] : m["one_vs_to_two_vs_GBps"].items()) {
    const auto a = vs(key.substr(0, 3)), b = vs(key.substr(5, 3)), c = vs(key.substr(9, 3));
    check_row("one to two " + key, v.get<double>(), {{a[0], b[0]}, {a[1], c[0]}});
  }
  // Median error <= 10% (issue 17's bar for further public measurements): 28 rows, the median
  // is the mean of the 14th and 15th.
  std::sort(errors.begin(), errors.end());
  REQUIRE(errors.size() == 28);
  CHECK((errors[13] + errors[14]) / 2 <= 0.10);
}

TEST_CASE("published chips: the 56-flow all-to-all with the PM50100's own cost (checked)") {
  // Every ordered pair of the 8 GPUs at once, 256 MiB each, pushed: the write-up measured 254.2
  // GB/s. Each GPU sends and receives 7 peer copies at once (m = 7). With the chips' cost 0.135
  // (the PM50100's, set on the 16-GPU Turin rig's 12-flow row below, not on this server) the
  // model gives 220.2 GB/s (-13.4%): inside the 20% bar for further public rows, outside 15%.
  // With the simulator's default 0.2 (fitted on the shared two-switch case) it gave 181.2
  // (-29%); with no cost 349 (+37%).
  const auto t = load_topology();
  const auto m = load_measured();
  Flows all;
  for (int s = 0; s < 8; ++s)
    for (int d = 0; d < 8; ++d)
      if (s != d) all.emplace_back(s, d);
  const double measured = m["all_to_all_56_pairs_GBps"].get<double>();
  const double ratio = aggregate_GBps(t, all) / measured;
  MESSAGE("PM50100 partitioned server, 56-flow all-to-all: predicted / measured " << ratio);
  CHECK(ratio > 0.80);
  CHECK(ratio < 1.20);
  // The same server without the chips' cost: the default 0.2 (0.65-0.80 of the measurement), and
  // no cost at all (over-predicted): the cost is what binds here.
  const auto plain = load_without_chips(kDir);
  const double default_ratio = aggregate_GBps(plain, all) / measured;
  CHECK(default_ratio > 0.65);
  CHECK(default_ratio < 0.80);
  sim::SimOptions no_cost;
  no_cost.peer_concurrency_cost = 0;
  CHECK(aggregate_GBps(plain, all, no_cost) / measured > 1.0);
}

// ---- A second PM50100 server: 16 GPUs on four unpartitioned c-payne PM50100 switches, one EPYC
// 9575F (voipmonitor/rtx6kpro hardware/asrockrack-turin-cpayne-16gpu.md; tests/data/sim/published/
// 16x-rtxpro6000-turin-4sw). Same chip, same method (dst.copy_(src), 256 MiB, pushed) as the
// partitioned server above. Its 12-flow all-to-all inside one switch (163.6 GB/s, no uplink, no
// CPU) sets the PM50100's peer-concurrency cost; every other row is a check.

namespace {

const std::string kRigDir =
    std::string(SPARSP_TEST_DATA_DIR) + "/sim/published/16x-rtxpro6000-turin-4sw/";

// Every ordered pair of `gpus`.
Flows all_pairs_of(const std::vector<int>& gpus) {
  Flows f;
  for (int s : gpus)
    for (int d : gpus)
      if (s != d) f.emplace_back(s, d);
  return f;
}

// The GPUs of switches SWa and SWb (1-based), 4 per switch.
std::vector<int> rig_switches(std::initializer_list<int> sws) {
  std::vector<int> g;
  for (int s : sws)
    for (int k = 0; k < 4; ++k) g.push_back(4 * (s - 1) + k);
  return g;
}

}  // namespace

TEST_CASE(
    "published chips: the PM50100's peer-concurrency cost, set on one row, checked on others") {
  const auto t = load_topology(kRigDir);
  const auto m = load_measured(kRigDir);
  // The fitted row. 12 flows among GPUs 0-3 of SW1: every GPU sends 3 and receives 3 (m = 3), so
  // each moves 2 x 163.6 / 4 = 81.8 GB/s in and out together. The model's cap is
  // 2 x duplex x link / (1 + c (m - 1)) = 2 x 0.98 (amd-turin) x 53.0 (Gen5 x16) / (1 + 2 c);
  // 103.88 / (1 + 2 c) = 81.8 -> c = (103.88 / 81.8 - 1) / 2 = 0.135 (the topology's chip cost).
  const double fit = aggregate_GBps(t, all_pairs_of(rig_switches({1})));
  CHECK(fit / m["intra_switch_12_flow_write_GBps"].get<double>() ==
        doctest::Approx(1.0).epsilon(0.01));
  CHECK(t.peer_concurrency_cost(0) == 0.135);
  // The checks, each `sim run` of its copy set; none was used to set anything.
  struct Row {
    std::string name;
    double measured, predicted;
  };
  std::vector<Row> rows;
  rows.push_back({"single pair PIX 0->1", m["single_pair_write_GBps"]["pix"].get<double>(),
                  aggregate_GBps(t, {{0, 1}})});
  rows.push_back({"single pair NODE 0->4", m["single_pair_write_GBps"]["node"].get<double>(),
                  aggregate_GBps(t, {{0, 4}})});
  rows.push_back({"2 pairs SW1 -> SW2 (one uplink)",
                  m["two_pairs_same_dst_switch_GBps"].get<double>(),
                  aggregate_GBps(t, {{0, 4}, {1, 5}})});
  for (const auto& [name, v] : m["all_to_all_8gpu_write_GBps"].items()) {
    const int a = name[2] - '0', b = name[6] - '0';
    rows.push_back({"8-GPU all-to-all " + name, v.get<double>(),
                    aggregate_GBps(t, all_pairs_of(rig_switches({a, b})))});
  }
  rows.push_back({"16-GPU all-to-all", m["all_to_all_16gpu_write_GBps"].get<double>(),
                  aggregate_GBps(t, all_pairs_of(rig_switches({1, 2, 3, 4})))});
  std::vector<double> errs;
  for (const Row& r : rows) {
    const double e = (r.predicted - r.measured) / r.measured;
    errs.push_back(std::abs(e));
    MESSAGE("16x PM50100 rig, " << r.name << ": measured " << r.measured << " predicted "
                                << r.predicted << " error " << e);
  }
  // Each single-, two-flow and 8-GPU row within 10% (today -3.1% .. -6.0%: the model's Gen5 x16
  // rate 53.0 GB/s against the write-up's 56.3). Known gap, asserted as a band: the 16-GPU
  // all-to-all at +27%. In the model that row is bound by the four uplinks, not by the chip cost
  // (next test case); what limits the machine is not stated by the source (topology/
  // VALIDATION.md, "What limits the 16-GPU all-to-all"), so nothing is set from it.
  for (size_t k = 0; k + 1 < rows.size(); ++k)
    CHECK(std::abs(rows[k].predicted / rows[k].measured - 1) <= 0.10);
  const double e16 = rows.back().predicted / rows.back().measured - 1;
  CHECK(e16 > 0.15);
  CHECK(e16 < 0.40);
  std::sort(errs.begin(), errs.end());
  // 10 rows: the median is the mean of the 5th and 6th smallest |error|.
  REQUIRE(errs.size() == 10);
  const double median = 0.5 * (errs[4] + errs[5]);
  MESSAGE("16x PM50100 rig: median |error| " << median << ", max " << errs.back());
  CHECK(median <= 0.10);
}

TEST_CASE("published chips: what binds the 16-GPU rig's all-to-alls in the model (closed form)") {
  // Every flow moves the same S bytes and every uplink carries as many flows each way, so the
  // makespan is set by one uplink direction: T = (flows out of one switch) x S / U, with U the
  // model's uplink rate with both directions loaded, 0.98 (amd-turin duplex) x 53.0 (Gen5 x16) =
  // 51.94 GB/s. The flows inside a switch never touch an uplink and end earlier.
  //  - 8 GPUs on 2 switches: 56 flows, 24 inside the switches, 32 across (16 each way per
  //    uplink): aggregate = 56 S / (16 S / U) = 3.5 U = 181.79 GB/s;
  //  - 16 GPUs on 4 switches: 240 flows, 48 inside, 192 across (48 each way per uplink):
  //    aggregate = 240 S / (48 S / U) = 5 U = 259.70 GB/s.
  const auto t = load_topology(kRigDir);
  const auto m = load_measured(kRigDir);
  const double u_GBps = 0.98 * 53.0;
  const double a8 = aggregate_GBps(t, all_pairs_of(rig_switches({1, 2})));
  const double a16 = aggregate_GBps(t, all_pairs_of(rig_switches({1, 2, 3, 4})));
  CHECK(a8 == doctest::Approx(3.5 * u_GBps).epsilon(0.005));
  CHECK(a16 == doctest::Approx(5.0 * u_GBps).epsilon(0.005));
  // The chip cost does not bind either row: without the chips' 0.135 and with no machine cost
  // the predictions stay at the uplink bound. (With 15 peers per GPU the chip's cap per GPU, in +
  // out, is 2 x 51.94 / (1 + 14 x 0.135) = 35.9 GB/s; the uplink-bound flows need
  // 2 x 12 x 51.94 / 48 = 26.0 of it.)
  const auto plain = load_without_chips(kRigDir);
  sim::SimOptions no_cost;
  no_cost.peer_concurrency_cost = 0;
  CHECK(aggregate_GBps(plain, all_pairs_of(rig_switches({1, 2, 3, 4})), no_cost) ==
        doctest::Approx(a16).epsilon(0.005));
  // What the measured rows say of one uplink direction under the same arithmetic (the source's
  // figures only): the 8-GPU rows 187.6..190.4 / 3.5 = 53.6..54.4 GB/s (0.95-0.97 of the single
  // pair's 56.3, both directions loaded, beside the switch-internal traffic); the 16-GPU row
  // 204.4 / 5 = 40.9 GB/s (0.73). The write-up's "91% of 4 x 56 GB/s" counts the 48 flows that
  // stay inside a switch (20% of the bytes) as uplink traffic. So the uplinks as the source's own
  // 8-GPU rows measure them do not explain the 16-GPU row, and no other figure of the source
  // states its limit: reported, not fitted.
  for (const auto& [name, v] : m["all_to_all_8gpu_write_GBps"].items()) {
    CHECK(v.get<double>() / 3.5 > 53.5);
    CHECK(v.get<double>() / 3.5 < 54.5);
  }
  CHECK(m["all_to_all_16gpu_write_GBps"].get<double>() / 5 == doctest::Approx(40.88));
}
