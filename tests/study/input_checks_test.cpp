// Input checks a fresh-user test found missing: study step/layer selections, tune parameter values
// and outputs, and the 9 significant digits of `simulate --json` (plan files: tests/policy/
// plan_checks_test.cpp). Each case failed before the fix.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sparsp/study.hpp"
#include "sparsp/sweep.hpp"
#include "sparsp/topology.hpp"

using nlohmann::ordered_json;
using namespace sparsp;
namespace fs = std::filesystem;

namespace {

bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run(const std::string& args, const fs::path& out, const fs::path& err) {
  const std::string cmd =
      std::string(SPARSP_CLI_PATH) + " " + args + " > " + out.string() + " 2> " + err.string();
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE("study: a step or layer listed twice is refused at its pointer") {
  const std::string head = R"({"schema_version": 1, "topology": "8x-l40s-gen4-4switch",
    "pattern": "sta", "policies": ["contiguous/ring/sync"], )";
  auto s = study::parse_study(head + R"("layers": [2, 2, 2]})", "s.json");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().exit_code == 2);
  CHECK(s.error().message == "s.json:/layers/1: duplicate 2 (already at /layers/0)");
  s = study::parse_study(head + R"("steps": [0, 3, 1, 3]})", "s.json");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "s.json:/steps/3: duplicate 3 (already at /steps/1)");
  s = study::parse_study(head + R"("layers": [2, 0, 1]})", "s.json");
  REQUIRE(s.ok());
  CHECK(s->layers == std::vector<int>{2, 0, 1});
}

TEST_CASE("tune: policy parameter values out of range are input errors at their place") {
  const std::string head = R"({"schema_version": 1,
    "study": {"policies": [{"placement": "dependency_aware", "scheme": "demand_direct",
                            "runtime": "ce_decoupled", "params": {"chunk_bytes": 4194304}}]},
    "parameters": [)";
  auto bad = [&](const std::string& params) {
    auto r = study::parse_tune(head + params + "]}", "t.json", "");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  // Range [4096, 1e12] bytes (policy/policy_spec.cpp kMinChunkBytes, kMaxChunkBytes).
  CHECK(bad(R"({"name": "chunk_bytes", "values": [4096, -1]})") ==
        "t.json:/parameters/0/values/1: policy parameter 'chunk_bytes' must be in [4096, 1e+12] "
        "bytes, got -1");
  CHECK(bad(R"({"name": "staging_buffers", "values": [1]},
               {"name": "balance_tolerance", "values": [1.03, 0.5]})") ==
        "t.json:/parameters/1/values/1: policy parameter 'tolerance' must be >= 1 (1.03 = 3% "
        "imbalance allowed), got 0.5");
  CHECK(
      bad(R"({"path": "/policies/0/params/comm_sms", "range": {"start": 0, "stop": 8, "step": 4}})") ==
      "t.json:/parameters/0/range: policy parameter 'comm_sms' must be an integer in [1, 1024], "
      "got 0");
  auto ok = study::parse_tune(head + R"({"name": "chunk_bytes", "values": [4096, 1e12]}]})",
                              "t.json", "");
  CHECK_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.error().message));
}

TEST_CASE("tune CLI: -o writes only -o, a bad objective names the file") {
  const fs::path d = fs::temp_directory_path() / "sparsp_input_checks_tune";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string study =
      R"("study": {"schema_version": 1, "topologies": ["8x-rtx4090-epyc-nop2p"],
      "model": "hunyuanvideo-sta",
      "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
      "gpus": 8, "steps": [0], "layers": [0],
      "policies": ["dependency_aware/demand_direct/ce_decoupled"]},
    "parameters": [{"name": "chunk_bytes", "values": [4194304]}],
    "output": "file-policy.json", "study_output": "file-study.json")";
  std::ofstream(d / "tune.json") << "{\"schema_version\": 1, " << study << "}";
  const fs::path mine = d / "mine.json";
  REQUIRE(run("tune -c " + (d / "tune.json").string() + " -o " + mine.string(), d / "out.txt",
              d / "err.txt") == 0);
  CHECK(fs::exists(mine));
  CHECK_FALSE(fs::exists(d / "file-policy.json"));
  CHECK_FALSE(fs::exists(d / "file-study.json"));  // the file's study_output is not clobbered
  // An unknown objective: exit 2, the tune file named.
  std::ofstream(d / "bad.json") << "{\"schema_version\": 1, \"objective\": \"speed\", " << study
                                << "}";
  CHECK(run("tune -c " + (d / "bad.json").string(), d / "out.txt", d / "err.txt") == 2);
  CHECK(starts(slurp(d / "err.txt"),
               "sparsp: " + (d / "bad.json").string() + ":/objective: unknown metric \"speed\""));
  // A text column (was exit 1 after the search) or a higher-is-better ratio (tune minimises, so
  // it picked the slowest configuration): exit 2 at /objective (issue 18, defect 21).
  std::ofstream(d / "text.json") << "{\"schema_version\": 1, \"objective\": \"busiest_link\", "
                                 << study << "}";
  CHECK(run("tune -c " + (d / "text.json").string(), d / "out.txt", d / "err.txt") == 2);
  CHECK(slurp(d / "err.txt") == "sparsp: " + (d / "text.json").string() +
                                    ":/objective: \"busiest_link\" is a text column, not a metric "
                                    "to minimise\n");
  std::ofstream(d / "up.json") << "{\"schema_version\": 1, \"objective\": \"speedup\", " << study
                               << "}";
  CHECK(run("tune -c " + (d / "up.json").string(), d / "out.txt", d / "err.txt") == 2);
  CHECK(starts(slurp(d / "err.txt"), "sparsp: " + (d / "up.json").string() +
                                         ":/objective: \"speedup\" is higher-is-better"));
  // Out-of-range values exit 2 with the file and the pointer (before: exit 1 after the search).
  std::ofstream(d / "range.json")
      << R"({"schema_version": 1, "study": {"policies": ["contiguous/ring/sync"]},
             "parameters": [{"name": "chunk_bytes", "values": [-1]}]})";
  CHECK(run("tune -c " + (d / "range.json").string(), d / "out.txt", d / "err.txt") == 2);
  CHECK(
      starts(slurp(d / "err.txt"), "sparsp: " + (d / "range.json").string() +
                                       ":/parameters/0/values/0: policy parameter 'chunk_bytes'"));
}

TEST_CASE("simulate --json numbers have at most 9 significant digits (byte counts: all)") {
  study::StudyResult r;
  r.model = "m";
  study::PolicyResult p;
  p.policy = {"contiguous", "ring", "sync", {{"tolerance", 1.0300000000000002}}};
  // nlohmann_json (Grisu2) prints the double nearest 0.381007287 as 0.38100728699999997.
  p.volume_vs_baseline = 0.38100728699999997;
  p.volume_bytes = 1234567890123.0;  // a byte count: every digit, as an integer (break-it D1)
  p.attention_time_s = 1.5e-05;      // scientific below 1e-4, as nlohmann_json
  p.step_time_s = 3;                 // integral doubles keep ".0"
  p.e2e_time_s = 2.0 / 3.0;
  p.speedup = 1e20;
  p.compute_imbalance = -0.25;
  r.policies.push_back(p);
  const std::string s = study::to_json(r);
  CHECK(s.find("\"volume_vs_baseline\": 0.381007287,") != std::string::npos);
  CHECK(s.find("\"volume_bytes\": 1234567890123,") != std::string::npos);
  CHECK(s.find("\"attention_time_s\": 1.5e-05,") != std::string::npos);
  CHECK(s.find("\"step_time_s\": 3.0,") != std::string::npos);
  CHECK(s.find("\"e2e_time_s\": 0.666666667,") != std::string::npos);
  CHECK(s.find("\"speedup\": 1e+20,") != std::string::npos);
  CHECK(s.find("\"compute_imbalance\": -0.25,") != std::string::npos);
  CHECK(s.find("\"tolerance\": 1.03") != std::string::npos);
  // Still valid JSON, same layout as nlohmann's dump(2) apart from the digits.
  const auto j = nlohmann::ordered_json::parse(s);
  CHECK(j["policies"][0]["volume_vs_baseline"].get<double>() == 0.381007287);
  CHECK(j.dump(2) + "\n" != s);  // nlohmann would print the 17-digit form
  CHECK(study::to_csv(r).find(",0.381007287,") != std::string::npos);
}
