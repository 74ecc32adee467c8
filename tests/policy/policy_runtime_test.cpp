// Runtimes (CommPlan -> Workload) and the compute model.
#include <doctest/doctest.h>

#include <algorithm>

#include "policy_test_pattern.hpp"

using namespace sparsp;
using sparsp::testing::contiguous;
using sparsp::testing::TestPattern;

namespace {
const sim::Transfer* find_transfer(const sim::Workload& w, const std::string& part) {
  for (const auto& t : w.transfers)
    if (t.id.find(part) != std::string::npos) return &t;
  return nullptr;
}
bool has(const std::vector<std::string>& v, const std::string& part) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.find(part) != std::string::npos; });
}
}  // namespace

TEST_CASE("compute model") {
  policy::ComputeModel cm;
  cm.peak_bf16_flops = 100e12;
  cm.attention_efficiency = 0.5;
  cm.launch_overhead_s = 5e-6;
  // One 128 x 128 block pair, head_dim 128: 4 * 128 * 128 * 128 = 8388608 FLOPs; at 50 TFLOP/s
  // effective: 0.16777216 us, + 5 us launch = 5.16777216 us. 1000x that work: 172.77216 us.
  CHECK(cm.attention_flops(128, 128, 128) == 8388608.0);
  CHECK(cm.attention_time_s(8388608.0) == doctest::Approx(5.16777216e-6));
  CHECK(cm.attention_time_s(8388608.0e3) == doctest::Approx(172.77216e-6));
  // HunyuanVideo block: hidden 3072, MLP 12288: 2 * (4 * 3072^2 + 2 * 3072 * 12288)
  // = 2 * (37748736 + 75497472) = 226492416 FLOPs per token.
  patterns::ModelSpec m;
  m.hidden = 3072;
  m.mlp_hidden = 12288;
  CHECK(policy::ComputeModel::other_flops_per_token(m) == 226492416.0);
}

TEST_CASE("runtimes: engines and ordering") {
  TestPattern pat(16, 128, 2, 64, [](int, int q, int k) { return q - k <= 1 && k - q <= 1; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  policy::ComputeModel cm;
  auto plan = policy::make_scheme("demand_direct", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  SUBCASE("ce_decoupled: copy engines, remote attention after its own block only") {
    auto w = policy::make_workload("ce_decoupled", *plan, rt, cm, {}, 3);
    REQUIRE(w.ok());
    CHECK(w->transfers.size() == 6);
    for (const auto& t : w->transfers) {
      CHECK(t.engine == sim::Engine::ce);
      CHECK(t.comm_sms == 0);
      CHECK(t.layer == 3);
    }
    // Rank 1 has a local piece (no deps) and two remote pieces, each after one transfer.
    int local = 0, remote = 0;
    for (const auto& c : w->compute) {
      if (c.gpu != "gpu1") continue;
      if (c.after.empty())
        ++local;
      else {
        ++remote;
        CHECK(c.after.size() == 1);
      }
    }
    CHECK(local == 1);
    CHECK(remote == 2);
  }
  SUBCASE("sync: every attention piece after all of the rank's transfers") {
    auto w = policy::make_workload("sync", *plan, rt, cm, {}, 0);
    REQUIRE(w.ok());
    for (const auto& c : w->compute) {
      if (c.gpu != "gpu1") continue;
      // Rank 1 receives from 0 and 2 and sends to 0 and 2: 4 transfers.
      CHECK(c.after.size() == 4);
      CHECK(c.stream == "attn1");
    }
  }
  SUBCASE("sm_overlap: SM-driven copies taking comm_sms") {
    auto w = policy::make_workload("sm_overlap", *plan, rt, cm, {{"comm_sms", 8}}, 0);
    REQUIRE(w.ok());
    for (const auto& t : w->transfers) {
      CHECK(t.engine == sim::Engine::sm);
      CHECK(t.comm_sms == 8);
    }
  }
  SUBCASE("unknown runtime") {
    auto w = policy::make_workload("eager", *plan, rt, cm, {}, 0);
    REQUIRE_FALSE(w.ok());
  }
}

TEST_CASE("ring under sync alternates communication and attention") {
  TestPattern pat(8, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(8, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  auto w = policy::make_workload("sync", *plan, rt, policy::ComputeModel{}, {}, 0);
  REQUIRE(w.ok());
  // Hop 2 of shard 0 (rank 1 -> rank 2) waits for hop 1 and for rank 1's attention of step 1
  // (its local piece, phase 0, and the piece on shard 0, phase 1).
  const auto* t = find_transfer(*w, ".ring.1-2");
  REQUIRE(t);
  bool found = false;
  for (const auto& x : w->transfers)
    if (x.id.find(".ring.1-2") != std::string::npos && x.after.size() > 1) {
      found = true;
      CHECK(has(x.after, ".ring.0-1"));
      CHECK(has(x.after, ".local.1"));
    }
  CHECK(found);
  // Host staging forced: route mode host_staged on every transfer.
  auto staged = policy::make_scheme("ring", pat.input(pl, rt), {{"host_staged", 1}});
  REQUIRE(staged.ok());
  auto ws = policy::make_workload("ce_decoupled", *staged, rt, policy::ComputeModel{}, {}, 0);
  REQUIRE(ws.ok());
  for (const auto& x : ws->transfers) CHECK(x.route == topology::RouteMode::host_staged);
}
