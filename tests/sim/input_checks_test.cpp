// Input checks a fresh-user test found missing: plan files (policy/plan_io.cpp, policy/PLAN.md), study
// step/layer selections, tune parameter values and outputs, and the 9 significant digits of
// `simulate --json`. Each case failed before the fix.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sparsp/plan.hpp"
#include "sparsp/study.hpp"
#include "sparsp/sweep.hpp"
#include "sparsp/topology.hpp"

using nlohmann::ordered_json;
using namespace sparsp;
namespace fs = std::filesystem;

namespace {

// 2 ranks, 4 blocks of 256 B (2 (K,V) * 4 tokens * 2 heads * 8 dim * 2 B) owned {0,0,1,1};
// one transfer gpu0 -> gpu1 of blocks {0,1} = 512 B and one compute task on gpu1 after it.
ordered_json good_plan() {
  policy::Plan p;
  p.model = "toy";
  p.gpus = 2;
  p.block_tokens = 4;
  p.heads = 2;
  p.head_dim = 8;
  p.num_blocks = 4;
  p.kv_block_bytes = 256;
  p.policy = {"contiguous", "ring", "sync", {}};
  p.block_owner = {0, 0, 1, 1};
  policy::LayerPlan L;
  sim::Transfer t;
  t.id = "t0";
  t.src = "gpu0";
  t.dst = "gpu1";
  t.bytes = 512;
  t.kv_blocks = {0, 1};
  L.work.transfers.push_back(t);
  sim::ComputeTask c;
  c.id = "c0";
  c.gpu = "gpu1";
  c.duration_s = 1e-3;
  c.after = {"t0"};
  L.work.compute.push_back(c);
  p.layers.push_back(L);
  return ordered_json::parse(policy::to_json(p));
}

// The error message of parsing `j` as p.json ("" when it loads).
std::string plan_error(const ordered_json& j) {
  auto r = policy::parse_plan(j.dump(), "p.json");
  if (r.ok()) return "";
  CHECK(r.error().exit_code == 2);
  return r.error().message;
}

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

TEST_CASE("plan: the reference plan loads") { CHECK(plan_error(good_plan()) == ""); }

TEST_CASE("plan: unknown fields are refused at every level with their pointer") {
  auto j = good_plan();
  j["bogus"] = 1;
  CHECK(starts(plan_error(j), "p.json:/bogus: unknown field \"bogus\""));
  j = good_plan();
  j["policy"]["placment"] = "x";
  CHECK(starts(plan_error(j), "p.json:/policy/placment: unknown field"));
  j = good_plan();
  j["layers"][0]["repeats"] = 2;
  CHECK(starts(plan_error(j), "p.json:/layers/0/repeats: unknown field"));
  j = good_plan();
  j["layers"][0]["transfers"][0]["chunk"] = 2;
  CHECK(starts(plan_error(j), "p.json:/layers/0/transfers/0/chunk: unknown field"));
  j = good_plan();
  j["layers"][0]["compute"][0]["duration"] = 2;
  CHECK(starts(plan_error(j), "p.json:/layers/0/compute/0/duration: unknown field"));
}

TEST_CASE("plan: gpus must be the ranks the plan uses and fit its topology") {
  auto j = good_plan();
  j["gpus"] = 3;  // ranks 0 and 1 own blocks and move data; rank 2 does nothing
  CHECK(plan_error(j) ==
        "p.json:/gpus: 3 GPUs, but the plan uses 2 (gpu2 owns no block and is no endpoint of any "
        "transfer or compute task)");
  // A rank used only as a transfer endpoint counts: blocks all on gpu0, gpu1 receives them.
  j = good_plan();
  j["block_owner"] = {0, 0, 0, 0};
  CHECK(plan_error(j) == "");
  // The embedded topology must have at least gpus GPUs (2x-h200-nvlink has 2).
  auto topo = topology::Topology::load("2x-h200-nvlink");
  REQUIRE(topo.ok());
  REQUIRE(topo->num_gpus() == 2);
  j = good_plan();
  j["topology"] = ordered_json::parse(topo->to_json());
  CHECK(plan_error(j) == "");
  j["gpus"] = 3;
  j["block_owner"] = {0, 1, 2, 2};
  CHECK(plan_error(j) ==
        "p.json:/gpus: 3 GPUs, but the embedded topology '" + topo->name() + "' has only 2");
}

TEST_CASE("plan: errors in the embedded topology name the plan file and /topology/...") {
  auto topo = topology::Topology::load("2x-h200-nvlink");
  REQUIRE(topo.ok());
  auto j = good_plan();
  j["topology"] = ordered_json::parse(topo->to_json());
  j["topology"]["nccl"] = {{"p2p_Bps", -1}};
  const std::string e = plan_error(j);
  CHECK_MESSAGE(starts(e, "p.json:/topology/nccl/p2p_Bps"), e);
}

TEST_CASE("plan: kv_block_bytes > 0 with blocks; at least one layer plan; bounded durations") {
  auto j = good_plan();
  j["kv_block_bytes"] = 0;
  CHECK(starts(plan_error(j), "p.json:/kv_block_bytes: expected > 0 when num_blocks > 0"));
  j = good_plan();
  j["layers"] = ordered_json::array();
  CHECK(plan_error(j) == "p.json:/layers: no layer plans (expected at least one entry)");
  // Durations are capped at 1e6 s (policy/PLAN.md): 1e6 itself loads, 1e300 does not.
  j = good_plan();
  j["layers"][0]["compute"][0]["duration_s"] = 1e6;
  CHECK(plan_error(j) == "");
  j["layers"][0]["compute"][0]["duration_s"] = 1e300;
  CHECK(plan_error(j) ==
        "p.json:/layers/0/compute/0/duration_s: expected seconds in 0..1e6, got 1e+300");
  j = good_plan();
  j["layers"][0]["compute"][0]["flops"] = 1e300;
  CHECK(starts(plan_error(j), "p.json:/layers/0/compute/0/flops: expected FLOP in 0..1e24"));
}

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
  auto ok =
      study::parse_tune(head + R"({"name": "chunk_bytes", "values": [4096, 1e12]}]})", "t.json", "");
  CHECK_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.error().message));
}

TEST_CASE("tune CLI: -o writes only -o; a bad objective names the file") {
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
  // Out-of-range values exit 2 with the file and the pointer (before: exit 1 after the search).
  std::ofstream(d / "range.json")
      << R"({"schema_version": 1, "study": {"policies": ["contiguous/ring/sync"]},
             "parameters": [{"name": "chunk_bytes", "values": [-1]}]})";
  CHECK(run("tune -c " + (d / "range.json").string(), d / "out.txt", d / "err.txt") == 2);
  CHECK(
      starts(slurp(d / "err.txt"), "sparsp: " + (d / "range.json").string() +
                                       ":/parameters/0/values/0: policy parameter 'chunk_bytes'"));
}

TEST_CASE("simulate --json numbers have at most 9 significant digits") {
  study::StudyResult r;
  r.model = "m";
  study::PolicyResult p;
  p.policy = {"contiguous", "ring", "sync", {{"tolerance", 1.0300000000000002}}};
  // nlohmann_json (Grisu2) prints the double nearest 0.381007287 as 0.38100728699999997.
  p.volume_vs_baseline = 0.38100728699999997;
  p.volume_bytes = 1234567890123.0;  // 13 digits -> 1.23456789e12, fixed notation as before
  p.attention_time_s = 1.5e-05;      // scientific below 1e-4, as nlohmann_json
  p.step_time_s = 3;                 // integral doubles keep ".0"
  p.e2e_time_s = 2.0 / 3.0;
  p.speedup = 1e20;
  p.compute_imbalance = -0.25;
  r.policies.push_back(p);
  const std::string s = study::to_json(r);
  CHECK(s.find("\"volume_vs_baseline\": 0.381007287,") != std::string::npos);
  CHECK(s.find("\"volume_bytes\": 1234567890000.0,") != std::string::npos);
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
