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

TEST_CASE("sm_overlap high_priority_comm=0: each ring transfer after the attention beside it") {
  // Ring on P = 4, 8 blocks of 128 tokens, dense, contiguous: rank r holds blocks 2r, 2r+1.
  // Shard 0 travels 0 -> 1 (phase 1), 1 -> 2 (phase 2), 2 -> 3 (phase 3). In yunchang / xDiT
  // RingComm, the phase-p exchange is launched just before the phase-(p-1) flash-attn call;
  // at equal stream priority its kernel gets SMs only when that attention kernel ends, so:
  //  - hop 0 -> 1 (phase 1) waits for rank 0's local piece (phase 0);
  //  - hop 1 -> 2 (phase 2) waits for rank 1's phase-1 attention piece (on shard 3, the shard
  //    rank 1 receives at step 1) and for rank 1's local piece and phase-0 tasks (stream order),
  //    but not for rank 1's phase-1 LSE merge (queued after the attention kernel);
  //  - each attention piece of phase p waits for every message of phases <= p at its rank, on
  //    the rank's one compute stream "attn<r>".
  TestPattern pat(8, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(8, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  auto w = policy::make_workload("sm_overlap", *plan, rt, policy::ComputeModel{},
                                 {{"high_priority_comm", 0}}, 0);
  REQUIRE(w.ok());
  // Messages are numbered shard by shard: m0 = shard 0's hop 0 -> 1, m1 = its hop 1 -> 2; shard
  // 3 travels 3 -> 0 -> 1 -> 2 as m9, m10, m11 (3 hops x 3 earlier shards = m0..m8).
  int hops = 0;
  for (const auto& x : w->transfers) {
    CHECK(x.engine == sim::Engine::sm);
    if (x.id == "L0.m0.ring.0-1") {
      ++hops;
      CHECK(x.after == std::vector<std::string>{"L0.a0.local.0"});
    }
    if (x.id == "L0.m1.ring.1-2") {
      ++hops;
      CHECK(has(x.after, ".m0.ring.0-1"));
      CHECK(has(x.after, ".local.1"));
      CHECK(has(x.after, ".ring.1"));  // rank 1's phase-1 piece ("L0.a<i>.ring.1")
      CHECK_FALSE(has(x.after, ".ring_merge."));
    }
    if (x.id == "L0.m11.ring.1-2") {  // phase 3: rank 1's phase-1 merge is now stream order
      ++hops;
      CHECK(has(x.after, ".ring_merge.1"));
    }
  }
  CHECK(hops == 3);
  for (const auto& c : w->compute) {
    CHECK(c.stream == "attn" + c.gpu.substr(3));
    if (c.id.find(".ring.") == std::string::npos || c.gpu != "gpu2") continue;
    CHECK_FALSE(c.after.empty());
  }
  // No wave term (ComputeModel{}: attention_last_wave_share 0): every release is an end.
  for (const auto& x : w->transfers) CHECK(x.released_by_last_wave.empty());
  for (const auto& c : w->compute) CHECK(c.last_wave_fraction == 0);
  // With a wave term (a last wave of 1/4 of the kernel time): each transfer is released at the
  // last wave of the attention piece of phase p-1 it was launched beside, not at its end; the
  // tasks of earlier phases (stream order) and the merges still release it at their end. An
  // attention task's fraction is 1/4 of its kernel time over its duration with the launch:
  // 0.25 * (d - 5e-6) / d (ComputeModel's launch_overhead_s 5 us).
  policy::ComputeModel cm;
  cm.attention_last_wave_share = 0.25;
  auto lw = policy::make_workload("sm_overlap", *plan, rt, cm, {{"high_priority_comm", 0}}, 0);
  REQUIRE(lw.ok());
  for (const auto& x : lw->transfers) {
    if (x.id == "L0.m0.ring.0-1")
      CHECK(x.released_by_last_wave == std::vector<std::string>{"L0.a0.local.0"});
    if (x.id == "L0.m1.ring.1-2") {
      REQUIRE(x.released_by_last_wave.size() == 1);
      CHECK(x.released_by_last_wave[0].find(".ring.1") != std::string::npos);
      CHECK(has(x.after, x.released_by_last_wave[0]));  // a subset of after
    }
  }
  for (const auto& c : lw->compute) {
    if (c.what.kind == sim::TaskKind::attention)
      CHECK(c.last_wave_fraction == doctest::Approx(0.25 * (c.duration_s - 5e-6) / c.duration_s));
    else
      CHECK(c.last_wave_fraction == 0);
  }
  // The default (1) keeps today's overlap: hop 0 -> 1 waits for nothing, no compute stream,
  // and no last-wave release even with a wave term.
  auto d = policy::make_workload("sm_overlap", *plan, rt, cm, {}, 0);
  REQUIRE(d.ok());
  for (const auto& x : d->transfers) {
    if (x.id.find(".ring.0-1") != std::string::npos && !has(x.after, ".ring."))
      CHECK(x.after.empty());
    CHECK(x.released_by_last_wave.empty());
  }
  for (const auto& c : d->compute) {
    CHECK(c.stream.empty());
    CHECK(c.last_wave_fraction == 0);
  }
  // Read by sm_overlap only; a switch.
  CHECK(policy::check_policy_param("high_priority_comm", 0).ok());
  CHECK_FALSE(policy::check_policy_param("high_priority_comm", 0.5).ok());
  CHECK(policy::parse_policy("contiguous/ring/sm_overlap:high_priority_comm=0").ok());
  CHECK_FALSE(policy::parse_policy("contiguous/ring/sync:high_priority_comm=0").ok());
}
