// The compute figures a study uses: /compute/kernel, the topology's measured_compute, explicit
// efficiencies, and compute_source in the results (issue 14 precedence, end to end).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

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
  // 0.655 * 75600 / (75600 + 198) = 0.65328901 of peak.
  CHECK(fa3.compute_source == "kernel fa3 (hopper, 0.6533 of peak)");
  // One kernel per layer: (t - 5 us) scales as 1 / efficiency: 0.5 / 0.65328901 = 0.76536.
  CHECK((fa3.attention_time_s - 5e-6) / (generic.attention_time_s - 5e-6) ==
        doctest::Approx(0.5 / 0.65328901).epsilon(1e-4));
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
  CHECK(fa3.compute_source == "kernel fa3 (hopper, 0.6533 of peak)");
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
