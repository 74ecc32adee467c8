// run_study on real presets: every scheme and runtime simulates, never below its lower bound;
// identical (step, layer) workloads are simulated once; dynamic patterns are streamed with their
// discovery traffic.
#include <doctest/doctest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <string>

#include "sparsp/plan.hpp"
#include "sparsp/study.hpp"

using namespace sparsp;

namespace {
study::Study base(const char* model, const char* kind, int gpus) {
  study::Study s;
  s.topologies = {"8x-l40s-gen4-4switch"};
  s.model = model;
  s.pattern.kind = kind;
  s.num_gpus = gpus;
  return s;
}
// One step and one layer of `base` (the left-out cases need no more).
study::Study one_unit(const char* model, const char* kind, int gpus) {
  study::Study s = base(model, kind, gpus);
  s.steps = {0};
  s.layers = {0};
  return s;
}
void add(study::Study& s, const char* text) {
  auto p = policy::parse_policy(text);
  REQUIRE(p.ok());
  s.policies.push_back(*p);
  s.policy_places.push_back(text);
}
}  // namespace

TEST_CASE("every scheme x runtime runs on STA, static patterns are simulated once") {
  auto s = base("hunyuanvideo-sta", "sta", 4);
  s.pattern.block_tokens = 384;
  s.pattern.tile = {6, 8, 8};
  s.pattern.window = {3, 3, 3};
  for (const char* scheme : {"ring", "allgather", "ulysses", "usp", "demand_alltoall",
                             "demand_direct", "demand_hierarchical"})
    for (const char* rt : {"sync", "sm_overlap", "ce_decoupled"})
      add(s, ((std::string(scheme) == "ulysses" ? "head_parallel/" : "contiguous/") +
              std::string(scheme) + "/" + rt)
                 .c_str());
  add(s, "dependency_aware/demand_direct/ce_decoupled");
  add(s, "balanced/demand_direct/ce_decoupled");
  add(s, "striped/demand_direct/sync:route=host_staged");
  auto r = study::run_study(s);
  REQUIRE(r.ok());
  REQUIRE(r->policies.size() == s.policies.size());
  for (const auto& p : r->policies) {
    CAPTURE(p.policy.name());
    // 50 steps x 60 layers, one distinct (static) workload.
    CHECK(p.units == 3000);
    CHECK(p.simulated == 1);
    CHECK(p.attention_time_s > 0);
    CHECK(p.attention_time_s >= p.lower_bound_s * (1 - 1e-9));
    CHECK(p.denoise_time_s == doctest::Approx(50 * p.step_time_s));
    // + the preset's stages (hyvae14), the same for every policy on the L40S (362.05 TFLOP/s):
    // VAE 9.66022e14 / (362.05e12 x 0.1231) = 21.6751 s, text 4.97738e12 / (362.05e12 x 0.7)
    // = 0.019640 s (gemm efficiency 0.7) -> 21.6947 s.
    CHECK(p.e2e_time_s - p.denoise_time_s == doctest::Approx(21.6947).epsilon(1e-5));
    CHECK(p.control_bytes == (p.policy.scheme == "demand_alltoall" ? p.control_bytes : 0.0));
  }
  // Runtimes do not change what moves.
  CHECK(r->policies[0].volume_bytes == r->policies[1].volume_bytes);
  CHECK(r->policies[0].volume_bytes == r->policies[2].volume_bytes);
  // sync never beats the overlapping runtimes of the same ring (same transfers, no overlap).
  CHECK(r->policies[0].attention_time_s >= r->policies[2].attention_time_s);
}

TEST_CASE("dynamic top-k: every (step, layer) simulated, discovery traffic reported") {
  auto s = base("wan2.1-1.3b-480p", "topk", 4);
  s.pattern.block_tokens = 128;
  s.pattern.density = 0.1;
  s.steps = {0, 1};
  s.layers = {0, 1};
  add(s, "contiguous/demand_direct/ce_decoupled");
  add(s, "contiguous/ring/sm_overlap");
  auto r = study::run_study(s);
  REQUIRE(r.ok());
  CHECK(r->dynamic);
  for (const auto& p : r->policies) {
    CHECK(p.units == 4);
    CHECK(p.simulated == 4);
  }
  // Pooled-K summaries: every owner sends its blocks' summaries (blocks x 12 heads x 128 x 2 B)
  // to the 3 other ranks: 3 * all blocks * 3072 B per layer, plus 4-byte indices.
  // Wan2.1-1.3B 480p: 21 * 30 * 52 = 32760 tokens -> 256 blocks of 128 (last one 120 tokens).
  // Summaries per layer: 3 * 256 * 3072 = 2359296 B; per step x 30 layers = 70778880 B.
  const double summaries = 3.0 * 256 * 3072 * 30;
  CHECK(r->policies[0].control_bytes > summaries);
  CHECK(r->policies[0].control_bytes < summaries * 1.1);
  CHECK(r->policies[1].control_bytes == 0.0);
}

TEST_CASE("a dynamic study gives the same figures, plans and trace on 1 and 4 threads") {
  // Units of a step are generated and simulated in parallel (oneTBB) and added in unit order,
  // so every figure is the same bit for bit whatever the thread count.
  auto s = base("wan2.1-1.3b-480p", "topk", 4);
  s.pattern.block_tokens = 128;
  s.pattern.density = 0.1;
  s.pattern.seed = 7;
  s.steps = {0, 1, 2};
  s.layers = {0, 1, 2, 3, 4, 5};
  add(s, "contiguous/demand_direct/ce_decoupled");
  add(s, "dependency_aware/demand_direct/sync");
  study::RunOptions opt;
  opt.keep_plans = true;
  opt.keep_trace = true;
  auto run_on = [&](size_t threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    auto r = study::run_study(s, opt);
    REQUIRE(r.ok());
    return std::move(*r);
  };
  const auto one = run_on(1), four = run_on(4);
  REQUIRE(one.policies.size() == 2);
  REQUIRE(four.policies.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto &a = one.policies[i], &b = four.policies[i];
    CHECK(a.simulated == 18);  // 3 steps x 6 layers, all distinct
    CHECK(a.attention_time_s == b.attention_time_s);
    CHECK(a.volume_bytes == b.volume_bytes);
    CHECK(a.control_bytes == b.control_bytes);
    CHECK(a.lower_bound_s == b.lower_bound_s);
    CHECK(a.e2e_time_s == b.e2e_time_s);
    CHECK(a.busiest_link == b.busiest_link);
    CHECK(!a.trace_json.empty());
    CHECK(a.trace_json == b.trace_json);
    REQUIRE(a.plan);
    REQUIRE(b.plan);
    CHECK(a.plan->layers.size() == 18);
    CHECK(policy::to_json(*a.plan) == policy::to_json(*b.plan));
  }
}

TEST_CASE("study errors") {
  auto s = base("hunyuanvideo-sta", "sta", 4);
  s.pattern.block_tokens = 384;
  add(s, "contiguous/ring/sync");
  SUBCASE("unknown topology preset") {
    s.topologies = {"9x-imaginary"};
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    CHECK(r.error().message.find("<study>:/topology: ") == 0);
  }
  SUBCASE("more GPUs asked for than the topology has: the count, not 'GPU 8 is not in'") {
    s.num_gpus = 9;
    s.gpus.clear();
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("<study>:/gpus: asks for 9 GPUs, but topology '") == 0);
  }
  SUBCASE("the place of a bad entry of topologies is its index") {
    s.topologies = {s.topologies[0], "no-such-preset"};
    s.topologies_key = "topologies";
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("<study>:/topologies/1: no-such-preset: no such preset") == 0);
  }
  SUBCASE("GPU not in the topology") {
    s.num_gpus = 0;
    s.gpus = {0, 8};
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    // At its place in the list (issue 18 leftover: was /gpus).
    CHECK(r.error().message.find("<study>:/gpus/1: GPU 8 is not in topology") == 0);
  }
  SUBCASE("step outside the pattern") {
    s.steps = {50};
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "<study>:/steps: step 50 outside the pattern's 50 steps");
  }
}

TEST_CASE("a policy that cannot run on the rank count is left out with its reason, not fatal") {
  // Wan2.1-14B has 40 heads. On 6 ranks: Ulysses needs 40 % 6 == 0 (no: 40 = 6 * 6 + 4), so it is
  // left out; USP's default degree is 6/2 = 3 -> 40 % 3 != 0 -> 2 (divides 6 and 40), so it runs.
  auto s = one_unit("wan2.1-14b-720p", "sta", 6);
  add(s, "contiguous/ring/sm_overlap");
  add(s, "head_parallel/ulysses/sync");
  add(s, "contiguous/usp/sm_overlap");
  add(s, "contiguous/usp/sm_overlap:ulysses_degree=4");  // 6 % 4 != 0
  auto r = study::run_study(s);
  REQUIRE(r.ok());
  REQUIRE(r->policies.size() == 2);
  CHECK(r->policies[0].policy.scheme == "ring");
  CHECK(r->policies[1].policy.name() == "contiguous/usp/sm_overlap");
  CHECK(r->policies[1].policy.params.empty());
  REQUIRE(r->skipped.size() == 2);
  CHECK(r->skipped[0].topology == "8x-l40s-gen4-4switch");
  CHECK(r->skipped[0].policy == "head_parallel/ulysses/sync");
  CHECK(r->skipped[0].reason == "heads (40) not divisible by the Ulysses degree 6");
  CHECK(r->skipped[1].policy == "contiguous/usp/sm_overlap:ulysses_degree=4");
  CHECK(r->skipped[1].reason == "ulysses_degree 4 does not divide the 6 ranks");
  // JSON lists them under "skipped"; CSV has a row for each policy that ran and none for these.
  const std::string json = study::to_json(*r);
  CHECK(json.find("\"skipped\": [") != std::string::npos);
  CHECK(json.find("\"reason\": \"heads (40) not divisible by the Ulysses degree 6\"") !=
        std::string::npos);
  const std::string csv = study::to_csv(*r);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);  // header + 2 rows
  CHECK(csv.find("ulysses") == std::string::npos);
  CHECK(study::format_table(*r).find(
            "left out: head_parallel/ulysses/sync (heads (40) not divisible by the Ulysses degree "
            "6)\n") != std::string::npos);
  // Nothing left out: no "skipped" key at all (outputs of such studies are unchanged).
  auto t = one_unit("wan2.1-14b-720p", "sta", 4);
  add(t, "head_parallel/ulysses/sync");  // 40 % 4 == 0
  auto rt = study::run_study(t);
  REQUIRE(rt.ok());
  CHECK(rt->skipped.empty());
  CHECK(study::to_json(*rt).find("skipped") == std::string::npos);
}

TEST_CASE("every policy left out, or the baseline left out, fails the study with exit 2") {
  auto s = one_unit("hunyuanvideo-sta", "sta", 3);  // 24 heads, 3 ranks: no USP split (P < 4)
  add(s, "contiguous/usp/sm_overlap");
  auto r = study::run_study(s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message ==
        "<study>:/policies: no policy can run on 8x-l40s-gen4-4switch (contiguous/usp/sm_overlap: "
        "no Ulysses x ring split of 3 ranks)");
  add(s, "contiguous/ring/sm_overlap");  // the baseline (first policy) is still USP
  r = study::run_study(s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message.find("the baseline contiguous/usp/sm_overlap cannot run on "
                               "8x-l40s-gen4-4switch (no Ulysses x ring split of 3 ranks); choose "
                               "another baseline") != std::string::npos);
  s.baseline = "contiguous/ring/sm_overlap";
  r = study::run_study(s);
  REQUIRE(r.ok());
  CHECK(r->policies.size() == 1);
  CHECK(r->skipped.size() == 1);
}

TEST_CASE("check_runnable: Ulysses needs H % P == 0, USP a degree u > 1 dividing P and H") {
  auto spec = [](const char* text) { return *policy::parse_policy(text); };
  const auto uly = spec("head_parallel/ulysses/sync");
  CHECK(policy::check_runnable(uly, 8, 24).ok());  // 24 = 8 * 3
  CHECK(policy::check_runnable(uly, 1, 40).ok());
  CHECK_FALSE(policy::check_runnable(uly, 8, 20).ok());  // 20 = 8 * 2 + 4
  const auto usp = spec("contiguous/usp/sm_overlap");
  // Default degree: P/2 for P >= 4, lowered until it divides P and H.
  CHECK(policy::default_ulysses_degree(8, 24) == 4);
  CHECK(policy::default_ulysses_degree(6, 40) == 2);
  CHECK(policy::default_ulysses_degree(5, 24) == 1);  // 2 does not divide 5
  // Across nodes: the ranks of one node (all-to-alls inside it, ring across nodes), lowered
  // until it divides P and H. 32 ranks on 4 nodes of 8: 8 (one server would take P/2 = 16).
  CHECK(policy::default_ulysses_degree(32, 24, 8) == 8);
  CHECK(policy::default_ulysses_degree(32, 20, 8) == 4);   // 8 and 5..7 do not divide 20 and 32
  CHECK(policy::default_ulysses_degree(16, 24, 16) == 8);  // one node: the one-server P/2
  CHECK(policy::ranks_per_node({0, 0, 0, 0, 1, 1, 1, 1}) == 4);
  CHECK(policy::ranks_per_node({0, 0, 0, 0, 0, 0}) == 0);  // one node
  CHECK(policy::ranks_per_node({0, 0, 1, 1, 1, 1}) == 2);  // node 1's 4 are two runs of 2
  CHECK(policy::ranks_per_node({0, 0, 0, 1, 1}) == 0);     // 3 then 2: 3 does not divide 5
  CHECK(policy::ranks_per_node({0, 0, 1, 1, 0, 0}) == 2);  // runs of 2, each on one node
  CHECK(policy::ranks_per_node({0, 1, 0, 1}) == 1);        // one rank per node run
  CHECK(policy::ranks_per_node({}) == 0);
  CHECK(policy::check_runnable(usp, 8, 20, 0, 4).ok());  // u = 4 divides 20
  CHECK(policy::check_runnable(usp, 8, 24, 0, 1).error().message ==
        "no Ulysses x ring split of 8 ranks and 24 heads: the default Ulysses degree, the "
        "largest u <= the 1 ranks of a node dividing both, is 1");
  CHECK(policy::check_runnable(usp, 8, 24).ok());
  CHECK(policy::check_runnable(usp, 5, 24).error().message ==
        "no Ulysses x ring split of 5 ranks and 24 heads: the default Ulysses degree, the "
        "largest u <= P/2 dividing both, is 1");
  CHECK(policy::check_runnable(usp, 1, 24).error().message == "no Ulysses x ring split of 1 rank");
  CHECK(policy::check_runnable(spec("contiguous/usp/sync:ulysses_degree=3"), 6, 24).ok());
  CHECK(
      policy::check_runnable(spec("contiguous/usp/sync:ulysses_degree=3"), 6, 40).error().message ==
      "heads (40) not divisible by the Ulysses degree 3");
  CHECK(policy::check_runnable(spec("contiguous/ring/sync"), 7, 40).ok());
}

TEST_CASE("check_runnable: Ulysses' degree and kv_heads must divide one another (GQA)") {
  // ulysses_plan's rule (policy/scheme_parts.cpp ulysses_kv_heads): kv_heads >= u needs
  // kv_heads % u == 0, kv_heads < u needs u % kv_heads == 0 (each K/V head copied u / kv_heads
  // times). 24 heads, 8 ranks: heads split (24 = 8 x 3), but kv_heads 6 and 8 do not divide one
  // another; kv_heads 4 (8 = 4 x 2), 8 and 24 (= 8 x 3) do. The study now skips the policy with
  // this reason instead of failing in the scheme (exit 2).
  auto spec = [](const char* text) { return *policy::parse_policy(text); };
  const auto uly = spec("head_parallel/ulysses/sync");
  CHECK(policy::check_runnable(uly, 8, 24, 6).error().message ==
        "kv_heads (6) and the Ulysses degree 8 do not divide one another");
  CHECK(policy::check_runnable(uly, 8, 24, 4).ok());
  CHECK(policy::check_runnable(uly, 8, 24, 8).ok());
  CHECK(policy::check_runnable(uly, 8, 24, 24).ok());
  CHECK(policy::check_runnable(uly, 8, 24).ok());  // kv_heads 0: as many as heads
  // USP at its degree: u = 3 with kv_heads 2 (neither divides the other), u = 2 with 4.
  CHECK(policy::check_runnable(spec("contiguous/usp/sync:ulysses_degree=3"), 6, 24, 2)
            .error()
            .message == "kv_heads (2) and the Ulysses degree 3 do not divide one another");
  CHECK(policy::check_runnable(spec("contiguous/usp/sync:ulysses_degree=2"), 6, 24, 4).ok());
  // The default degree of 8 ranks and 24 heads is 4: kv_heads 6 does not fit it.
  CHECK(policy::check_runnable(spec("contiguous/usp/sync"), 8, 24, 6).error().message ==
        "kv_heads (6) and the Ulysses degree 4 do not divide one another");
}

TEST_CASE("a study skips Ulysses when its degree and kv_heads do not divide one another") {
  // 24 heads, 6 K/V heads, 8 ranks: heads split (24 = 8 x 3) but 6 and 8 do not divide one
  // another. The study ran into ulysses_plan's error (exit 2); now the policy is a skipped row.
  auto s = one_unit("gqa", "dense", 8);
  s.model_json = R"({"schema_version": 1, "name": "gqa", "latent": [1, 1, 4096],
      "text_tokens": 0, "heads": 24, "kv_heads": 6, "head_dim": 64, "layers": 1,
      "hidden": 1536, "dtype_bytes": 2, "steps": 1})";
  s.pattern.block_tokens = 256;
  add(s, "contiguous/ring/sm_overlap");
  add(s, "head_parallel/ulysses/sync");
  auto r = study::run_study(s);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->policies.size() == 1);
  REQUIRE(r->skipped.size() == 1);
  CHECK(r->skipped[0].policy == "head_parallel/ulysses/sync");
  CHECK(r->skipped[0].reason == "kv_heads (6) and the Ulysses degree 8 do not divide one another");
}

TEST_CASE("the baseline's own reason, a study that would fail on a later topology fails first") {
  // 7 ranks of Wan2.1-14B (40 heads): Ulysses is left out (40 % 7 != 0) and so is USP (default
  // degree 7/2 = 3 -> 2 -> 1, none divides 7). The error gives USP's reason, not Ulysses'.
  auto s = one_unit("wan2.1-14b-720p", "sta", 7);
  add(s, "contiguous/ring/sm_overlap");
  add(s, "head_parallel/ulysses/sync");
  add(s, "contiguous/usp/sm_overlap");
  s.baseline = "contiguous/usp/sm_overlap";
  auto r = study::run_study(s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "<study>:/baseline: the baseline contiguous/usp/sm_overlap cannot run on "
        "8x-l40s-gen4-4switch (no Ulysses x ring split of 7 ranks and 40 heads: the default "
        "Ulysses degree, the largest u <= P/2 dividing both, is 1); choose another baseline");
  // Two topologies, the baseline USP runs on the first (8 ranks) but not the second (2 ranks):
  // the study fails before simulating anything (no progress reported).
  auto t = one_unit("hunyuanvideo-sta", "sta", 0);
  t.topologies = {"8x-l40s-gen4-4switch", "2x-h200-nvlink"};
  add(t, "contiguous/usp/sm_overlap");
  add(t, "contiguous/ring/sm_overlap");
  int64_t units = 0;
  study::RunOptions opt;
  opt.progress = [&](int64_t, int64_t) { ++units; };
  auto rt = study::run_study(t, opt);
  REQUIRE_FALSE(rt.ok());
  CHECK(rt.error().message.find(
            "cannot run on 2x-h200-nvlink (no Ulysses x ring split of 2 ranks)") !=
        std::string::npos);
  CHECK(units == 0);
}

TEST_CASE("ulysses_degree 1 is an error on any rank count, 1 included") {
  auto s = one_unit("hunyuanvideo-sta", "sta", 1);
  add(s, "contiguous/ring/sm_overlap");
  add(s, "contiguous/usp/sm_overlap:ulysses_degree=1");
  auto r = study::run_study(s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message.find("ulysses_degree 1 given, so USP would be plain ring") !=
        std::string::npos);
}

TEST_CASE("usp across nodes: the default Ulysses degree is the ranks of a node") {
  // 32 GPUs of the 16x8 H100 cluster are 4 nodes of 8. CogVideoX-5b has 48 heads, so the
  // one-server default P/2 = 16 would divide both; across nodes the default must be 8 (the
  // all-to-alls inside a node's NVLink, the ring over the network) and equal an explicit 8.
  auto run = [](const char* policy_text) {
    study::Study s = one_unit("cogvideox-5b", "dense", 32);
    s.topologies = {"16x8-h100-ndr-rail"};
    add(s, policy_text);
    auto r = study::run_study(s);
    REQUIRE(r.ok());
    REQUIRE(r->policies.size() == 1);
    return r->policies[0].attention_time_s;
  };
  const double by_default = run("contiguous/usp/sm_overlap");
  CHECK(by_default == run("contiguous/usp/sm_overlap:ulysses_degree=8"));
  CHECK(by_default != run("contiguous/usp/sm_overlap:ulysses_degree=16"));
}
