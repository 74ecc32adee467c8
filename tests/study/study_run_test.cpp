// run_study on real presets: every scheme and runtime simulates, never below its lower bound;
// identical (step, layer) workloads are simulated once; dynamic patterns are streamed with their
// discovery traffic.
#include <doctest/doctest.h>

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
void add(study::Study& s, const char* text) {
  auto p = policy::parse_policy(text);
  REQUIRE(p.ok());
  s.policies.push_back(*p);
  s.policy_places.push_back(text);
}
}  // namespace

TEST_CASE("every scheme x runtime runs on STA; static patterns are simulated once") {
  auto s = base("hunyuanvideo-sta", "sta", 4);
  s.pattern.block_tokens = 384;
  s.pattern.tile = {6, 8, 8};
  s.pattern.window = {3, 3, 3};
  for (const char* scheme : {"ring", "allgather", "ulysses", "usp", "demand_alltoall",
                             "demand_direct", "demand_hierarchical"})
    for (const char* rt : {"sync", "sm_overlap", "ce_decoupled"})
      add(s, ((std::string(scheme) == "ulysses" ? "head_parallel/" : "contiguous/") + std::string(scheme) +
              "/" + rt).c_str());
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
    CHECK(p.e2e_time_s == doctest::Approx(50 * p.step_time_s));
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
  SUBCASE("GPU not in the topology") {
    s.num_gpus = 0;
    s.gpus = {0, 8};
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("<study>:/gpus: GPU 8 is not in topology") == 0);
  }
  SUBCASE("step outside the pattern") {
    s.steps = {50};
    auto r = study::run_study(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "<study>:/steps: step 50 outside the pattern's 50 steps");
  }
}
