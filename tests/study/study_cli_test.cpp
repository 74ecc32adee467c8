// `sparsp simulate` golden behaviour: the real binary on the default study, bad input -> exit 2
// with a one-line message, plans re-timed byte-identically, deterministic JSON.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Run sparsp(const std::string& args) {
  static int n = 0;
  const auto dir = std::filesystem::temp_directory_path() / "sparsp_study_cli";
  std::filesystem::create_directories(dir);
  const std::string err = (dir / ("err" + std::to_string(n++))).string();
  const std::string cmd = std::string(SPARSP_CLI_PATH) + " " + args + " 2>" + err;
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, k);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  return r;
}

}  // namespace

TEST_CASE("sparsp simulate with no arguments runs the default study") {
  auto r = sparsp("simulate --json");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  // 10 policies on each of the two servers.
  REQUIRE(j["policies"].size() == 20);
  for (const auto& p : j["policies"]) {
    for (const char* k :
         {"placement", "scheme", "runtime", "volume_bytes", "control_bytes", "attention_time_s",
          "step_time_s", "e2e_time_s", "lower_bound_s", "speedup"})
      CHECK(p.contains(k));
    CHECK(p["attention_time_s"].get<double>() >= p["lower_bound_s"].get<double>() * (1 - 1e-9));
    if (p["name"] == "contiguous/ring/sm_overlap") CHECK(p["speedup"].get<double>() == 1.0);
    // Ring moves 7/8 of all KV into each of 8 GPUs per layer: HunyuanVideo STA setting has
    // 30*48*80 + 256 = 115456 tokens; K and V: 2 * 24 heads * 128 * 2 bytes = 12288 B per token
    // -> all KV = 1418723328 B; 8 * 7/8 * that = 9931063296 B per layer, x 60 layers
    // = 595863797760 B per step.
    if (p["scheme"] == "ring")
      CHECK(p["volume_bytes"].get<double>() == doctest::Approx(595863797760.0));
    // Ulysses: 4 (P-1)/P * N * H * hd * 2 B = 4 * 7/8 * 115456 * 24 * 128 * 2 = 2482765824 B per
    // layer, x 60 = 148965949440 B.
    if (p["scheme"] == "ulysses")
      CHECK(p["volume_bytes"].get<double>() == doctest::Approx(148965949440.0));
  }
  // Deterministic: the same run gives byte-identical output.
  CHECK(sparsp("simulate --json").out == r.out);
  // The table names every policy.
  auto t = sparsp("simulate");
  CHECK(t.code == 0);
  CHECK(t.out.find("dependency_aware/demand_direct/ce_decoupled") != std::string::npos);
}

TEST_CASE("bad study input exits 2 with one clear line") {
  struct Case {
    std::string args;
    const char* needle;
  };
  const Case cases[] = {
      {"simulate --topology no-such-server", "no-such-server"},
      {"simulate --gpus 9 --topology 8x-l40s-gen4-4switch",
       "sparsp: <command line>:--gpus: asks for 9 GPUs, but topology '8x-l40s-gen4-4switch' has 8"},
      {"simulate --gpus 5 --topology 8x-l40s-gen4-4switch --policy head_parallel/ulysses/sync",
       "not divisible by the Ulysses degree 5"},
      {"simulate --block 100 --topology 8x-l40s-gen4-4switch",
       "sparsp: <command line>:--block: block size 100 does not divide"},
      {"simulate --model no-such-model", "no-such-model"},
      {"simulate --policy contiguous/teleport/sync", "unknown scheme 'teleport'"},
      {"simulate --baseline nope", "baseline 'nope' is not one of the policies"},
      {"simulate --config /nonexistent/study.json", "cannot open study file"},
      // A directory is not a study file (and not "invalid JSON").
      {"simulate --config " + std::string(SPARSP_SOURCE_DIR) + "/configs", "is a directory"},
      // --plan re-times a plan as written: study flags are refused (checked before the plan is
      // read).
      {"simulate --plan p.json --topology 8x-l40s-gen4-4switch",
       "--plan re-times a plan as written; --topology cannot be combined with it"},
      {"simulate --plan p.json --gpus 4", "--gpus cannot be combined"},
      {"simulate --plan p.json --config x.json", "--config cannot be combined"},
      {"simulate --plan p.json --policy contiguous/ring/sync", "--policy cannot be combined"},
      {"simulate --plan p.json --emit-plan d", "--emit-plan cannot be combined"},
      {"simulate --json --csv", "--json and --csv are mutually exclusive"},
      // 7 ranks, 24 heads: USP's default degree 7/2 = 3 -> 2 -> 1 (neither divides 7): plain
      // ring, so USP is left out, and with no other policy the study fails.
      {"simulate --gpus 7 --topology 8x-l40s-gen4-4switch --policy contiguous/usp/sm_overlap",
       "<command line>:--policy: no policy can run on 8x-l40s-gen4-4switch "
       "(contiguous/usp/sm_overlap: no "
       "Ulysses x ring split of 7 ranks and 24 heads"},
      {"simulate --gpus 4 --policy contiguous/usp/sm_overlap:ulysses_degree=1",
       "ulysses_degree 1 given"},
      // The policy named once (break-it D6: "policy '...': policy '...': scheme ...").
      {"simulate --policy contiguous/ulysses/sync",
       "sparsp: <command line>:--policy: policy 'contiguous/ulysses/sync': scheme 'ulysses' "
       "splits heads, so its placement must be head_parallel (got 'contiguous')\n"},
      {"simulate --policy contiguous/ring/sm_overlap:comm_sms=100000",
       "'comm_sms' must be an integer in [1, 1024]"},
      // The L40S has 142 SMs (datasheet; topology/gpu_models.cpp).
      {"simulate --topology 8x-l40s-gen4-4switch --policy contiguous/ring/sm_overlap:comm_sms=200",
       "'comm_sms' must be in [1, 142] (the GPU's SMs), got 200"},
      {"simulate --policy contiguous/ring/sm_overlap:comm_sms=0", "'comm_sms' must be an integer"},
      {"simulate --policy contiguous/ring/sm_overlap:chunk_bytes=0",
       "'chunk_bytes' must be in [4096, 1e+12]"},
      {"simulate --policy contiguous/ring/sm_overlap:chunk_bytes=1e30",
       "'chunk_bytes' must be in [4096"},
      {"simulate --policy contiguous/ring/sm_overlap:staging_buffers=0",
       "'staging_buffers' must be an integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    auto r = sparsp(c.args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("sparsp: ", 0) == 0);
    CHECK(r.err.find(c.needle) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("unwritable --trace / --emit-plan folders are refused before the study runs") {
  const auto dir = std::filesystem::temp_directory_path() / "sparsp_study_cli_unwritable";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  const std::string bad = (dir / "file" / "sub").string();  // below a regular file
  // This study fails when it runs (24 heads, Ulysses degree 5); the folder check comes first.
  const std::string failing =
      "simulate --gpus 5 --topology 8x-l40s-gen4-4switch --policy head_parallel/ulysses/sync";
  for (const char* flag : {" --trace ", " --emit-plan "}) {
    CAPTURE(flag);
    auto r = sparsp(failing + flag + bad);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "sparsp: " + bad + ": cannot create folder: " + (dir / "file").string() +
                       " is not a folder\n");
    // A missing parent folder is refused, as for every other output, and nothing is created
    // (`--emit-plan /nonexist/x` used to create /nonexist and /nonexist/x).
    const std::string missing = (dir / "nonexist" / "x").string();
    r = sparsp(failing + flag + missing);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "sparsp: " + missing + ": cannot create folder: folder " +
                       (dir / "nonexist").string() + " does not exist\n");
    CHECK_FALSE(std::filesystem::exists(dir / "nonexist"));
  }
  // A writable folder: the study's own error, and the check leaves the folder empty.
  auto r = sparsp(failing + " --trace " + (dir / "ok").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("not divisible by the Ulysses degree 5") != std::string::npos);
  CHECK(std::filesystem::is_empty(dir / "ok"));
}

TEST_CASE("simulate progress: none unless asked or on a terminal, output unchanged") {
  // Default study (two servers), top-k pattern (dynamic: every (step, layer) is simulated),
  // 2 steps x 2 layers -> 2 x 2 x 2 = 8 (topology, step, layer) units.
  const std::string args = "simulate --pattern topk --steps 2 --layers 2 --json";
  auto quiet = sparsp(args);  // stderr is a file here, not a terminal: no progress
  REQUIRE(quiet.code == 0);
  CHECK(quiet.err.empty());
  auto lines = sparsp(args + " --progress lines");
  REQUIRE(lines.code == 0);
  CHECK(lines.out == quiet.out);
  // Interval lines come every 10 s (a slow build, e.g. under ASan, prints some); the last line
  // is the final one, and every line is a progress line.
  REQUIRE_FALSE(lines.err.empty());
  const size_t last = lines.err.rfind('\n', lines.err.size() - 2);
  const std::string final_line = lines.err.substr(last == std::string::npos ? 0 : last + 1);
  CHECK(final_line.rfind("simulate: 8/8 layers, ", 0) == 0);
  CHECK(final_line.find(" elapsed ") != std::string::npos);
  for (size_t at = 0; at < lines.err.size(); at = lines.err.find('\n', at) + 1)
    CHECK(lines.err.compare(at, 10, "simulate: ") == 0);
  auto bar = sparsp(args + " --progress bar");
  REQUIRE(bar.code == 0);
  CHECK(bar.out == quiet.out);
  // The final redraw: a full bar, then a newline.
  CHECK(bar.err.find("\r[" + std::string(30, '#') + "] 8/8 layers, ") != std::string::npos);
  CHECK(bar.err.back() == '\n');
  CHECK(sparsp(args + " --progress sometimes").code != 0);
  // On a terminal (a pseudo-terminal from util-linux `script`, where installed) the default is
  // the bar.
  if (std::system("command -v script > /dev/null 2>&1") == 0) {
    const auto log = std::filesystem::temp_directory_path() / "sparsp_study_cli_tty.txt";
    const std::string cmd = "script -qec \"" + std::string(SPARSP_CLI_PATH) + " " + args +
                            " > /dev/null\" /dev/null > " + log.string() + " 2>&1";
    if (std::system(cmd.c_str()) == 0)
      CHECK(slurp(log.string()).find("] 8/8 layers, ") != std::string::npos);
  }
}

TEST_CASE("emitted plans re-time byte-identically, traces are written") {
  const auto dir = std::filesystem::temp_directory_path() / "sparsp_study_cli_plans";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);  // --emit-plan and --trace refuse a missing parent
  auto r = sparsp(
      "simulate --topology 8x-l40s-gen4-4switch --gpus 4 --policy "
      "dependency_aware/demand_direct/ce_decoupled:route=host_staged,staging_buffers=3 --json "
      "--emit-plan " +
      (dir / "plans").string() + " --trace " + (dir / "traces").string());
  REQUIRE(r.code == 0);
  std::string plan;
  for (const auto& e : std::filesystem::directory_iterator(dir / "plans")) plan = e.path().string();
  REQUIRE_FALSE(plan.empty());
  CHECK(plan.find("host_staged") != std::string::npos);
  auto a = sparsp("simulate --plan " + plan + " --json");
  auto b = sparsp("simulate --plan " + plan + " --json");
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  // The re-timed attention time equals the study's (same workload, same engine).
  auto study = nlohmann::json::parse(r.out)["policies"][0];
  auto re = nlohmann::json::parse(a.out)["policies"][0];
  CHECK(re["attention_time_s"].get<double>() ==
        doctest::Approx(study["attention_time_s"].get<double>()));
  CHECK(re["volume_bytes"].get<double>() == doctest::Approx(study["volume_bytes"].get<double>()));
  // Re-timing gives the study's step and end-to-end times: the plan carries the non-attention
  // work per layer and the layers/steps extrapolated to (they were 0 / attention only before).
  CHECK(study["other_time_s"].get<double>() > 0);
  CHECK(re["other_time_s"].get<double>() ==
        doctest::Approx(study["other_time_s"].get<double>()).epsilon(1e-12));
  CHECK(re["step_time_s"].get<double>() ==
        doctest::Approx(study["step_time_s"].get<double>()).epsilon(1e-12));
  CHECK(re["e2e_time_s"].get<double>() ==
        doctest::Approx(study["e2e_time_s"].get<double>()).epsilon(1e-12));
  CHECK(re["compute_imbalance"].get<double>() ==
        doctest::Approx(study["compute_imbalance"].get<double>()));
  // The bookkeeping keys are not reported as policy parameters; staging_buffers is.
  CHECK(re["name"] == study["name"]);
  CHECK(a.out.find("model_layers") == std::string::npos);
  int traces = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "traces")) {
    auto j = nlohmann::json::parse(slurp(e.path().string()));
    CHECK((j.is_object() || j.is_array()));
    ++traces;
  }
  CHECK(traces == 1);
  // --trace is allowed with --plan: one trace of the plan's first layer.
  auto tr = sparsp("simulate --plan " + plan + " --trace " + (dir / "retrace").string());
  REQUIRE(tr.code == 0);
  int retraces = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "retrace")) {
    auto j = nlohmann::json::parse(slurp(e.path().string()));
    CHECK((j.is_object() || j.is_array()));
    ++retraces;
  }
  CHECK(retraces == 1);
}

TEST_CASE("table: singular GPU, '-' for a 0-byte baseline, closing line naming the fastest") {
  // One GPU moves nothing: every volume is 0 B, so "vs base" cannot be a percentage.
  auto one = sparsp("simulate --gpus 1 --topology 8x-l40s-gen4-4switch --steps 1 --layers 1");
  REQUIRE(one.code == 0);
  CHECK(one.out.find(", 1 GPU;") != std::string::npos);
  CHECK(one.out.find("1 GPUs") == std::string::npos);
  CHECK(one.out.find("100.0%") == std::string::npos);
  auto t = sparsp(
      "simulate --topology 8x-l40s-gen4-4switch --steps 1 --layers 1 --policy "
      "contiguous/ring/sm_overlap --policy dependency_aware/demand_direct/ce_decoupled");
  REQUIRE(t.code == 0);
  CHECK(t.out.find(", 8 GPUs;") != std::string::npos);
  CHECK(t.out.find("e2e: the whole generation") != std::string::npos);
  // HunyuanVideo (distilled CFG) has text-encoder and VAE FLOPs (hyvae14) but no scheduler
  // figure: that one is marked, 0 s.
  CHECK(t.out.find("* e2e without (no figure for this GPU, 0 s): scheduler\n") !=
        std::string::npos);
  CHECK(t.out.find("sim/LB: simulated attention / LB") != std::string::npos);
  // The closing line agrees with the JSON: the policy with the highest e2e speedup.
  auto j =
      nlohmann::json::parse(sparsp("simulate --topology 8x-l40s-gen4-4switch --steps 1 --layers 1 "
                                   "--policy contiguous/ring/sm_overlap --policy "
                                   "dependency_aware/demand_direct/ce_decoupled --json")
                                .out);
  const auto& fast =
      j["policies"][0]["speedup"].get<double>() >= j["policies"][1]["speedup"].get<double>()
          ? j["policies"][0]
          : j["policies"][1];
  char line[256];
  std::snprintf(line, sizeof line,
                "fastest on 8x-l40s-gen4-4switch: %s, %.2fx end to end, %.2fx attention vs %s\n",
                fast["name"].get<std::string>().c_str(), fast["speedup"].get<double>(),
                fast["attention_speedup"].get<double>(), "contiguous/ring/sm_overlap");
  CHECK(t.out.find(line) != std::string::npos);
}

TEST_CASE("emitted plans of ragged block layouts carry per-block sizes that replay verifies") {
  // Wan2.1-1.3B 480p: latent 21 x 30 x 52 = 32,760 video tokens, no text; the default tile order
  // leaves partial tiles at the borders (30 = 3*8 + 6, 52 = 6*8 + 4, 21 = 3*6 + 3), so blocks are
  // ragged and the plan must carry block_bytes = 2 * tokens * heads(12) * head_dim(128) * 2 B,
  // summing to the whole sequence's K and V: 2 * 32,760 * 12 * 128 * 2 = 201,277,440 B.
  const auto dir = std::filesystem::temp_directory_path() / "sparsp_ragged_plan";
  std::filesystem::remove_all(dir);
  auto r = sparsp(
      "simulate --model wan2.1-1.3b-480p --topology 2x-h200-nvlink --gpus 2 "
      "--policy dependency_aware/demand_direct/ce_decoupled --emit-plan " +
      dir.string());
  REQUIRE(r.code == 0);
  const auto plan_path =
      dir / "2x-h200-nvlink__dependency_aware_demand_direct_ce_decoupled.plan.json";
  const auto plan = nlohmann::json::parse(slurp(plan_path.string()));
  REQUIRE(plan.contains("block_bytes"));
  REQUIRE(plan["block_bytes"].size() == plan["num_blocks"].get<size_t>());
  double total = 0;
  for (const auto& b : plan["block_bytes"]) total += b.get<double>();
  CHECK(total == doctest::Approx(201277440.0));
  auto rp = sparsp("replay --plan " + plan_path.string() + " --backend host --json -o " +
                   (dir / "t.json").string());
  REQUIRE(rp.code == 0);
  const auto s = nlohmann::json::parse(rp.out);
  CHECK(s["blocks_verified"].get<double>() > 0);
  CHECK(s["bytes_verified"].get<double>() == s["bytes_moved"].get<double>());
}

TEST_CASE(
    "simulate --topology with fewer GPUs than the default study: all its GPUs, USP left out") {
  // The default study asks for 8 ranks; 2x-h200-nvlink-calibrated has 2. Degree 2 is used (a
  // note says so), and contiguous/usp/sm_overlap, which has no Ulysses x ring split of 2 ranks
  // (the default Ulysses degree needs P >= 4), is left out, with a line saying so, instead of
  // failing (the study runner does this for every study: StudyResult::skipped).
  auto r = sparsp("simulate --topology 2x-h200-nvlink-calibrated --steps 1 --layers 1");
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", 2 GPUs;") != std::string::npos);
  CHECK(r.out.find("\ncontiguous/usp") == std::string::npos);  // no table row
  CHECK(
      r.out.find("\nleft out: contiguous/usp/sm_overlap (no Ulysses x ring split of 2 ranks)\n") !=
      std::string::npos);
  CHECK(r.err.find("has 2 GPUs, the study asks for 8") != std::string::npos);
  // An explicit --gpus beyond the topology stays an error.
  CHECK(
      sparsp("simulate --topology 2x-h200-nvlink-calibrated --gpus 4 --steps 1 --layers 1").code ==
      2);
}
