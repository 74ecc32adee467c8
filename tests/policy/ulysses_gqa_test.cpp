// Issue 19 items 2-3 and issue 15 item 1: grouped-query attention in the Ulysses all-to-all, the
// copy tasks around it (kind copy, timed by memory bandwidth), compute kinds in plans, and the
// zigzag placement. Expected values are worked by hand in the comments.
#include <doctest/doctest.h>

#include <algorithm>

#include "../../policy/scheme_parts.hpp"  // ulysses_kv_heads (module-private)
#include "policy_test_pattern.hpp"

using namespace sparsp;
using sparsp::testing::contiguous;
using sparsp::testing::TestPattern;

namespace {
const policy::AttentionTask* find_task(const policy::CommPlan& p, const std::string& tag,
                                       int rank) {
  for (const auto& t : p.tasks)
    if (t.tag == tag && t.rank == rank) return &t;
  return nullptr;
}
int count_kind(const policy::CommPlan& p, sim::TaskKind k) {
  return static_cast<int>(std::count_if(p.tasks.begin(), p.tasks.end(),
                                        [&](const auto& t) { return t.what.kind == k; }));
}
}  // namespace

TEST_CASE("ulysses with grouped-query attention: K and V volumes scale by kv_heads / heads") {
  // H = 4, P = u = 2, N = 16 x 128 = 2048 tokens, 1024 per rank, head_dim 64 x 2 B = 128 B per
  // token and head. Per ordered pair in: 1024 tokens x (2 Q heads + 2 x kv heads per group) x
  // 128 B; out: 1024 x 2 x 128 = 262144 B; 2 ordered pairs.
  //   kv_heads 4 (MHA): in 1024 x (2 + 4) x 128 = 786432 -> (786432 + 262144) x 2 = 2097152 B.
  //   kv_heads 2 (GQA): in 1024 x (2 + 2) x 128 = 524288 -> (524288 + 262144) x 2 = 1572864 B.
  TestPattern pat(16, 128, 4, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(16, 2);
  const auto rt = policy::RankTopology::flat(2, true);
  auto mha = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE(mha.ok());
  CHECK(mha->payload_bytes() == doctest::Approx(2097152.0));
  pat.set_kv_heads(2);
  // CFG batch2, where all four copies are real (at batch 1 the post_qkv one is a view:
  // xdit_copies_test.cpp).
  pat.set_cfg("batch2");
  auto gqa = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE(gqa.ok());
  CHECK(gqa->payload_bytes() == doctest::Approx(1572864.0));
  // Copy tasks of rank 0 (bytes read + written = 2 x tensor bytes):
  //   pre_qkv:  2 x 1024 tokens x (4 + 2 x 2) heads x 128 B = 2097152
  //   post_qkv: 2 x 2048 tokens x (2 + 2 x 1) heads x 128 B = 2097152
  //   pre_out:  2 x 2048 x 2 x 128 = 1048576;  post_out: 2 x 1024 x 4 x 128 = 1048576
  const auto* pre = find_task(*gqa, "a2a_pre_qkv", 0);
  const auto* post = find_task(*gqa, "a2a_post_qkv", 0);
  const auto* pre_out = find_task(*gqa, "a2a_pre_out", 0);
  const auto* post_out = find_task(*gqa, "a2a_post_out", 0);
  REQUIRE(pre);
  REQUIRE(post);
  REQUIRE(pre_out);
  REQUIRE(post_out);
  CHECK(pre->what.kind == sim::TaskKind::copy);
  CHECK(pre->what.bytes == 2097152.0);
  CHECK(post->what.bytes == 2097152.0);
  CHECK(pre_out->what.bytes == 1048576.0);
  CHECK(post_out->what.bytes == 1048576.0);
  CHECK(count_kind(*gqa, sim::TaskKind::copy) == 8);  // 4 per rank
  // Attention of rank 1: queries and KV of the whole Ulysses group {0, 1}, heads [2, 4).
  const auto* att = find_task(*gqa, "a2a", 1);
  REQUIRE(att);
  CHECK(att->what.kind == sim::TaskKind::attention);
  CHECK(att->what.q_ranks == std::vector<int>{0, 1});
  CHECK(att->what.kv_ranks == std::vector<int>{0, 1});
  CHECK(att->what.head_begin == 2);
  CHECK(att->what.head_end == 4);

  // The workload: a transpose's time = bytes / (memory bandwidth x 0.32, the measured transpose
  // fraction) + launch overhead. 4.8 TB/s (H200 datasheet), 5 us: 2097152 / (4.8e12 x 0.32 =
  // 1.536e12) = 1.365333333 us -> 6.365333333 us.
  policy::ComputeModel cm;
  cm.memory_bandwidth_Bps = 4.8e12;
  cm.launch_overhead_s = 5e-6;
  for (const char* runtime : {"sync", "sm_overlap", "ce_decoupled"}) {
    auto w = policy::make_workload(runtime, *gqa, rt, cm, {}, 0);
    REQUIRE(w.ok());
    const sim::ComputeTask* c = nullptr;
    const sim::ComputeTask* a = nullptr;
    for (const auto& t : w->compute) {
      if (t.id.find(".a2a_pre_qkv.0") != std::string::npos) c = &t;
      if (t.id.find(".a2a.1") != std::string::npos) a = &t;
    }
    REQUIRE(c);
    REQUIRE(a);
    CHECK(c->what.kind == sim::TaskKind::copy);
    CHECK(c->what.copy_kind == sim::CopyKind::transpose);
    CHECK(c->duration_s == doctest::Approx(6.365333333e-6));
    // Every QKV all-to-all message leaving rank 0 waits for rank 0's transpose; rank 1's
    // attention waits for its post-all-to-all transpose.
    for (const auto& t : w->transfers)
      if (t.id.find("a2a_qkv.0-") != std::string::npos)
        CHECK(std::find(t.after.begin(), t.after.end(), c->id) != t.after.end());
    CHECK(std::any_of(a->after.begin(), a->after.end(), [](const std::string& s) {
      return s.find("a2a_post_qkv.1") != std::string::npos;
    }));
  }
}

TEST_CASE("ulysses: kv_heads below the degree replicate, neither dividing is an error") {
  // H = 4, kv_heads 2, P = u = 4: 2 < 4 divides 4, so each K/V head is replicated twice and
  // each rank receives one: the volume is the MHA one, 3145728 B (policy_volume_test).
  TestPattern pat(16, 128, 4, 64, [](int, int, int) { return true; });
  pat.set_kv_heads(2);
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  CHECK(plan->payload_bytes() == doctest::Approx(3145728.0));
  CHECK(policy::detail::ulysses_kv_heads(12, 3, 4) == -1);
  CHECK(policy::detail::ulysses_kv_heads(8, 2, 4) == 4);
  CHECK(policy::detail::ulysses_kv_heads(8, 8, 4) == 8);
  // H = 12, kv_heads 3, u = 4: 3 and 4 do not divide one another.
  TestPattern bad(16, 128, 12, 64, [](int, int, int) { return true; });
  bad.set_kv_heads(3);
  auto e = policy::make_scheme("ulysses", bad.input(pl, rt), {});
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("kv_heads (3)") != std::string::npos);
}

TEST_CASE("every scheme's attention tasks name the KV they read") {
  TestPattern pat(16, 128, 4, 64, [](int, int q, int k) { return k <= q; });
  const auto pl = contiguous(16, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  for (const char* scheme : {"ring", "allgather", "ulysses", "usp", "demand_alltoall",
                             "demand_direct", "demand_hierarchical"}) {
    CAPTURE(scheme);
    auto plan = policy::make_scheme(scheme, pat.input(pl, rt), {{"ulysses_degree", 2}});
    REQUIRE(plan.ok());
    REQUIRE(!plan->tasks.empty());
    for (const auto& t : plan->tasks)
      if (t.what.kind == sim::TaskKind::attention) CHECK(!t.what.kv_ranks.empty());
  }
  // Ring step tasks read one owner's shard and are partial outputs (merged with the local piece).
  auto ring = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(ring.ok());
  policy::ComputeModel cm;
  auto w = policy::make_workload("sync", *ring, rt, cm, {}, 0);
  REQUIRE(w.ok());
  // Causal, contiguous: rank 0 reads only its own KV (one piece, not partial); rank 3 computes
  // its local piece and the shards of ranks 0, 1, 2 (four pieces, all partial), and merges each
  // ring step's piece (3 copy tasks; ring_merge_test.cpp has their bytes).
  int pieces0 = 0, pieces3 = 0, merges3 = 0;
  for (const auto& c : w->compute) {
    if (c.what.kind == sim::TaskKind::copy) {
      CHECK(c.id.find(".ring_merge.") != std::string::npos);
      CHECK(c.gpu != "gpu0");
      if (c.gpu == "gpu3") ++merges3;
      continue;
    }
    CHECK(c.what.kind == sim::TaskKind::attention);
    if (c.gpu == "gpu0") {
      ++pieces0;
      CHECK_FALSE(c.what.partial);
    }
    if (c.gpu == "gpu3") {
      ++pieces3;
      CHECK(c.what.partial);
    }
  }
  CHECK(pieces0 == 1);
  CHECK(pieces3 == 4);
  CHECK(merges3 == 3);
}

TEST_CASE("zigzag: rank r holds chunks r and 2P-1-r") {
  // P = 4, 16 blocks: 8 chunks of 2 blocks; chunk c on rank c (c < 4) or 7 - c.
  policy::BlockGraph g;
  g.num_blocks = 16;
  const auto rt = policy::RankTopology::flat(4, true);
  policy::PlacementContext ctx;
  ctx.graph = &g;
  ctx.ranks = &rt;
  auto pl = policy::make_placement("zigzag", ctx);
  REQUIRE(pl.ok());
  CHECK(pl->block_owner == std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3, 3, 3, 2, 2, 1, 1, 0, 0});
  // 10 blocks on P = 2 (4 chunks): chunk c = blocks [floor(10c/4), floor(10(c+1)/4)) =
  // [0,2) [2,5) [5,7) [7,10) on ranks 0, 1, 1, 0.
  g.num_blocks = 10;
  const auto rt2 = policy::RankTopology::flat(2, true);
  ctx.ranks = &rt2;
  pl = policy::make_placement("zigzag", ctx);
  REQUIRE(pl.ok());
  CHECK(pl->block_owner == std::vector<int>{0, 0, 1, 1, 1, 1, 1, 0, 0, 0});
  // 7 blocks cannot give 8 non-empty chunks.
  g.num_blocks = 7;
  ctx.ranks = &rt;
  pl = policy::make_placement("zigzag", ctx);
  REQUIRE_FALSE(pl.ok());
  CHECK(pl.error().message.find("7 blocks cannot be cut into 2 x 4 = 8") != std::string::npos);
}

TEST_CASE(
    "grouped-query attention shrinks ring and demand-directed KV volumes by kv_heads / heads") {
  // 16 blocks x 128 tokens, H = 4 heads, head_dim 64, 2 B: one KV block over all 4 heads is
  // 2 x 128 x 4 x 64 x 2 = 131072 B; over kv_heads = 2 it is 65536 B.
  // Ring over P = 2 ranks of 8 blocks each: each rank forwards its shard once (P - 1 = 1 step):
  //   MHA 2 x 8 x 131072 = 2097152 B; GQA half of it, 1048576 B.
  TestPattern pat(16, 128, 4, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(16, 2);
  const auto rt = policy::RankTopology::flat(2, true);
  auto ring_mha = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(ring_mha.ok());
  CHECK(ring_mha->payload_bytes() == doctest::Approx(2097152.0));
  pat.set_kv_heads(2);
  auto ring_gqa = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(ring_gqa.ok());
  CHECK(ring_gqa->payload_bytes() == doctest::Approx(1048576.0));
}

TEST_CASE("grouped-query attention, per-head demand: a KV head is sent once for its query heads") {
  // 4 blocks x 128 tokens over 2 ranks (blocks 0-1 on rank 0, 2-3 on rank 1); H = 4 query heads,
  // kv_heads = 2 (heads {0,1} read KV head 0, {2,3} KV head 1); head_dim 64, 2 B: one block of
  // one KV head is 2 x 128 x 64 x 2 = 32768 B.
  // Query block 0 (rank 0) needs KV block 2 in heads 0 and 1 only, block 3 in head 2 only:
  //   KV head 0 needs block 2 (once, though two query heads read it); KV head 1 needs block 3.
  //   -> rank 1 sends rank 0 2 x 32768 = 65536 B (MHA, per query head: 3 x 32768 = 98304 B).
  auto need = [](int h, int q, int k) {
    if (q == k || (q / 2 == k / 2)) return true;  // own blocks
    if (q == 0 && k == 2) return h <= 1;
    if (q == 0 && k == 3) return h == 2;
    return false;
  };
  TestPattern pat(4, 128, 4, 64, need);
  const auto pl = contiguous(4, 2);
  const auto rt = policy::RankTopology::flat(2, true);
  auto mha =
      policy::make_scheme("demand_direct", pat.input(pl, rt, policy::Granularity::head_block), {});
  REQUIRE(mha.ok());
  CHECK(mha->payload_bytes() == doctest::Approx(98304.0));
  pat.set_kv_heads(2);
  auto gqa =
      policy::make_scheme("demand_direct", pat.input(pl, rt, policy::Granularity::head_block), {});
  REQUIRE(gqa.ok());
  CHECK(gqa->payload_bytes() == doctest::Approx(65536.0));
}
