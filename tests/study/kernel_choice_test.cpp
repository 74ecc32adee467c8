// The compute figures a study uses: /compute/kernel, the topology's measured_compute, explicit
// efficiencies, and compute_source in the results (issue 14 precedence, end to end).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sparsp/plan.hpp"
#include "sparsp/study.hpp"
#include "sparsp/sweep.hpp"

using namespace sparsp;

namespace {
// One H200, dense Wan2.1-14B, one layer: the attention phase is one kernel per layer.
std::string study_json(const std::string& topology, const std::string& compute) {
  return R"({"schema_version": 1, "topologies": [")" + topology +
         R"("], "model": "wan2.1-14b-720p", "pattern": {"kind": "dense"},
             "policies": ["contiguous/ring/sync"], "steps": [0], "layers": [0], "compute": )" +
         compute + "}";
}
study::PolicyResult run1(const std::string& text) {
  auto s = study::parse_study(text, "s.json");
  REQUIRE(s.ok());
  auto r = study::run_study(*s);
  REQUIRE(r.ok());
  REQUIRE(r->policies.size() == 1);
  return r->policies[0];
}
}  // namespace

TEST_CASE("study /compute/kernel: the kernel's figure, reported in compute_source") {
  auto s = study::parse_study(study_json("1x-h200-pcie", R"({"kernel": "fa3"})"), "s.json");
  REQUIRE(s.ok());
  CHECK(s->kernel == "fa3");
  const auto generic = run1(study_json("1x-h200-pcie", "{}"));
  const auto fa3 = run1(study_json("1x-h200-pcie", R"({"kernel": "fa3"})"));
  CHECK(generic.compute_source == "generic (hopper, 0.5 of peak)");
  // 0.6755 * 75600 / (75600 + 198) = 0.67373704 per full wave; one call of 40 heads x
  // ceil(75600 / 128) = 591 tiles = 23640 CTAs on 132 SMs x 1: 179.0909 waves, tail
  // 179.0909 / 180 = 0.99494949 -> 0.67033275 of peak.
  CHECK(fa3.compute_source ==
        "kernel fa3 (hopper, 0.6703 of peak); waves 179.1 of 132 SMs x 1 (23640 CTAs): tail "
        "0.9949");
  // One kernel per layer: (t - 5 us) scales as 1 / efficiency: 0.5 / 0.67033275 = 0.74590.
  CHECK((fa3.attention_time_s - 5e-6) / (generic.attention_time_s - 5e-6) ==
        doctest::Approx(0.5 / 0.67033275).epsilon(1e-4));
  // An explicit efficiency wins over the kernel.
  const auto given =
      run1(study_json("1x-h200-pcie", R"({"kernel": "fa3", "attention_efficiency": 0.25})"));
  CHECK(given.compute_source == "attention_efficiency given");
  CHECK((given.attention_time_s - 5e-6) / (generic.attention_time_s - 5e-6) ==
        doctest::Approx(2.0).epsilon(1e-6));
  // Bad kernel names are refused at parse time with the valid ones.
  auto bad = study::parse_study(study_json("1x-h200-pcie", R"({"kernel": 3})"), "s.json");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message ==
        "s.json:/compute/kernel: expected a kernel name (`sparsp simulate --list`)");
}

TEST_CASE("study: a topology measured_compute entry beats the registry, and only its kernel") {
  const auto dir = std::filesystem::temp_directory_path() / "sparsp_kernel_choice";
  std::filesystem::create_directories(dir);
  const std::string topo = (dir / "h200-measured.json").string();
  std::ofstream(topo) << R"({"schema_version": 1, "name": "h200-measured",
    "template": {"sockets": 1, "switches_per_socket": 0, "gpus_per_socket": 1,
                 "gpu_model": "NVIDIA H200", "pcie_gen": 5, "pcie_width": 16},
    "measured_compute": [{"gpu_model": "NVIDIA H200", "kernel": "sparsp", "head_dim": 128,
                          "attention_TFLOPs": {"128": 247.25}}]})";
  const auto generic = run1(study_json("1x-h200-pcie", "{}"));
  // No kernel chosen: the sparsp entry, 247.25 / 989 = 0.25 of peak -> twice generic's time.
  const auto meas = run1(study_json(topo, "{}"));
  CHECK(meas.compute_source == "measured_compute /measured_compute/0 (kernel sparsp)");
  CHECK((meas.attention_time_s - 5e-6) / (generic.attention_time_s - 5e-6) ==
        doctest::Approx(2.0).epsilon(1e-6));
  // fa3 chosen: the sparsp measurement does not apply.
  const auto fa3 = run1(study_json(topo, R"({"kernel": "fa3"})"));
  CHECK(fa3.compute_source.rfind("kernel fa3 (hopper, 0.6703 of peak); waves", 0) == 0);
}

TEST_CASE("sweep alias kernel sets /compute/kernel") {
  bool found = false;
  for (const auto& a : study::sweep_axis_aliases())
    if (a.name == "kernel") {
      found = true;
      CHECK(a.pointer == "/compute/kernel");
    }
  CHECK(found);
}

TEST_CASE("measured contention travels in emitted plans: simulate --plan re-times the study") {
  const auto dir = std::filesystem::temp_directory_path() / "sparsp_kernel_choice";
  std::filesystem::create_directories(dir);
  // Two H200s; the sparsp entry is generic's 0.5 of peak (494.5 / 989), with contention.
  auto topo_file = [&](const std::string& name, const std::string& contention) {
    const std::string path = (dir / (name + ".json")).string();
    std::ofstream(path) << R"({"schema_version": 1, "name": ")" + name + R"(",
      "template": {"sockets": 1, "switches_per_socket": 0, "gpus_per_socket": 2,
                   "gpu_model": "NVIDIA H200", "pcie_gen": 5, "pcie_width": 16},
      "measured_compute": [{"gpu_model": "NVIDIA H200", "kernel": "sparsp", "head_dim": 128,
                            "attention_TFLOPs": {"128": 494.5})" +
                               contention + "}]}";
    return path;
  };
  const std::string with =
      topo_file("h200x2-contention", R"(, "contention": {"ce_copy": 2.0, "sm_copy_per_sm": 0.5})");
  const std::string without = topo_file("h200x2-nocontention", "");
  auto run_plans = [&](const std::string& topo, const std::string& runtime) {
    auto s = study::parse_study(R"({"schema_version": 1, "topologies": [")" + topo +
                                    R"("], "model": "wan2.1-14b-720p", "pattern": {"kind": "dense"},
             "policies": ["contiguous/ring/)" +
                                    runtime + R"("], "steps": [0], "layers": [0]})",
                                "s.json");
    REQUIRE(s.ok());
    study::RunOptions ro;
    ro.keep_plans = true;
    auto r = study::run_study(*s, ro);
    REQUIRE(r.ok());
    REQUIRE(r->policies.size() == 1);
    REQUIRE(r->policies[0].plan);
    return r->policies[0];
  };
  auto retime = [](const policy::Plan& p) {
    // Through the file format, as `simulate --emit-plan` then `simulate --plan`.
    auto back = policy::parse_plan(policy::to_json(p), "p.json");
    REQUIRE(back.ok());
    auto r = study::retime_plan(*back);
    REQUIRE(r.ok());
    REQUIRE(r->policies.size() == 1);
    return r->policies[0];
  };
  for (const char* runtime : {"sm_overlap", "ce_decoupled"}) {
    CAPTURE(runtime);
    const auto measured = run_plans(with, runtime);
    const auto plain = run_plans(without, runtime);
    // The measured factors, as given in the file; a study without them writes no keys.
    const auto& params = measured.plan->policy.params;
    REQUIRE(params.count(study::kPlanContentionCeKey) == 1);
    REQUIRE(params.count(study::kPlanContentionSmKey) == 1);
    CHECK(params.at(study::kPlanContentionCeKey) == 2.0);
    CHECK(params.at(study::kPlanContentionSmKey) == 0.5);
    CHECK(plain.plan->policy.params.count(study::kPlanContentionCeKey) == 0);
    CHECK(plain.plan->policy.params.count(study::kPlanContentionSmKey) == 0);
    CHECK(measured.compute_source ==
          "measured_compute /measured_compute/0 (kernel sparsp); contention measured");
    // The contention moves the study (the copies overlap attention under both runtimes)...
    CHECK(measured.attention_time_s > plain.attention_time_s * 1.05);
    // ...and re-timing the plan reproduces it, and the keys are not reported as policy params.
    const auto re = retime(*measured.plan);
    CHECK(re.attention_time_s == doctest::Approx(measured.attention_time_s).epsilon(1e-12));
    CHECK(re.e2e_time_s == doctest::Approx(measured.e2e_time_s).epsilon(1e-12));
    CHECK(re.policy.params.count(study::kPlanContentionCeKey) == 0);
    CHECK(re.policy.params.count(study::kPlanContentionSmKey) == 0);
    // The stages without a figure are marked again: the wan2.1-14b-720p preset has no text
    // encoder or scheduler figure (its VAE decode has FLOPs), bits 2 + 8 = 10 in the plan.
    const std::vector<std::string> unmodelled{"text_encoder", "scheduler"};
    CHECK(measured.not_modelled == unmodelled);
    CHECK(measured.plan->policy.params.at(study::kPlanNotModelledKey) == 10);
    CHECK(re.not_modelled == unmodelled);
    CHECK(re.policy.params.count(study::kPlanNotModelledKey) == 0);
    // Without the keys the plan re-times with the defaults: the contention-free figure.
    policy::Plan stripped = *measured.plan;
    stripped.policy.params.erase(study::kPlanContentionCeKey);
    stripped.policy.params.erase(study::kPlanContentionSmKey);
    CHECK(retime(stripped).attention_time_s ==
          doctest::Approx(plain.attention_time_s).epsilon(1e-12));
  }
  // A negative factor in a plan is refused with its pointer.
  policy::Plan bad = *run_plans(with, "sm_overlap").plan;
  bad.policy.params[study::kPlanContentionCeKey] = -0.5;
  auto parsed = policy::parse_plan(policy::to_json(bad), "p.json");
  REQUIRE(!parsed.ok());
  CHECK(parsed.error().message ==
        "p.json:/policy/params/contention_ce_copy: expected a slowdown factor in [0, 1e6], got "
        "-0.5");
}
