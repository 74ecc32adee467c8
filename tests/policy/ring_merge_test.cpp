// Issue 14/19: the log-sum-exp merge of each ring step's partial output (ring-flash-attention /
// yunchang update_out_and_lse) as a memory-bound `copy` task after the step's piece, in `ring`
// and in USP's ring part. Expected values are worked by hand in the comments.
#include <doctest/doctest.h>

#include <algorithm>

#include "../../policy/scheme_parts.hpp"  // kRingMergeBytesPerElement (module-private)
#include "policy_test_pattern.hpp"

using namespace sparsp;
using sparsp::testing::contiguous;
using sparsp::testing::index_of;
using sparsp::testing::tasks_tagged;
using sparsp::testing::TestPattern;

TEST_CASE("ring merge: one copy task per ring step, bytes = bytes per element x output elements") {
  // 4 blocks of 128 tokens, 2 heads, head_dim 64, dense, contiguous on P = 2: each rank holds 256
  // query tokens -> 256 x 2 heads x 64 = 32768 output elements per ring step.
  // Default 18.4 B per element (the H200 torch.jit.script merge): 18.4 x 32768 = 602931.2 B.
  TestPattern pat(4, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(4, 2);
  const auto rt = policy::RankTopology::flat(2, true);
  CHECK(policy::detail::kRingMergeBytesPerElement == 18.4);
  auto plan = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  for (int r = 0; r < 2; ++r) {
    const auto merges = tasks_tagged(*plan, "ring_merge", r);
    REQUIRE(merges.size() == 1);  // P - 1 = 1 ring step per rank
    const auto* m = merges[0];
    CHECK(m->what.kind == sim::TaskKind::copy);
    CHECK(m->flops == 0);
    CHECK(m->phase == 1);
    CHECK(m->what.bytes == doctest::Approx(602931.2));
    // After the step's attention piece on the same rank.
    const auto steps = tasks_tagged(*plan, "ring", r);
    REQUIRE(steps.size() == 1);
    CHECK(m->after_tasks == std::vector<int>{index_of(*plan, steps[0])});
  }
  // Time: bytes / memory bandwidth + one launch: 602931.2 B / 1e12 B/s = 0.6029312 us, + 5 us
  // = 5.6029312 us, under every runtime.
  policy::ComputeModel cm;
  cm.memory_bandwidth_Bps = 1e12;
  cm.launch_overhead_s = 5e-6;
  for (const char* runtime : {"sync", "sm_overlap", "ce_decoupled"}) {
    auto w = policy::make_workload(runtime, *plan, rt, cm, {}, 0);
    REQUIRE(w.ok());
    int merges = 0;
    for (const auto& c : w->compute)
      if (c.id.find(".ring_merge.") != std::string::npos) {
        ++merges;
        CHECK(c.what.kind == sim::TaskKind::copy);
        CHECK(c.duration_s == doctest::Approx(5.6029312e-6));
        CHECK(std::any_of(c.after.begin(), c.after.end(), [](const std::string& s) {
          return s.find(".ring.") != std::string::npos;
        }));
      }
    CHECK(merges == 2);
    // The engine: rank 0's step piece is 4 x 256 x 256 x 64 x 2 heads = 33554432 FLOP; the
    // merge follows it, so the makespan is at least their sum (a check that it is counted).
  }

  // The eager merge's figure, 48 B per element: 48 x 32768 = 1572864 B.
  auto eager = policy::make_scheme("ring", pat.input(pl, rt), {{"merge_bytes_per_element", 48}});
  REQUIRE(eager.ok());
  for (const auto* m : tasks_tagged(*eager, "ring_merge")) CHECK(m->what.bytes == 1572864.0);
  // 0 turns the merge off: no copy task at all (the plans of before).
  auto off = policy::make_scheme("ring", pat.input(pl, rt), {{"merge_bytes_per_element", 0}});
  REQUIRE(off.ok());
  CHECK(tasks_tagged(*off, "ring_merge").empty());
  CHECK(off->tasks.size() == plan->tasks.size() - 2);
  // allgather reuses the ring's messages, not its tasks: no merge there.
  auto ag = policy::make_scheme("allgather", pat.input(pl, rt), {});
  REQUIRE(ag.ok());
  CHECK(tasks_tagged(*ag, "ring_merge").empty());
}

TEST_CASE("ring merge: P = 4 gives P - 1 merges per rank, chained in step order") {
  // 8 blocks of 128 tokens, 2 heads x 64, dense, P = 4: each rank 256 tokens x 2 x 64 = 32768
  // elements per step, 3 steps -> 3 merges per rank of 602931.2 B; 12 in all.
  TestPattern pat(8, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(8, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(plan.ok());
  CHECK(tasks_tagged(*plan, "ring_merge").size() == 12);
  for (int r = 0; r < 4; ++r) {
    auto merges = tasks_tagged(*plan, "ring_merge", r);
    REQUIRE(merges.size() == 3);
    std::sort(merges.begin(), merges.end(), [](auto* a, auto* b) { return a->phase < b->phase; });
    for (int s = 0; s < 3; ++s) {
      CHECK(merges[static_cast<size_t>(s)]->phase == s + 1);
      CHECK(merges[static_cast<size_t>(s)]->what.bytes == doctest::Approx(602931.2));
    }
    // Step 2's merge waits for step 1's (one accumulator), step 3's for step 2's.
    for (int s = 1; s < 3; ++s) {
      const auto& after = merges[static_cast<size_t>(s)]->after_tasks;
      CHECK(std::find(after.begin(), after.end(),
                      index_of(*plan, merges[static_cast<size_t>(s) - 1])) != after.end());
    }
  }
}

TEST_CASE("ring merge: skip_empty steps that compute nothing merge nothing") {
  // Block-diagonal mask: every query block reads only itself, so no rank needs another's KV.
  // With skip_empty=1 no shard moves and no piece runs: no merge. Without it the ring still
  // sends (P - 1 hops) but zero-FLOP pieces are not tasks, so again no merge.
  TestPattern pat(4, 128, 2, 64, [](int, int q, int k) { return q == k; });
  const auto pl = contiguous(4, 2);
  const auto rt = policy::RankTopology::flat(2, true);
  auto skip = policy::make_scheme("ring", pat.input(pl, rt), {{"skip_empty", 1}});
  REQUIRE(skip.ok());
  CHECK(tasks_tagged(*skip, "ring_merge").empty());
  auto full = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(full.ok());
  CHECK(tasks_tagged(*full, "ring_merge").empty());
}

TEST_CASE("usp merge: the ring part merges the sequence group's tokens x H / u heads") {
  // H = 4, P = 4, u = 2 -> ring degree 2. 8 blocks of 128 tokens, contiguous: 256 tokens per
  // rank, 512 per sequence group. Rank (j, i) holds group j's 512 tokens x 4 / 2 = 2 heads x 64
  // = 65536 output elements; one ring step (r - 1 = 1) -> one merge of 18.4 x 65536 =
  // 1205862.4 B per rank, 4 in all. The output transpose (a2a_pre_out) waits for the merge.
  TestPattern pat(8, 128, 4, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(8, 4);
  const auto rt = policy::RankTopology::flat(4, true);
  auto plan = policy::make_scheme("usp", pat.input(pl, rt), {{"ulysses_degree", 2}});
  REQUIRE(plan.ok());
  CHECK(tasks_tagged(*plan, "ring_merge").size() == 4);
  for (int x = 0; x < 4; ++x) {
    const auto merges = tasks_tagged(*plan, "ring_merge", x);
    REQUIRE(merges.size() == 1);
    CHECK(merges[0]->what.bytes == doctest::Approx(1205862.4));
    const auto pre_out = tasks_tagged(*plan, "a2a_pre_out", x);
    REQUIRE(pre_out.size() == 1);
    const auto& after = pre_out[0]->after_tasks;
    CHECK(std::find(after.begin(), after.end(), index_of(*plan, merges[0])) != after.end());
  }
  // Plain Ulysses (ring degree 1) has no ring step, so no merge.
  auto uly = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE(uly.ok());
  CHECK(tasks_tagged(*uly, "ring_merge").empty());
}

TEST_CASE("merge_bytes_per_element: range and readers") {
  CHECK(policy::parse_policy("contiguous/ring/sync:merge_bytes_per_element=48").ok());
  CHECK(policy::parse_policy("contiguous/usp/sync:merge_bytes_per_element=0").ok());
  auto neg = policy::parse_policy("contiguous/ring/sync:merge_bytes_per_element=-1");
  REQUIRE(!neg.ok());
  CHECK(neg.error().message.find("must be in [0, 10000]") != std::string::npos);
  auto big = policy::parse_policy("contiguous/ring/sync:merge_bytes_per_element=1e5");
  CHECK(!big.ok());
  auto other = policy::parse_policy("balanced/demand_direct/sync:merge_bytes_per_element=18");
  REQUIRE(!other.ok());
  CHECK(other.error().message.find("read by scheme ring, usp") != std::string::npos);
}
