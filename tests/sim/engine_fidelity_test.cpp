// Fidelity against real measurements (tests/data/sim/cases/*, copied from ../shared/cases/): the
// engine predicts what each benchmark measured, on a topology built only from the case's
// description (topology.json written from its README, or its nvidia-smi topo -m imported), and
// the relative error must stay within the tolerance stated per quantity below.
//
// How each benchmark is emulated (workload -> figure):
//  - p2pBandwidthLatencyTest unidirectional (CUDA samples): 5 back-to-back copies of 40,000,000 B
//    (10M ints) i -> j on one stream; GB/s = 5 * 40e6 / elapsed. "P2P=Disabled" copies are
//    host-staged (route host_staged), "P2P=Enabled" ones peer-to-peer where the pair allows it.
//  - bidirectional: the same in both directions at once on two streams; GB/s = 2 * 5 * 40e6 /
//    elapsed.
//  - bandwidthTest (pinned, 32,000,000 B): 10 back-to-back copies host <-> GPU.
//  - multi-flow totals (p2pmark all-to-all, the two-switch write-up's flow table): all flows at
//    once, each a stream of 16 MiB copies on the default engine (shared copy engines with the
//    peer-concurrency limit, sim/README.md "Many concurrent flows"); GB/s = sum over flows of
//    bytes / that flow's duration (the tools report per-flow bandwidth x flows). The same rows as
//    `sim run` of the copy set (total bytes / makespan) are asserted within 15% further down.
// Set SPARSP_FIDELITY_OUT=<file> to write the table (tests/data/sim/fidelity.json is that output).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;
using json = nlohmann::ordered_json;

namespace {

const std::string kCases = std::string(SPARSP_TEST_DATA_DIR) + "/sim/cases/";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), (std::string("cannot read ") + path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

topology::Topology case_topology(const std::string& c) {
  auto t = topology::Topology::from_json_file(kCases + c + "/topology.json");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  return std::move(t).value();
}

json measured(const std::string& c) { return json::parse(slurp(kCases + c + "/measured.json")); }

std::string gpu(int i) { return "gpu" + std::to_string(i); }

sim::Transfer copy(const std::string& id, const std::string& s, const std::string& d, double bytes,
                   topology::RouteMode mode, const std::string& stream) {
  sim::Transfer t;
  t.id = id;
  t.src = s;
  t.dst = d;
  t.bytes = bytes;
  t.route = mode;
  t.stream = stream;
  return t;
}

double makespan(const topology::Topology& t, const sim::Workload& w) {
  auto r = sim::simulate(t, w);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r->makespan_s;
}

/// p2pBandwidthLatencyTest, GB/s.
double p2p_test_GBps(const topology::Topology& t, int i, int j, bool bidirectional, topology::RouteMode mode) {
  constexpr double kBytes = 40e6;
  constexpr int kRepeat = 5;
  sim::Workload w;
  for (int k = 0; k < kRepeat; ++k) {
    w.transfers.push_back(copy("f" + std::to_string(k), gpu(i), gpu(j), kBytes, mode, "fwd"));
    if (bidirectional) w.transfers.push_back(copy("b" + std::to_string(k), gpu(j), gpu(i), kBytes, mode, "bwd"));
  }
  return (bidirectional ? 2 : 1) * kRepeat * kBytes / makespan(t, w) / 1e9;
}

/// bandwidthTest pinned H2D / D2H, GB/s.
double host_test_GBps(const topology::Topology& t, int g, bool h2d) {
  constexpr double kBytes = 32e6;
  sim::Workload w;
  const std::string host = "host" + std::to_string(t.gpu_socket(g));
  for (int k = 0; k < 10; ++k)
    w.transfers.push_back(copy("c" + std::to_string(k), h2d ? host : gpu(g), h2d ? gpu(g) : host, kBytes,
                               topology::RouteMode::automatic, "s"));
  return 10 * kBytes / makespan(t, w) / 1e9;
}

/// All flows at once, each a stream of 50 back-to-back 16 MiB copies (so every flow stays active
/// while the others run, as in the tools, which repeat each copy), on the default engine. Total =
/// sum over flows of the first copy's bandwidth, taken while all flows are active (the tools report
/// per-flow bandwidth x flows).
double concurrent_GBps(const topology::Topology& t, const std::vector<std::pair<int, int>>& flows) {
  constexpr double kBytes = 16.0 * 1024 * 1024;
  constexpr int kCopies = 50;
  sim::Workload w;
  for (size_t k = 0; k < flows.size(); ++k)
    for (int c = 0; c < kCopies; ++c) {
      w.transfers.push_back(copy("x" + std::to_string(k) + "_" + std::to_string(c),
                                 gpu(flows[k].first), gpu(flows[k].second), kBytes,
                                 topology::RouteMode::automatic, "s" + std::to_string(k)));
    }
  auto r = sim::simulate(t, w);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  double total = 0, first_all_done = 0, last_start = 0;
  for (size_t k = 0; k < flows.size(); ++k) {
    const auto& a = r->activities[k * kCopies];
    total += a.bytes / (a.end_s - a.start_s);
    first_all_done = std::max(first_all_done, a.end_s);
    last_start = std::max(last_start, r->activities[k * kCopies + kCopies - 1].start_s);
  }
  CHECK(first_all_done < last_start);  // every first copy ran while all flows were active
  return total / 1e9;
}

/// The copy set of a many-flow row as `sparsp sim run` sees it: one transfer per flow, each on
/// its own stream, the workload's default engine (no engine field: copy engines, today's default
/// model), pushed (driver src, the default) or pulled (driver dst, as p2pmark's all-read-all
/// copies are issued on the reader). Aggregate GB/s = total bytes / makespan.
double copy_set_GBps(const topology::Topology& t, const std::vector<std::pair<int, int>>& flows,
                     double bytes, sim::Driver driver) {
  sim::Workload w;
  for (size_t k = 0; k < flows.size(); ++k) {
    w.transfers.push_back(copy("m" + std::to_string(k), gpu(flows[k].first), gpu(flows[k].second),
                               bytes, topology::RouteMode::automatic, ""));
    w.transfers.back().driver = driver;
  }
  return static_cast<double>(flows.size()) * bytes / makespan(t, w) / 1e9;
}

/// p2pmark's own figure for concurrent reads (lukealonso/p2pmark, p2pmark.cu: the topology probe
/// and "all GPUs read all peers"): every reader GPU times its own reads (their bytes over the time
/// until its last one ends) and the figure is the sum over readers, not total bytes / makespan.
/// The two differ where readers end at different times (probe +2: four reads inside a chip end
/// at half the time of the four that share uplinks). Each flow is one `bytes` read pulled by its
/// destination, all starting together.
double p2pmark_GBps(const topology::Topology& t, const std::vector<std::pair<int, int>>& flows,
                    double bytes) {
  sim::Workload w;
  for (size_t k = 0; k < flows.size(); ++k) {
    w.transfers.push_back(copy(std::to_string(k), gpu(flows[k].first), gpu(flows[k].second), bytes,
                               topology::RouteMode::automatic, ""));
    w.transfers.back().driver = sim::Driver::dst;
  }
  auto r = sim::simulate(t, w);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  std::map<int, std::pair<double, double>> reader;  // GPU -> (bytes, end of its last read)
  for (const sim::ActivityResult& a : r->activities) {
    if (!a.is_transfer) continue;
    auto& [b, end] = reader[flows[std::stoul(a.id)].second];
    b += bytes;
    end = std::max(end, a.end_s);
  }
  double total_Bps = 0;
  for (const auto& [g, be] : reader) total_Bps += be.first / be.second;
  return total_Bps / 1e9;
}

/// p2pBandwidthLatencyTest P2P=Disabled through the driver's staging path (staging "driver").
double driver_staged_GBps(const topology::Topology& t, int i, int j, bool bidirectional) {
  constexpr double kBytes = 40e6;
  constexpr int kRepeat = 5;
  sim::Workload w;
  for (int k = 0; k < kRepeat; ++k) {
    w.transfers.push_back(copy("f" + std::to_string(k), gpu(i), gpu(j), kBytes,
                               topology::RouteMode::host_staged, "fwd"));
    w.transfers.back().staging = sim::Staging::driver;
    if (bidirectional) {
      w.transfers.push_back(copy("b" + std::to_string(k), gpu(j), gpu(i), kBytes,
                                 topology::RouteMode::host_staged, "bwd"));
      w.transfers.back().staging = sim::Staging::driver;
    }
  }
  return (bidirectional ? 2 : 1) * kRepeat * kBytes / makespan(t, w) / 1e9;
}

std::vector<std::pair<int, int>> all_pairs(const std::vector<int>& from, const std::vector<int>& to) {
  std::vector<std::pair<int, int>> out;
  for (int a : from)
    for (int b : to)
      if (a != b) out.emplace_back(a, b);
  return out;
}

struct Table {
  json rows = json::array();
  int failures = 0;
  void add(const std::string& c, const std::string& quantity, double meas, double pred, double tol) {
    const double err = (pred - meas) / meas;
    rows.push_back({{"case", c}, {"quantity", quantity}, {"measured_GBps", meas},
                    {"predicted_GBps", std::round(pred * 1000) / 1000},
                    {"rel_error", std::round(err * 10000) / 10000}, {"tolerance", tol}});
    CHECK_MESSAGE(std::abs(err) <= tol, c << " " << quantity << ": measured " << meas << " predicted " << pred
                                          << " error " << err << " > " << tol);
  }
  /// Every off-diagonal non-null matrix entry.
  void matrix(const std::string& c, const std::string& quantity, const json& m, double tol,
              const std::function<double(int, int)>& predict) {
    for (size_t i = 0; i < m.size(); ++i)
      for (size_t j = 0; j < m[i].size(); ++j)
        if (i != j && m[i][j].is_number())
          add(c, quantity + "[" + std::to_string(i) + "][" + std::to_string(j) + "]", m[i][j].get<double>(),
              predict(static_cast<int>(i), static_cast<int>(j)), tol);
  }
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

// Tolerances: 30% (35% for host-staged copies) where the model has every element the measurement
// exercises. Known gaps get wide, stated tolerances so that the table in
// tests/data/sim/fidelity.json stays honest and a regression still fails.
//  - (was kSerialStaging, 100% and 110%: the 2080 Ti case's staged copies at ~half of H2D/D2H and
//    bidirectional staged copies barely beating one direction. Since issue 17's host reads under
//    writes (sim/README.md) a copy-engine read of host memory gets 0.49 of a Gen <= 4 link that
//    also carries a write to the host: the 2080 Ti's staged copies read and write through one
//    switch uplink, and a bidirectional staged copy reads and writes on both GPUs' links. Both
//    cases' staged rows are now within kTolStaged, the driver path's within kDriver or
//    kDriverBidir.)
//  - (was kAggregate, 130%, for the all-to-all aggregates: since issue 17 the default engine's
//    shared copy engines and peer-concurrency limit bring them within kTol.)
// Driver staging (staging "driver", issue 17): P2P=Disabled rows asserted for the driver path.
//  - kDriver (15%): unidirectional (H100 SXM, RTX 4090, RTX 2080 Ti) and the 2080 Ti's
//    bidirectional rows (the per-chunk overhead is fitted to the H100 and 4090 unidirectional
//    means; the read fraction 0.49 comes from a published A100 measurement, not these rows);
//  - kDriverBidir (25%): the RTX 4090's three bidirectional rows, -20%, -18% (two SYS pairs) and
//    +16% (the PHB pair). The model gives every pair the same 24.4 GB/s; the machine gives the
//    PHB pair 21.1 and the SYS pairs 30: a per-host-bridge effect the case does not describe
//    (sim/README.md "Host reads under writes").
constexpr double kDriver = 0.15, kDriverBidir = 0.25;
constexpr size_t kRows = 394;

constexpr double kTol = 0.30, kTolStaged = 0.35;

void fidelity_case_1() {  // fidelity: 2x RTX 2080 Ti, one Gen3 switch, host-staged
  const std::string c = "2x-gen3-switch-no-p2p";
  const auto t = case_topology(c);
  const json m = measured(c);
  auto& tab = table();
  const auto staged = topology::RouteMode::host_staged;
  tab.matrix(c, "p2p_disabled_unidirectional", m["p2p_disabled_unidirectional_GBps"], kTolStaged,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, false, staged); });
  tab.matrix(c, "p2p_disabled_bidirectional", m["p2p_disabled_bidirectional_GBps"], kTolStaged,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, true, staged); });
  tab.matrix(c, "p2p_disabled_unidirectional (staging driver)",
             m["p2p_disabled_unidirectional_GBps"], kDriver,
             [&](int i, int j) { return driver_staged_GBps(t, i, j, false); });
  tab.matrix(c, "p2p_disabled_bidirectional (staging driver)", m["p2p_disabled_bidirectional_GBps"],
             kDriver, [&](int i, int j) { return driver_staged_GBps(t, i, j, true); });
  tab.add(c, "h2d (bandwidthTest)", m["h2d_GBps"].get<double>(), host_test_GBps(t, 0, true), kTol);
  tab.add(c, "d2h (bandwidthTest)", m["d2h_GBps"].get<double>(), host_test_GBps(t, 0, false), kTol);
}

void fidelity_case_2() {  // fidelity: 6x RTX 4090, PHB/SYS, host-staged (imported from nvidia-smi topo -m)
  const std::string c = "6x-rtx4090-phb-sys-no-p2p";
  topology::ImportOptions o;
  o.gpu_model = "NVIDIA GeForce RTX 4090";
  o.pcie_gen = 4;
  o.pcie_width = 16;
  o.p2p = false;
  auto ti = topology::import_nvidia_smi(slurp(kCases + c + "/topo.txt"), c + "/topo.txt", o);
  REQUIRE_MESSAGE(ti.ok(), (ti.ok() ? "" : ti.error().message));
  const auto& t = *ti;
  const json m = measured(c);
  auto& tab = table();
  const auto staged = topology::RouteMode::host_staged;
  tab.matrix(c, "p2p_disabled_unidirectional", m["p2p_disabled_unidirectional_GBps"], kTolStaged,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, false, staged); });
  tab.matrix(c, "p2p_disabled_bidirectional", m["p2p_disabled_bidirectional_GBps"], kTolStaged,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, true, staged); });
  tab.matrix(c, "p2p_disabled_unidirectional (staging driver)",
             m["p2p_disabled_unidirectional_GBps"], kDriver,
             [&](int i, int j) { return driver_staged_GBps(t, i, j, false); });
  tab.matrix(c, "p2p_disabled_bidirectional (staging driver)", m["p2p_disabled_bidirectional_GBps"],
             kDriverBidir, [&](int i, int j) { return driver_staged_GBps(t, i, j, true); });
}

void fidelity_case_3() {  // fidelity: 8x RTX PRO 6000, Gen5 direct attach, two sockets
  const std::string c = "8x-gen5-direct-attach-dual-socket";
  const auto t = case_topology(c);
  const json m = measured(c);
  auto& tab = table();
  const auto p2p = topology::RouteMode::p2p;
  tab.matrix(c, "bidirectional_p2p", m["bidirectional_p2p_GBps"], kTol,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, true, p2p); });
  tab.add(c, "unidirectional NODE (gpu0->gpu1)", m["unidirectional_p2p_by_tier_GBps"]["NODE"].get<double>(),
          p2p_test_GBps(t, 0, 1, false, p2p), kTol);
  const double sys = 0.5 * (m["unidirectional_p2p_by_tier_GBps"]["SYS"]["min"].get<double>() +
                            m["unidirectional_p2p_by_tier_GBps"]["SYS"]["max"].get<double>());
  tab.add(c, "unidirectional SYS (gpu0->gpu4)", sys, p2p_test_GBps(t, 0, 4, false, p2p), kTol);
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  tab.add(c, "p2pmark all-to-all (56 flows)", m["p2pmark"]["all_to_all_GBps"].get<double>(),
          concurrent_GBps(t, all_pairs(all, all)), kTol);
}

void fidelity_case_4() {  // fidelity: 8x RTX PRO 6000, two Gen5 switches, one socket
  const std::string c = "8x-gen5-two-switches-one-socket";
  const auto t = case_topology(c);
  const json m = measured(c);
  auto& tab = table();
  const auto p2p = topology::RouteMode::p2p;
  tab.matrix(c, "bidirectional_p2p", m["bidirectional_p2p_GBps"], kTol,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, true, p2p); });
  tab.add(c, "unidirectional PIX (gpu0->gpu1)", m["unidirectional_p2p_by_tier_GBps"]["PIX"].get<double>(),
          p2p_test_GBps(t, 0, 1, false, p2p), kTol);
  tab.add(c, "unidirectional NODE (gpu0->gpu4)", m["unidirectional_p2p_by_tier_GBps"]["NODE"].get<double>(),
          p2p_test_GBps(t, 0, 4, false, p2p), kTol);
  // The write-up's flow table (flows_GBps), in its order.
  const std::vector<int> s0{0, 1, 2, 3}, s1{4, 5, 6, 7}, all{0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<std::vector<std::pair<int, int>>> sets = {
      {{0, 1}},                                  // 1 flow PIX
      {{0, 1}, {2, 3}},                          // 2 flows PIX (same switch)
      {{0, 4}},                                  // 1 flow NODE
      {{0, 4}, {1, 5}},                          // 2 flows NODE, same source switch
      {{0, 4}, {1, 5}, {2, 6}, {3, 7}},          // 4 flows NODE 1:1
      all_pairs(s0, s0),                         // 12 flows same-switch all-to-all
      all_pairs(s0, s1),                         // 16 flows cross-switch
      all_pairs(all, all)};                      // 56 flows all-to-all
  const json& f = m["flows_GBps"];
  REQUIRE(f.size() == sets.size());
  for (size_t k = 0; k < sets.size(); ++k)
    tab.add(c,
            "flows: " + f[k]["config"].get<std::string>() + " x" + std::to_string(sets[k].size()) +
                " total",
            f[k]["total"].get<double>(), concurrent_GBps(t, sets[k]), kTol);
}

void fidelity_case_5() {  // fidelity: 8x H100 SXM, NVSwitch
  const std::string c = "8x-h100-sxm-nvswitch";
  const auto t = case_topology(c);
  const json m = measured(c);
  auto& tab = table();
  tab.matrix(c, "bidirectional_p2p", m["bidirectional_p2p_GBps"], kTol,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, true, topology::RouteMode::p2p); });
  tab.matrix(c, "unidirectional_p2p", m["unidirectional_p2p_GBps"], kTol,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, false, topology::RouteMode::p2p); });
  tab.matrix(c, "p2p_disabled_unidirectional", m["p2p_disabled_unidirectional_GBps"], kTolStaged,
             [&](int i, int j) { return p2p_test_GBps(t, i, j, false, topology::RouteMode::host_staged); });
  tab.matrix(c, "p2p_disabled_unidirectional (staging driver)",
             m["p2p_disabled_unidirectional_GBps"], kDriver,
             [&](int i, int j) { return driver_staged_GBps(t, i, j, false); });
}

// Many concurrent flows (issue 17): every many-flow row of the shared cases, as `sparsp sim run`
// of its copy set with the default engine, within kManyFlow. The write-up's own benchmark copies
// 256 MiB per flow (pushed); p2pmark copies 64 MB with cudaMemcpyPeerAsync on the reading GPU
// (pulled). The peer-concurrency cost and the read efficiency are fitted to rows of the
// two-switch case (12- and 56-flow, 4-GPU all-read-all); the other rows are checks.
constexpr double kManyFlow = 0.15;

void fidelity_many_flows() {
  auto& tab = table();
  const auto push = sim::Driver::automatic, pull = sim::Driver::dst;
  const double mib256 = 256.0 * 1024 * 1024, mb64 = 64e6;
  const std::vector<int> s0{0, 1, 2, 3}, s1{4, 5, 6, 7}, all{0, 1, 2, 3, 4, 5, 6, 7};
  {
    const std::string c = "8x-gen5-two-switches-one-socket";
    const auto t = case_topology(c);
    const json m = measured(c);
    const std::vector<std::vector<std::pair<int, int>>> sets = {{{0, 1}},
                                                                {{0, 1}, {2, 3}},
                                                                {{0, 4}},
                                                                {{0, 4}, {1, 5}},
                                                                {{0, 4}, {1, 5}, {2, 6}, {3, 7}},
                                                                all_pairs(s0, s0),
                                                                all_pairs(s0, s1),
                                                                all_pairs(all, all)};
    const json& f = m["flows_GBps"];
    REQUIRE(f.size() == sets.size());
    for (size_t k = 0; k < sets.size(); ++k)
      tab.add(c,
              "copy set (sim run): " + f[k]["config"].get<std::string>() + " x" +
                  std::to_string(sets[k].size()),
              f[k]["total"].get<double>(), copy_set_GBps(t, sets[k], mib256, push), kManyFlow);
    tab.add(c, "copy set (sim run): p2pmark 4-GPU all-read-all",
            m["p2pmark"]["gpus4"]["all_to_all_GBps"].get<double>(),
            copy_set_GBps(t, all_pairs(s0, s0), mb64, pull), kManyFlow);
    tab.add(c, "copy set (sim run): p2pmark 8-GPU all-read-all",
            m["p2pmark"]["gpus8"]["all_to_all_GBps"].get<double>(),
            copy_set_GBps(t, all_pairs(all, all), mb64, pull), kManyFlow);
  }
  {
    const std::string c = "8x-gen5-direct-attach-dual-socket";
    const auto t = case_topology(c);
    const json m = measured(c);
    tab.add(c, "copy set (sim run): p2pmark all-read-all x56",
            m["p2pmark"]["all_to_all_GBps"].get<double>(),
            copy_set_GBps(t, all_pairs(all, all), mb64, pull), kManyFlow);
    const json& single = m["p2pmark"]["single_reader_7_peers_GBps"];
    for (int g = 0; g < 8; ++g) {
      std::vector<std::pair<int, int>> flows;
      for (int p = 0; p < 8; ++p)
        if (p != g) flows.emplace_back(p, g);
      tab.add(c, "copy set (sim run): p2pmark single reader gpu" + std::to_string(g) + " x7",
              single[static_cast<size_t>(g)].get<double>(), copy_set_GBps(t, flows, mb64, pull),
              kManyFlow);
    }
  }
}

TEST_CASE("fidelity: many concurrent flows, sim run of each copy set (issue 17)") {
  fidelity_many_flows();
}

TEST_CASE("fidelity: 2x RTX 2080 Ti, one Gen3 switch, host-staged") { fidelity_case_1(); }
TEST_CASE("fidelity: 6x RTX 4090, PHB/SYS, host-staged (imported from nvidia-smi topo -m)") { fidelity_case_2(); }
TEST_CASE("fidelity: 8x RTX PRO 6000, Gen5 direct attach, two sockets") { fidelity_case_3(); }
TEST_CASE("fidelity: 8x RTX PRO 6000, two Gen5 switches, one socket") { fidelity_case_4(); }
TEST_CASE("fidelity: 8x H100 SXM, NVSwitch") { fidelity_case_5(); }

TEST_CASE("fidelity: summary (and SPARSP_FIDELITY_OUT)") {
  auto& tab = table();
  // Under CTest each test case runs in its own process: the table is then empty here.
  if (tab.rows.empty()) return;
  CHECK(tab.rows.size() == kRows);  // every figure of the five cases (all tests above ran)
  double sum = 0, worst = 0;
  for (const auto& r : tab.rows) {
    sum += std::abs(r["rel_error"].get<double>());
    worst = std::max(worst, std::abs(r["rel_error"].get<double>()));
  }
  MESSAGE("fidelity: " << tab.rows.size() << " figures, mean |error| " << sum / static_cast<double>(tab.rows.size()) << ", worst "
                       << worst);
  if (const char* out = std::getenv("SPARSP_FIDELITY_OUT")) {
    std::ofstream f(out);
    f << json{{"generated_by", "SPARSP_FIDELITY_OUT=<file> test_sim -tc='fidelity*'"},
              {"mean_abs_rel_error", std::round(sum / static_cast<double>(tab.rows.size()) * 10000) / 10000},
              {"worst_abs_rel_error", std::round(worst * 10000) / 10000},
              {"rows", tab.rows}}
                 .dump(1)
      << "\n";
  }
}

// Public many-flow measurements outside shared/ (issue 17; topology/VALIDATION.md "Many flows
// outside shared/"): the ASUS ESC8000A-E13P write-up (tests/data/sim/published/
// 8x-rtxpro6000-turin-2chip-4vs: topology from what the source states, measured.json its
// p2pmark figures of its revision 41d9d68), each p2pmark row as p2pmark computes it
// (p2pmark_GBps: the sum over readers of each reader's own rate, pulled 64 MB reads; until
// branch manyflow17c these rows were total bytes / makespan, which under-counts a probe whose
// readers end at different times). The chips are grouped as the write-up's revision 48c31ee
// states them (chip A = GPU 0-3 on NUMA 0, chip B = GPU 4-7 on NUMA 1). Bar: median |error|
// <= 10% (met: 9.3%), max <= 20% (not met: the 8-GPU all-to-all +229%, probes +3 / +5 +28% /
// +30%). The 8-GPU all-to-all is what the write-up blames on its PEX890xx posted-write collapse
// (16 cross-chip flows: 7.7 GB/s written, 9.0 read, where 4 flows move 83.2), which no capacity
// limit reproduces; but p2pmark 3c39f36 reads (pulled copies), and the write-up's own rule
// exempts non-posted reads, so that rule, built, would leave this row at +229% (branch
// manyflow17d; topology/VALIDATION.md "The posted-write rule, worked out"). Probes +3 / +5:
// the model runs the two reads inside a chip at 52.9 GB/s and the six crossing sockets at 21.3
// (sum 233.7); the machine's sum is 183, and which of its reads are slower is not published.
// Asserted within 15%: the 4-GPU rows and probes +1, +2, +4, +6, +7; the others are held to a
// band (a regression guard, not validation).
TEST_CASE("fidelity: public many-flow rows outside shared (ESC8000A-E13P, checked)") {
  const std::string dir =
      std::string(SPARSP_TEST_DATA_DIR) + "/sim/published/8x-rtxpro6000-turin-2chip-4vs/";
  auto tr = topology::Topology::from_json_file(dir + "topology.json");
  REQUIRE_MESSAGE(tr.ok(), (tr.ok() ? "" : tr.error().message));
  const auto& t = *tr;
  const json m = json::parse(slurp(dir + "measured.json"));
  const std::vector<int> g4{0, 1, 2, 3}, g8{0, 1, 2, 3, 4, 5, 6, 7};
  struct Row {
    std::string name;
    double measured, predicted;
  };
  std::vector<Row> rows;
  rows.push_back({"4-GPU all-to-all", m["p2pmark_all_to_all_GBps"]["gpus4_numa0"].get<double>(),
                  p2pmark_GBps(t, all_pairs(g4, g4), 64e6)});
  rows.push_back({"8-GPU all-to-all", m["p2pmark_all_to_all_GBps"]["gpus8"].get<double>(),
                  p2pmark_GBps(t, all_pairs(g8, g8), 64e6)});
  // The same 4 GPUs written (revision 48c31ee's own script): the PEX890xx chip under 12 flows
  // (m = 3) with the default cost 0.2, no chip cost given: a check that this chip needs none.
  rows.push_back({"same-chip 12-flow write", m["same_chip_12_flow_write_GBps"].get<double>(),
                  copy_set_GBps(t, all_pairs(g4, g4), 256.0 * 1024 * 1024, sim::Driver::src)});
  for (int k = 1; k <= 7; ++k) {
    std::vector<std::pair<int, int>> flows;  // GPU i reads from GPU (i + k) mod 8
    for (int i = 0; i < 8; ++i) flows.emplace_back((i + k) % 8, i);
    rows.push_back({"probe +" + std::to_string(k),
                    m["p2pmark_probe_total_GBps"][std::to_string(k)].get<double>(),
                    p2pmark_GBps(t, flows, 64e6)});
  }
  std::vector<double> errs;
  for (const Row& r : rows) {
    const double e = (r.predicted - r.measured) / r.measured;
    errs.push_back(std::abs(e));
    MESSAGE(r.name << ": measured " << r.measured << " predicted " << r.predicted << " error "
                   << e);
    const bool reported =
        r.name == "8-GPU all-to-all" || r.name == "probe +3" || r.name == "probe +5";
    if (!reported) CHECK(std::abs(e) <= 0.15);
    CHECK(std::abs(e) <= 3.0);  // regression guard on the reported rows (worst today +229%)
  }
  std::sort(errs.begin(), errs.end());
  const double median = 0.5 * (errs[(errs.size() - 1) / 2] + errs[errs.size() / 2]);
  MESSAGE("ESC8000A-E13P many-flow rows: median |error| " << median << ", max " << errs.back()
                                                          << " (bar: 0.10 / 0.20)");
  // 10 rows: median = the mean of the 5th and 6th smallest |error| (probe +4 8.4%, probe +2
  // 10.3%: 9.3%).
  CHECK(median <= 0.10);
  CHECK(errs.back() > 0.20);  // the max is not met (the 8-GPU all-to-all): flips when modelled
}
