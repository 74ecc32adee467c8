// Issue 19: the copies xDiT/yunchang run around attention that the schemes leave out by default,
// behind policy parameters: `ring:seq_a2a_copies=1` (yunchang all_to_all_4D's layout copies at
// Ulysses degree 1) and `out_cast_bytes_per_element` (the float32 accumulator's casts; ring, usp,
// ulysses). Expected values are worked by hand in the comments.
#include <doctest/doctest.h>

#include <algorithm>

#include "policy_test_pattern.hpp"

using namespace sparsp;
using sparsp::testing::contiguous;
using sparsp::testing::index_of;
using sparsp::testing::tasks_tagged;
using sparsp::testing::TestPattern;

namespace {
bool waits_for(const policy::AttentionTask& t, int i) {
  return std::find(t.after_tasks.begin(), t.after_tasks.end(), i) != t.after_tasks.end();
}
}  // namespace

TEST_CASE("ring seq_a2a_copies: output copies at any batch, q/k/v copies at CFG batch2 only") {
  // 4 blocks of 128 tokens, 2 heads x 64, bf16, dense, contiguous on P = 2: 256 tokens per rank;
  // one token of one head is 64 x 2 = 128 B.
  // Output path: 2 copies x (read + written) x 256 tokens x 2 heads x 128 B = 262144 B.
  // q/k/v path at batch2: 2 copies x 2 x 256 x (2 + 2 x 2 heads) x 128 B = 786432 B.
  TestPattern pat(4, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(4, 2);
  const auto rt = policy::RankTopology::flat(2, true);

  // Default: none of these tasks (the plans of before).
  auto off = policy::make_scheme("ring", pat.input(pl, rt), {});
  REQUIRE(off.ok());
  CHECK(tasks_tagged(*off, "seq_a2a_qkv").empty());
  CHECK(tasks_tagged(*off, "seq_a2a_out").empty());
  CHECK(tasks_tagged(*off, "out_cast").empty());

  // Batch 1 (no CFG given): transpose(0, 2) swaps the batch with the size-1 degree dimension, a
  // view; only the output path copies.
  auto b1 = policy::make_scheme("ring", pat.input(pl, rt), {{"seq_a2a_copies", 1}});
  REQUIRE(b1.ok());
  CHECK(tasks_tagged(*b1, "seq_a2a_qkv").empty());
  for (int r = 0; r < 2; ++r) {
    const auto out = tasks_tagged(*b1, "seq_a2a_out", r);
    REQUIRE(out.size() == 1);
    CHECK(out[0]->what.kind == sim::TaskKind::copy);
    CHECK(out[0]->what.bytes == 262144.0);
    CHECK(out[0]->phase == 2);  // after the P - 1 = 1 ring step
    // After every other task of the rank: its local piece, its ring piece and the merge.
    for (const char* t : {"local", "ring", "ring_merge"}) {
      const auto v = tasks_tagged(*b1, t, r);
      REQUIRE(v.size() == 1);
      CHECK(waits_for(*out[0], index_of(*b1, v[0])));
    }
  }

  pat.set_cfg("batch2");
  auto b2 = policy::make_scheme("ring", pat.input(pl, rt), {{"seq_a2a_copies", 1}});
  REQUIRE(b2.ok());
  for (int r = 0; r < 2; ++r) {
    const auto qkv = tasks_tagged(*b2, "seq_a2a_qkv", r);
    REQUIRE(qkv.size() == 1);
    CHECK(qkv[0]->what.kind == sim::TaskKind::copy);
    CHECK(qkv[0]->what.bytes == 786432.0);
    CHECK(qkv[0]->phase == -1);  // ahead of step 0: the runtimes' stream order holds the send
    const int qi = index_of(*b2, qkv[0]);
    for (const char* t : {"local", "ring"}) {  // both pieces read the copied q
      const auto v = tasks_tagged(*b2, t, r);
      REQUIRE(v.size() == 1);
      CHECK(waits_for(*v[0], qi));
    }
    CHECK(tasks_tagged(*b2, "seq_a2a_out", r).size() == 1);
  }
  // Grouped-query attention: kv_heads 1 -> 2 x 2 x 256 x (2 + 2 x 1) x 128 = 524288 B.
  pat.set_kv_heads(1);
  auto gqa = policy::make_scheme("ring", pat.input(pl, rt), {{"seq_a2a_copies", 1}});
  REQUIRE(gqa.ok());
  CHECK(tasks_tagged(*gqa, "seq_a2a_qkv", 0)[0]->what.bytes == 524288.0);

  // Times (ComputeModel::copy_time_s): 786432 B / 1e12 B/s = 0.786432 us + 5 us launch; the
  // runtime "sync" makes the step-1 send wait for the phase -1 copy.
  policy::ComputeModel cm;
  cm.memory_bandwidth_Bps = 1e12;
  cm.launch_overhead_s = 5e-6;
  auto w = policy::make_workload("sync", *b2, rt, cm, {}, 0);
  REQUIRE(w.ok());
  int copies = 0;
  for (const auto& c : w->compute)
    if (c.id.find(".seq_a2a_qkv.") != std::string::npos) {
      ++copies;
      CHECK(c.duration_s == doctest::Approx(5.786432e-6));
    }
  CHECK(copies == 2);
  for (const auto& t : w->transfers)
    if (t.id.find(".ring.") != std::string::npos)
      CHECK(std::any_of(t.after.begin(), t.after.end(), [](const std::string& s) {
        return s.find(".seq_a2a_qkv.") != std::string::npos;
      }));
}

TEST_CASE("out_cast_bytes_per_element: one cast per rank over its output elements") {
  // 12 B per element = 2 x (2 B bf16 + 4 B float32): block_out.to(float32) and out.to(bf16).
  // ring, P = 2 (4 blocks of 128, 2 heads x 64): 256 tokens x 2 heads x 64 = 32768 elements
  // -> 393216 B, after the merge, before the output copy.
  TestPattern pat(4, 128, 2, 64, [](int, int, int) { return true; });
  const auto pl = contiguous(4, 2);
  const auto rt = policy::RankTopology::flat(2, true);
  auto ring = policy::make_scheme("ring", pat.input(pl, rt),
                                  {{"out_cast_bytes_per_element", 12}, {"seq_a2a_copies", 1}});
  REQUIRE(ring.ok());
  for (int r = 0; r < 2; ++r) {
    const auto cast = tasks_tagged(*ring, "out_cast", r);
    REQUIRE(cast.size() == 1);
    CHECK(cast[0]->what.kind == sim::TaskKind::copy);
    CHECK(cast[0]->what.bytes == 393216.0);
    CHECK(waits_for(*cast[0], index_of(*ring, tasks_tagged(*ring, "ring_merge", r)[0])));
    const auto out = tasks_tagged(*ring, "seq_a2a_out", r);
    REQUIRE(out.size() == 1);
    CHECK(out[0]->after_tasks == std::vector<int>{index_of(*ring, cast[0])});
  }
  // ulysses, P = 2 (u = 2, ring degree 1): rank i holds all 512 tokens of head i: 512 x 1 x 64 =
  // 32768 elements -> 393216 B, after the attention, before the output transpose.
  auto uly =
      policy::make_scheme("ulysses", pat.input(pl, rt), {{"out_cast_bytes_per_element", 12}});
  REQUIRE(uly.ok());
  for (int r = 0; r < 2; ++r) {
    const auto cast = tasks_tagged(*uly, "out_cast", r);
    REQUIRE(cast.size() == 1);
    CHECK(cast[0]->what.bytes == 393216.0);
    CHECK(waits_for(*cast[0], index_of(*uly, tasks_tagged(*uly, "a2a", r)[0])));
    const auto pre_out = tasks_tagged(*uly, "a2a_pre_out", r);
    REQUIRE(pre_out.size() == 1);
    CHECK(pre_out[0]->after_tasks == std::vector<int>{index_of(*uly, cast[0])});
  }
  auto uly_off = policy::make_scheme("ulysses", pat.input(pl, rt), {});
  REQUIRE(uly_off.ok());
  CHECK(tasks_tagged(*uly_off, "out_cast").empty());
  CHECK(uly_off->tasks.size() == uly->tasks.size() - 2);

  // usp, P = 4, u = 2 (8 blocks of 128, 4 heads x 64): rank (j, i) holds sequence group j's 512
  // tokens x 2 heads x 64 = 65536 elements -> 786432 B, after its ring merge.
  TestPattern p4(8, 128, 4, 64, [](int, int, int) { return true; });
  const auto pl4 = contiguous(8, 4);
  const auto rt4 = policy::RankTopology::flat(4, true);
  auto usp = policy::make_scheme("usp", p4.input(pl4, rt4),
                                 {{"ulysses_degree", 2}, {"out_cast_bytes_per_element", 12}});
  REQUIRE(usp.ok());
  for (int x = 0; x < 4; ++x) {
    const auto cast = tasks_tagged(*usp, "out_cast", x);
    REQUIRE(cast.size() == 1);
    CHECK(cast[0]->what.bytes == 786432.0);
    CHECK(waits_for(*cast[0], index_of(*usp, tasks_tagged(*usp, "ring_merge", x)[0])));
  }
}

TEST_CASE("seq_a2a_copies and out_cast_bytes_per_element: range and readers") {
  CHECK(policy::parse_policy("contiguous/ring/sync:seq_a2a_copies=1").ok());
  CHECK(policy::parse_policy("head_parallel/ulysses/sync:out_cast_bytes_per_element=12").ok());
  CHECK(policy::parse_policy("contiguous/usp/sync:out_cast_bytes_per_element=0").ok());
  auto two = policy::parse_policy("contiguous/ring/sync:seq_a2a_copies=2");
  REQUIRE(!two.ok());
  CHECK(two.error().message.find("is a switch") != std::string::npos);
  auto usp = policy::parse_policy("contiguous/usp/sync:seq_a2a_copies=1");
  REQUIRE(!usp.ok());
  CHECK(usp.error().message.find("read by scheme ring") != std::string::npos);
  auto big = policy::parse_policy("contiguous/ring/sync:out_cast_bytes_per_element=101");
  REQUIRE(!big.ok());
  CHECK(big.error().message.find("must be in [0, 100]") != std::string::npos);
  auto ag = policy::parse_policy("contiguous/allgather/sync:out_cast_bytes_per_element=12");
  REQUIRE(!ag.ok());
  CHECK(ag.error().message.find("read by scheme ring, usp, ulysses") != std::string::npos);
}
