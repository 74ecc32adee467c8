// Volume and work tests of the communication schemes and placements, on small hand-built
// patterns (tests/policy/policy_test_pattern.hpp). Every expected number is derived in a comment.
//
// Common setup unless stated: 16 blocks x 128 tokens (2048 tokens), head_dim 64, bf16 (2 bytes).
// KV block, all heads:  2 (K and V) * 128 tokens * H * 64 * 2 bytes = 32768 * H bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "policy_test_pattern.hpp"

using namespace sparsp;
using sparsp::testing::contiguous;
using sparsp::testing::TestPattern;

namespace {

double payload_into(const policy::CommPlan& p, int dst) {
  double b = 0;
  for (const auto& m : p.messages)
    if (!m.control && m.dst == dst) b += m.bytes;
  return b;
}
double task_flops(const policy::CommPlan& p) {
  double f = 0;
  for (const auto& t : p.tasks) f += t.flops;
  return f;
}
// Deterministic pseudo-random bit (64-bit LCG, Knuth MMIX constants).
bool rnd(int h, int q, int k, int percent) {
  uint64_t x = static_cast<uint64_t>(h * 1000003 + q * 1009 + k) * 6364136223846793005ULL +
               1442695040888963407ULL;
  x ^= x >> 33;
  return static_cast<int>(x % 100) < percent;
}

}  // namespace

TEST_CASE("ring moves (P-1)/P of all KV into every GPU") {
  // H = 2: KV block = 65536 B; total KV = 16 * 65536 = 1048576 B. P = 4: shard = 4 blocks =
  // 262144 B, forwarded 3 hops -> each GPU receives 3 shards = 786432 B = 3/4 of all KV.
  TestPattern pat(16, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  for (int g = 0; g < 4; ++g) CHECK(payload_into(*plan, g) == doctest::Approx(786432.0));
  CHECK(plan->payload_bytes() == doctest::Approx(4 * 786432.0));
  CHECK(plan->messages.size() == 12);  // 4 shards x 3 hops
  // Attention work is conserved: dense 16 x 16 pairs x 2 heads x 4 * 128 * 128 * 64 FLOPs
  // = 512 * 4194304 = 2147483648 FLOPs.
  CHECK(task_flops(*plan) == doctest::Approx(2147483648.0));
  auto ag = policy::make_scheme("allgather", pat.input(pl, rt), {});
  REQUIRE(ag.ok());
  CHECK(ag->payload_bytes() == doctest::Approx(4 * 786432.0));  // NCCL ring all-gather: same
  CHECK(task_flops(*ag) == doctest::Approx(2147483648.0));
}

TEST_CASE("ring skip_empty stops a shard after the last GPU that needs it") {
  // Causal mask (k <= q), 4 ranks contiguous: shard 0 is needed by ranks 1, 2, 3 (3 hops),
  // shard 1 by 2, 3 (2 hops), shard 2 by 3 (1 hop), shard 3 by nobody (0 hops): 6 hops of
  // 262144 B = 1572864 B, against 12 hops = 3145728 B without skip_empty.
  TestPattern pat(16, 128, 2, 64, [](int, int q, int k) { return k <= q; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto full = policy::make_scheme("ring", pat.input(pl, rt), {});
  auto skip = policy::make_scheme("ring", pat.input(pl, rt), {{"skip_empty", 1}});
  REQUIRE(full.ok());
  REQUIRE(skip.ok());
  CHECK(full->payload_bytes() == doctest::Approx(3145728.0));
  CHECK(skip->payload_bytes() == doctest::Approx(1572864.0));
  // Causal work: 136 active pairs (16*17/2) x 2 heads x 4194304 FLOPs = 1140850688.
  CHECK(task_flops(*skip) == doctest::Approx(1140850688.0));
}

TEST_CASE("ulysses moves the closed-form all-to-all volume") {
  // H = 4, P = 4, N = 2048 tokens, 512 per rank. Per ordered pair (s, d): Q, K, V of s's 512
  // tokens for d's one head: 3 * 512 * 1 * 64 * 2 = 196608 B; output back: 512 * 64 * 2 =
  // 65536 B. 12 pairs -> 12 * 262144 = 3145728 B = 4 (P-1)/P * N * H * hd * 2
  // = 4 * 0.75 * 2048 * 4 * 64 * 2.
  TestPattern pat(16, 128, 4, 64, [](int h, int q, int k) { return rnd(h, q, k, 30); });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  CHECK(plan->payload_bytes() == doctest::Approx(3145728.0));
  // Work conserved: active pairs over all heads x 4194304.
  double active = 0;
  for (int h = 0; h < 4; ++h)
    for (int q = 0; q < 16; ++q)
      for (int k = 0; k < 16; ++k) active += rnd(h, q, k, 30);
  CHECK(task_flops(*plan) == doctest::Approx(active * 4194304.0));
}

TEST_CASE("usp: Ulysses within groups, ring across them") {
  // P = 4, u = 2, r = 2, H = 4 (2 heads per group). All-to-all inside each pair of ranks:
  // per ordered pair in: 3 * 512 * 2 * 64 * 2 = 393216 B, out: 512 * 2 * 64 * 2 = 131072 B;
  // 2 groups x 2 ordered pairs = 4 pairs -> 2097152 B. Ring: per head group (2) and sequence
  // group (2), one hop of K and V of 1024 tokens x 2 heads: 2 * 1024 * 2 * 64 * 2 = 524288 B
  // -> 4 hops = 2097152 B. Total 4194304 B.
  TestPattern pat(16, 128, 4, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("usp", pat.input(pl, rt), {{"ulysses_degree", 2}});
  REQUIRE(plan.ok());
  CHECK(plan->payload_bytes() == doctest::Approx(4194304.0));
  // Dense: 256 pairs x 4 heads x 4194304 FLOPs.
  CHECK(task_flops(*plan) == doctest::Approx(256.0 * 4 * 4194304.0));
}

TEST_CASE("ulysses rejects heads not divisible by the degree") {
  TestPattern pat(16, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().message.find("not divisible") != std::string::npos);
}

TEST_CASE("demand_direct carries exactly the needed remote KV blocks") {
  // Random 20% mask per head (H = 3). Expected need of rank g from owner o, computed here by
  // brute force: the KV blocks k owned by o with mask(h, q, k) for some head h and some query
  // block q owned by g; block granularity costs 32768 * 3 = 98304 B per block; per-(head, block)
  // granularity 32768 B per needed (head, block).
  const int H = 3;
  TestPattern pat(16, 128, H, 64, [](int h, int q, int k) { return rnd(h, q, k, 20); });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  for (auto gran : {policy::Granularity::block, policy::Granularity::head_block}) {
    auto plan = policy::make_scheme("demand_direct", pat.input(pl, rt, gran), {});
    REQUIRE(plan.ok());
    std::map<std::pair<int, int>, double> got;
    for (const auto& m : plan->messages) got[{m.src, m.dst}] += m.bytes;
    for (int g = 0; g < 4; ++g)
      for (int o = 0; o < 4; ++o) {
        if (g == o) continue;
        std::set<int> blocks;
        std::set<std::pair<int, int>> head_blocks;
        for (int h = 0; h < H; ++h)
          for (int q = 4 * g; q < 4 * g + 4; ++q)
            for (int k = 4 * o; k < 4 * o + 4; ++k)
              if (rnd(h, q, k, 20)) {
                blocks.insert(k);
                head_blocks.insert({h, k});
              }
        const double want = gran == policy::Granularity::block
                                ? 98304.0 * static_cast<double>(blocks.size())
                                : 32768.0 * static_cast<double>(head_blocks.size());
        CHECK(got[{o, g}] == doctest::Approx(want));
      }
  }
}

TEST_CASE("1D band mask over 4 GPUs: exactly the neighbours' boundary blocks") {
  // |q - k| <= 1, contiguous 4 blocks per rank: rank g needs block 4g-1 from g-1 and block 4g+4
  // from g+1: 6 messages of one block each (H = 2: 65536 B), 393216 B in all.
  TestPattern pat(16, 128, 2, 64, [](int, int q, int k) { return q - k <= 1 && k - q <= 1; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("demand_direct", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  std::map<std::pair<int, int>, std::vector<int32_t>> got;
  for (const auto& m : plan->messages) {
    CHECK(m.bytes == doctest::Approx(65536.0));
    got[{m.src, m.dst}] = m.kv_blocks;
  }
  CHECK(got.size() == 6);
  for (int g = 0; g < 4; ++g) {
    if (g > 0) CHECK(got[{g - 1, g}] == std::vector<int32_t>{4 * g - 1});
    if (g < 3) CHECK(got[{g + 1, g}] == std::vector<int32_t>{4 * g + 4});
  }
  CHECK(plan->payload_bytes() == doctest::Approx(393216.0));
  // demand_alltoall: same payload; index exchange of 12 ordered pairs, 4 B count + 4 B per
  // requested block: 12 * 4 + 6 * 4 = 72 B of control.
  auto dsv = policy::make_scheme("demand_alltoall", pat.input(pl, rt), {});
  REQUIRE(dsv.ok());
  CHECK(dsv->payload_bytes() == doctest::Approx(393216.0));
  CHECK(dsv->control_bytes() == doctest::Approx(72.0));
  CHECK(plan->control_bytes() == 0.0);  // static pattern: no discovery
}

namespace {
// Two switches of two ranks each (ranks 0, 1 under sw0; 2, 3 under sw1), one socket.
policy::RankTopology two_switches(bool p2p) {
  auto rt = policy::RankTopology::flat(4, p2p);
  rt.ancestors = {{"sw0", "cpu0"}, {"sw0", "cpu0"}, {"sw1", "cpu0"}, {"sw1", "cpu0"}};
  return rt;
}
// Bytes entering switch s from outside it (its uplink, downstream direction); host staging
// counts the device-to-host copy on the owner's uplink and the host-to-device copy on the
// requester's.
double into_switch(const policy::CommPlan& p, const policy::RankTopology& rt,
                   const std::string& sw) {
  double b = 0;
  for (const auto& m : p.messages) {
    if (m.control || m.dst < 0) continue;
    const bool dst_in = rt.ancestors[static_cast<size_t>(m.dst)][0] == sw;
    const bool src_in = m.src >= 0 && !m.host_staged && rt.p2p_allowed(m.src, m.dst) &&
                        rt.ancestors[static_cast<size_t>(m.src)][0] == sw;
    if (dst_in && !src_in) b += m.bytes;
  }
  return b;
}
double out_of_switch(const policy::CommPlan& p, const policy::RankTopology& rt,
                     const std::string& sw) {
  double b = 0;
  for (const auto& m : p.messages) {
    if (m.control || m.src < 0) continue;
    const bool src_in = rt.ancestors[static_cast<size_t>(m.src)][0] == sw;
    const bool dst_in = m.dst >= 0 && !m.host_staged && rt.p2p_allowed(m.src, m.dst) &&
                        rt.ancestors[static_cast<size_t>(m.dst)][0] == sw;
    if (src_in && !dst_in) b += m.bytes;
  }
  return b;
}
}  // namespace

TEST_CASE("demand_hierarchical never moves more than demand_direct across a switch uplink") {
  const auto pl = contiguous(16, 4);
  SUBCASE("dense, P2P: shared shards cross each uplink once") {
    // Dense, H = 2: every rank needs every other shard (262144 B). Into sw1 directly: shards 0
    // and 1, each to ranks 2 and 3 = 4 * 262144 = 1048576 B; hierarchical: each shard once to a
    // leader = 524288 B.
    TestPattern pat(16, 128, 2, 64, [](int, int, int) { return true; });
    const auto rt = two_switches(true);
    auto d = policy::make_scheme("demand_direct", pat.input(pl, rt), {});
    auto h = policy::make_scheme("demand_hierarchical", pat.input(pl, rt), {});
    REQUIRE(d.ok());
    REQUIRE(h.ok());
    CHECK(into_switch(*d, rt, "sw1") == doctest::Approx(1048576.0));
    CHECK(into_switch(*h, rt, "sw1") == doctest::Approx(524288.0));
    CHECK(into_switch(*h, rt, "sw0") == doctest::Approx(524288.0));
    // Every rank still receives all three remote shards (3 * 262144 B) for its attention.
    for (int g = 0; g < 4; ++g) CHECK(payload_into(*h, g) == doctest::Approx(786432.0));
  }
  SUBCASE("random masks, with and without P2P") {
    for (int seed = 0; seed < 6; ++seed)
      for (bool p2p : {true, false}) {
        TestPattern pat(16, 128, 2, 64, [&](int hh, int q, int k) {
          return rnd(hh + 7 * seed, q, k, 10 + 10 * seed);
        });
        const auto rt = two_switches(p2p);
        auto d = policy::make_scheme("demand_direct", pat.input(pl, rt), {});
        auto h = policy::make_scheme("demand_hierarchical", pat.input(pl, rt), {});
        REQUIRE(d.ok());
        REQUIRE(h.ok());
        for (const char* sw : {"sw0", "sw1"}) {
          CHECK(into_switch(*h, rt, sw) <= into_switch(*d, rt, sw) + 1e-9);
          CHECK(out_of_switch(*h, rt, sw) <= out_of_switch(*d, rt, sw) + 1e-9);
        }
        CHECK(task_flops(*h) == doctest::Approx(task_flops(*d)));
      }
  }
  SUBCASE("no P2P: a shard needed by three ranks is staged to host once") {
    // Dense, no P2P: direct stages shard o (262144 B) once per requester = 786432 B out of o's
    // uplink; hierarchical copies it to host once (262144 B), then three host-to-device reads.
    TestPattern pat(16, 128, 2, 64, [](int, int, int) { return true; });
    const auto rt = two_switches(false);
    auto h = policy::make_scheme("demand_hierarchical", pat.input(pl, rt), {});
    REQUIRE(h.ok());
    double d2h_from0 = 0;
    for (const auto& m : h->messages)
      if (m.src == 0 && m.dst < 0) d2h_from0 += m.bytes;
    CHECK(d2h_from0 == doctest::Approx(262144.0));
    CHECK(h->payload_bytes() == doctest::Approx(4 * 786432.0));  // deliveries as demand_direct
  }
  SUBCASE("two nodes without P2P between them: once over the network per node, no host span") {
    // Ranks 0,1 in node 0, ranks 2,3 in node 1 (each node one switch), P2P only inside a node.
    // Dense, H = 2: owner 0's shard (262144 B) is needed by 2 and 3 in node 1: one network copy
    // 0 -> leader (2, the first of equal requesters), one forward 2 -> 3 inside node 1. Nothing
    // is staged in host memory (a node's host is not reachable from the other node).
    TestPattern pat(16, 128, 2, 64, [](int, int, int) { return true; });
    auto rt = two_switches(true);
    rt.node = {0, 0, 1, 1};
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        if (rt.node[static_cast<size_t>(a)] != rt.node[static_cast<size_t>(b)])
          rt.p2p[static_cast<size_t>(a) * 4 + b] = 0;
    auto h = policy::make_scheme("demand_hierarchical", pat.input(pl, rt), {});
    REQUIRE(h.ok());
    double net_from0 = 0, fwd_2to3 = 0;
    int host_endpoints = 0;
    for (const auto& m : h->messages) {
      if (m.src < 0 || m.dst < 0) ++host_endpoints;
      if (m.src == 0 && m.dst >= 2) net_from0 += m.bytes;
      if (m.src == 2 && m.dst == 3 && m.tag == "fwd") fwd_2to3 += m.bytes;
    }
    CHECK(host_endpoints == 0);
    CHECK(net_from0 == doctest::Approx(262144.0));
    CHECK(fwd_2to3 == doctest::Approx(262144.0 * 2));  // shards 0 and 1, forwarded by rank 2
    // Every rank still receives its three remote shards: 4 ranks * 3 * 262144 B in all.
    CHECK(h->payload_bytes() == doctest::Approx(4 * 786432.0));
  }
}

TEST_CASE("placements") {
  // 10 blocks, the last one a 64-token text-like block: 9 * 128 + 64 = 1216 tokens.
  TestPattern pat(
      10, 128, 1, 64, [](int, int q, int k) { return q - k <= 1 && k - q <= 1; }, 64);
  const auto graph = policy::block_graph(pat);
  const auto rt = policy::RankTopology::flat(2, true);
  policy::PlacementContext ctx{&graph, &rt, 1, {}};
  SUBCASE("contiguous splits tokens at N/2 = 608 by block middles") {
    // Block middles at 64, 192, ..., 1088 (block 8), 1184 (block 9); 608 falls in block 4
    // (512..640, middle 576 < 608) -> blocks 0..4 on rank 0, 5..9 on rank 1.
    auto pl = policy::make_placement("contiguous", ctx);
    REQUIRE(pl.ok());
    CHECK(pl->block_owner == std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  }
  SUBCASE("striped") {
    auto pl = policy::make_placement("striped", ctx);
    REQUIRE(pl.ok());
    CHECK(pl->block_owner == std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  }
  SUBCASE("unknown name") {
    auto pl = policy::make_placement("nope", ctx);
    REQUIRE_FALSE(pl.ok());
    CHECK(pl.error().message == "unknown placement 'nope'");
  }
}

TEST_CASE("balanced and dependency_aware balance tokens on degenerate masks (break-it defect 7)") {
  // 16 equal blocks of 128 tokens on 4 ranks: an even split is 4 blocks (512 tokens) per rank,
  // and kTokenTolerance 1.10 allows at most 563 tokens, i.e. 4 blocks, on any rank.
  const auto rt = policy::RankTopology::flat(4, true);
  auto counts = [](const policy::Placement& pl) {
    std::vector<int> c(4, 0);
    for (int o : pl.block_owner) c[static_cast<size_t>(o)]++;
    return c;
  };
  SUBCASE("an all-zero mask: no attention work, every block used to go to gpu0") {
    TestPattern pat(16, 128, 2, 64, [](int, int, int) { return false; });
    const auto graph = policy::block_graph(pat);
    policy::PlacementContext ctx{&graph, &rt, 2, {}};
    for (const std::string name : {"balanced", "dependency_aware"}) {
      CAPTURE(name);
      auto pl = policy::make_placement(name, ctx);
      REQUIRE(pl.ok());
      CHECK(counts(*pl) == std::vector<int>{4, 4, 4, 4});
    }
  }
  SUBCASE("one dense query row: its work no longer pulls the other blocks onto one GPU") {
    // Block 0 attends to all 16 blocks, every other block to itself only: block 0 holds 16 of
    // the 31 block pairs of work, more than any rank's share (31/4 = 7.75), so attention alone
    // cannot be balanced, and the tokens must be.
    TestPattern pat(16, 128, 2, 64, [](int, int q, int k) { return q == 0 || q == k; });
    const auto graph = policy::block_graph(pat);
    policy::PlacementContext ctx{&graph, &rt, 2, {}};
    for (const std::string name : {"balanced", "dependency_aware"}) {
      CAPTURE(name);
      auto pl = policy::make_placement(name, ctx);
      REQUIRE(pl.ok());
      const auto c = counts(*pl);
      CHECK(*std::max_element(c.begin(), c.end()) <= 4);
      CHECK(*std::min_element(c.begin(), c.end()) >= 1);
    }
  }
}

TEST_CASE("dependency_aware keeps band neighbours together and heavy cuts inside a switch") {
  // 1D band |q - k| <= 1 over 16 equal blocks, 4 ranks in two switches (0, 1 | 2, 3). The band's
  // dependency graph is a path; the balanced 4-way min cut is 4 chunks of 4 consecutive blocks
  // (3 cut edges). The mapping must put consecutive chunks (which share a cut edge) under one
  // switch for 2 of the 3 cuts, so exactly one cut edge crosses switches (the minimum: the
  // halves 0..7 and 8..15 must be on different switches and have one edge between them).
  TestPattern pat(16, 128, 2, 64, [](int, int q, int k) { return q - k <= 1 && k - q <= 1; });
  const auto graph = policy::block_graph(pat);
  const auto rt = two_switches(true);
  policy::PlacementContext ctx{&graph, &rt, 2, {{"tolerance", 1.0}}};
  auto pl = policy::make_placement("dependency_aware", ctx);
  REQUIRE(pl.ok());
  std::vector<int> count(4, 0);
  for (int o : pl->block_owner) count[static_cast<size_t>(o)]++;
  CHECK(count == std::vector<int>{4, 4, 4, 4});
  int rank_cuts = 0, switch_cuts = 0;
  for (int k = 0; k + 1 < 16; ++k) {
    const int a = pl->block_owner[static_cast<size_t>(k)],
              b = pl->block_owner[static_cast<size_t>(k + 1)];
    rank_cuts += a != b;
    switch_cuts += (a / 2) != (b / 2);
  }
  CHECK(rank_cuts == 3);
  CHECK(switch_cuts == 1);
}

TEST_CASE("policy strings") {
  auto p = policy::parse_policy(
      "dependency_aware/demand_direct/ce_decoupled:route=host_staged,chunk_bytes=65536");
  REQUIRE(p.ok());
  CHECK(p->placement == "dependency_aware");
  CHECK(p->scheme == "demand_direct");
  CHECK(p->runtime == "ce_decoupled");
  CHECK(p->params.at("host_staged") == 1.0);
  CHECK(p->params.at("chunk_bytes") == 65536.0);
  CHECK_FALSE(policy::parse_policy("contiguous/ring").ok());
  // Break-it defect 22: each used to be accepted silently.
  auto msg = [](const std::string& text) {
    auto q = policy::parse_policy(text);
    return q.ok() ? std::string("<ok>") : q.error().message;
  };
  CHECK(msg("contiguous/ring/sync:skip_empty=1,skip_empty=0") ==
        "policy 'contiguous/ring/sync:skip_empty=1,skip_empty=0': parameter 'skip_empty' given "
        "twice");
  CHECK(msg("contiguous/ring/sync:skip_empty=2") ==
        "policy 'contiguous/ring/sync:skip_empty=2': policy parameter 'skip_empty' is a switch: "
        "expected 0 or 1, got 2");
  CHECK(msg("contiguous/demand_direct/sync:split_text=0.5").find("expected 0 or 1, got 0.5") !=
        std::string::npos);
  CHECK(msg("contiguous/ring/sync:split_text=0") ==
        "policy 'contiguous/ring/sync:split_text=0': policy parameter 'split_text' does not apply "
        "to scheme 'ring' (it is read by scheme demand_alltoall, demand_direct, "
        "demand_hierarchical)");
  CHECK(msg("contiguous/ring/ce_decoupled:comm_sms=8")
            .find("'comm_sms' does not apply to runtime 'ce_decoupled'") != std::string::npos);
  CHECK(msg("contiguous/ring/sm_overlap:tolerance=1.1")
            .find("'tolerance' does not apply to placement 'contiguous'") != std::string::npos);
  CHECK(msg("balanced/ring/sm_overlap:tolerance=1.1,locality=0.2,comm_sms=8") == "<ok>");
  CHECK(msg("contiguous/demand_direct/sm_overlap:split_text=0,host_staged=1") == "<ok>");
  auto bad = policy::parse_policy("contiguous/warp/sync");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("unknown scheme 'warp'") != std::string::npos);
}

TEST_CASE("demand schemes split the dense text-query rows across ranks") {
  // 16 blocks of 128 tokens, H = 2, the last block is text (dense row and column); video blocks
  // attend to a band |q - k| <= 1. Contiguous over 4 ranks: rank 3 owns 12..15 (text included).
  auto fn = [](int, int q, int k) { return q == 15 || k == 15 || (q - k <= 1 && k - q <= 1); };
  TestPattern pat(16, 128, 2, 64, fn, 0, 1, 1);
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto split = policy::make_scheme("demand_direct", pat.input(pl, rt), {});
  auto whole = policy::make_scheme("demand_direct", pat.input(pl, rt), {{"split_text", 0}});
  REQUIRE(split.ok());
  REQUIRE(whole.ok());
  // Without the split, rank 3's text queries need every block: 12 remote blocks x 65536 B
  // = 786432 B into rank 3.
  CHECK(payload_into(*whole, 3) == doctest::Approx(786432.0));
  // With it, rank 3 needs only block 11 (band of block 12): 65536 B, plus the partial text
  // outputs of ranks 0, 1, 2: 128 tokens x 2 heads x (64 x 2 + 4) B = 33792 B each -> 166912 B.
  CHECK(payload_into(*split, 3) == doctest::Approx(65536.0 + 3 * 33792.0));
  // Ranks 0..2 still fetch the text KV block (dense column) from rank 3.
  for (int g = 0; g < 3; ++g) {
    bool text = false;
    for (const auto& m : split->messages)
      if (m.dst == g && m.src == 3)
        text = std::find(m.kv_blocks.begin(), m.kv_blocks.end(), 15) != m.kv_blocks.end();
    CHECK(text);
  }
  // Work is conserved: the text rows' work moves to the KV owners.
  CHECK(task_flops(*split) == doctest::Approx(task_flops(*whole)));
}
