// `sparsp sweep` through the real binary: every row equals the corresponding individual
// `sparsp simulate --json` run; the file does not depend on the thread count; bad input exits 2.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sparsp/sweep.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sparsp_sweep_cli_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

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

// Two topologies x two STA windows, one step and one layer each (fast), two policies.
const char* kSweep = R"({
  "schema_version": 1,
  "study": {"schema_version": 1, "topologies": ["8x-l40s-gen4-4switch"], "model": "hunyuanvideo-sta",
            "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
            "gpus": 4, "steps": [0], "layers": [0],
            "policies": ["contiguous/ring/sm_overlap", "dependency_aware/demand_direct/ce_decoupled"]},
  "axes": [
    {"name": "topology", "values": ["8x-l40s-gen4-4switch", "8x-rtx4090-epyc-nop2p"]},
    {"name": "window", "values": [[3, 3, 3], [1, 3, 5]]}
  ]})";

}  // namespace

TEST_CASE("sweep rows equal the individual simulate runs") {
  const fs::path d = temp_dir("rows");
  std::ofstream(d / "sweep.json") << kSweep;
  REQUIRE(run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "r.jsonl").string() +
                  " -j 2 --progress off",
              d / "out.txt", d / "err.txt") == 0);
  std::vector<json> rows;
  std::istringstream lines(slurp(d / "r.jsonl"));
  for (std::string line; std::getline(lines, line);) rows.push_back(json::parse(line));
  REQUIRE(rows.size() == 8);  // 4 points x 2 policies

  auto spec = sparsp::study::load_sweep((d / "sweep.json").string());
  REQUIRE(spec.ok());
  for (int64_t k = 0; k < 4; ++k) {
    auto point = sparsp::study::make_point(*spec, k);
    REQUIRE(point.ok());
    const fs::path study = d / ("point" + std::to_string(k) + ".json");
    std::ofstream(study) << point->study_json;
    REQUIRE(run("simulate --config " + study.string() + " --json", d / "sim.json", d / "err.txt") ==
            0);
    const json sim = json::parse(slurp(d / "sim.json"));
    REQUIRE(sim["policies"].size() == 2);
    for (size_t p = 0; p < 2; ++p) {
      const json& row = rows[static_cast<size_t>(k) * 2 + p];
      const json& ref = sim["policies"][p];
      CAPTURE(k);
      CAPTURE(p);
      CHECK(row["point"] == k);
      CHECK(row["status"] == "ok");
      // The axis "topology" keeps its name; the metric column becomes "result.topology".
      CHECK(row["topology"] == ref["topology"]);
      CHECK(row["result.topology"] == ref["topology"]);
      CHECK(row["policy"] == ref["name"]);
      for (const char* m :
           {"volume_bytes", "control_bytes", "attention_time_s", "step_time_s", "e2e_time_s",
            "lower_bound_s", "speedup", "compute_imbalance", "busiest_utilization"}) {
        CAPTURE(m);
        // simulate --json prints 9 significant digits; the sweep keeps full precision.
        const double a = row[m].get<double>(), b = ref[m].get<double>();
        CHECK(std::abs(a - b) <= 1e-8 * std::max(1.0, std::abs(b)) + 1e-8 * std::abs(b));
      }
      CHECK(row["busiest_link"] == ref["busiest_link"]);
    }
  }
  // The two topologies differ (P2P vs host-staged), so rows are not trivially equal.
  CHECK(rows[0]["e2e_time_s"] != rows[4]["e2e_time_s"]);

  // One thread gives the same bytes.
  REQUIRE(run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "r1.jsonl").string() +
                  " -j 1 --progress off",
              d / "out.txt", d / "err.txt") == 0);
  CHECK(slurp(d / "r1.jsonl") == slurp(d / "r.jsonl"));
}

TEST_CASE("sweep: bad input exits 2 with the JSON pointer, invalid points are skipped") {
  const fs::path d = temp_dir("bad");
  std::ofstream(d / "bad.json") << R"({"study": {"schema_version": 1, "topologies": ["x"],
      "pattern": {"kind": "sta"}, "policies": ["contiguous/ring/sync"]},
      "axes": [{"name": "gpu_per_switch", "values": [2]}]})";
  CHECK(run("sweep -c " + (d / "bad.json").string() + " -o " + (d / "r.csv").string(),
            d / "out.txt", d / "err.txt") == 2);
  CHECK(slurp(d / "err.txt")
            .rfind("sparsp: " + (d / "bad.json").string() +
                       ":/axes/0/name: unknown axis \"gpu_per_switch\"",
                   0) == 0);
  CHECK_FALSE(fs::exists(d / "r.csv"));

  // Ulysses over 7 GPUs: HunyuanVideo's 24 heads do not divide by 7 -> that point is skipped.
  std::ofstream(d / "skip.json") << R"({"study": {"schema_version": 1,
      "topologies": ["8x-l40s-gen4-4switch"], "model": "hunyuanvideo-sta",
      "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
      "steps": [0], "layers": [0], "policies": ["head_parallel/ulysses/sync"]},
      "axes": [{"name": "gpus", "values": [8, 7]}]})";
  REQUIRE(run("sweep -c " + (d / "skip.json").string() + " -o " + (d / "s.csv").string() +
                  " --progress off",
              d / "out.txt", d / "err.txt") == 0);
  const std::string csv = slurp(d / "s.csv");
  CHECK(csv.find("\n0,8,ok,,") != std::string::npos);
  CHECK(csv.find("\n1,7,skipped,") != std::string::npos);
  CHECK(slurp(d / "out.txt").find("2 points (0 resumed, 2 evaluated, 1 skipped)") !=
        std::string::npos);
}

TEST_CASE("sweep killed with SIGKILL mid-way resumes to the uninterrupted file") {
  const fs::path d = temp_dir("kill");
  // 3 x 8 = 24 points of one step and one layer; slow enough to be killed part-way.
  std::ofstream(d / "sweep.json") << R"({"study": {"schema_version": 1,
      "topologies": ["8x-l40s-gen4-4switch"], "model": "hunyuanvideo-sta",
      "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
      "gpus": 8, "steps": [0], "layers": [0],
      "policies": ["contiguous/ring/sm_overlap", "contiguous/usp/sm_overlap",
                   "balanced/demand_direct/ce_decoupled"]},
      "axes": [{"name": "pcie_gen", "values": [3, 4, 5]},
               {"name": "window", "values": [[1,1,1],[1,3,3],[3,3,3],[3,5,5],[1,5,5],[5,5,5],[3,1,3],[1,1,5]]}]})";
  const std::string sweep = (d / "sweep.json").string();
  REQUIRE(run("sweep -c " + sweep + " -o " + (d / "ref.csv").string() + " -j 2 --progress off",
              d / "out.txt", d / "err.txt") == 0);

  const fs::path partial = d / "r.csv.partial";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string out = (d / "r.csv").string();
    execl(SPARSP_CLI_PATH, SPARSP_CLI_PATH, "sweep", "-c", sweep.c_str(), "-o", out.c_str(), "-j",
          "1", "--progress", "off", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it once a few rows are on disk (header + >= 4 rows), or give up after 60 s.
  bool killed = false;
  for (int i = 0; i < 6000 && !killed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::string text = fs::exists(partial) ? slurp(partial) : "";
    if (std::count(text.begin(), text.end(), '\n') >= 5) {
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(killed);
  REQUIRE(WIFSIGNALED(status));
  CHECK_FALSE(fs::exists(d / "r.csv"));  // never passed off as whole
  const std::string before = slurp(partial);
  CHECK(slurp(d / "ref.csv").rfind(before.substr(0, before.rfind('\n') + 1), 0) == 0);
  REQUIRE(run("sweep -c " + sweep + " -o " + (d / "r.csv").string() + " -j 2 --progress off",
              d / "out.txt", d / "err.txt") == 0);
  CHECK(slurp(d / "out.txt").find("24 points (") != std::string::npos);
  CHECK(slurp(d / "out.txt").find("0 resumed") == std::string::npos);  // something was kept
  CHECK(slurp(d / "r.csv") == slurp(d / "ref.csv"));
}

TEST_CASE("sweep: a finished CSV whose field holds a quoted newline resumes as complete") {
  // The study name (an axis over /name) is a CSV field; "two\nlines" is written quoted over two
  // lines. Resuming the finished output used to read the second line as a row (exit 2).
  const fs::path d = temp_dir("quoted_newline");
  std::ofstream(d / "s.json") << R"({
  "schema_version": 1,
  "study": {"schema_version": 1, "topology": "8x-l40s-gen4-4switch", "model": "hunyuanvideo-sta",
            "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
            "gpus": 4, "steps": [0], "layers": [0], "policies": ["contiguous/ring/sm_overlap"]},
  "axes": [{"name": "label", "path": "/name", "values": ["plain", "two\nlines", "last"]}]})";
  const std::string args =
      "sweep --config " + (d / "s.json").string() + " -o " + (d / "out.csv").string();
  REQUIRE(run(args, d / "o1", d / "e1") == 0);
  const std::string first = slurp(d / "out.csv");
  CHECK(first.find("\"two\nlines\"") != std::string::npos);
  CHECK(run(args, d / "o2", d / "e2") == 0);
  CHECK(slurp(d / "e2").find("error") == std::string::npos);
  CHECK(slurp(d / "out.csv") == first);
  // A .partial cut inside the quoted field: the cut point is run again, the file ends whole.
  const size_t cut = first.find("two\n") + 4;
  std::filesystem::remove(d / "out.csv");
  std::ofstream(d / "out.csv.partial", std::ios::binary) << first.substr(0, cut);
  CHECK(run(args, d / "o3", d / "e3") == 0);
  CHECK(slurp(d / "out.csv") == first);
}

TEST_CASE("tune writes a policy and a study that simulate accepts, with the reported time") {
  const fs::path d = temp_dir("tune");
  std::ofstream(d / "tune.json") << R"({"schema_version": 1,
    "study": {"schema_version": 1, "topologies": ["8x-rtx4090-epyc-nop2p"], "model": "hunyuanvideo-sta",
              "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
              "gpus": 8, "steps": [0], "layers": [0],
              "policies": ["dependency_aware/demand_direct/ce_decoupled:tolerance=1.03"]},
    "parameters": [{"name": "balance_tolerance", "values": [1.01, 1.03, 1.2]},
                   {"name": "chunk_bytes", "values": [1048576, 4194304]}],
    "budget": 100, "output": "policy.json", "study_output": "study.json"})";
  REQUIRE(run("tune -c " + (d / "tune.json").string() + " --json", d / "out.json", d / "err.txt") ==
          0);
  const json out = json::parse(slurp(d / "out.json"));
  CHECK(out["method"] == "exhaustive");  // 3 x 2 = 6 <= budget 100
  CHECK(out["evaluations"] == 6);
  CHECK(out["top"].size() == 6);
  const json policy = json::parse(slurp(d / "policy.json"));
  CHECK(policy["placement"] == "dependency_aware");
  CHECK(policy["params"]["tolerance"] == out["best"]["config"]["balance_tolerance"]);
  CHECK(policy["params"]["chunk_bytes"] == out["best"]["config"]["chunk_bytes"]);
  // The tuned study re-simulated gives the best objective (simulate prints 9 digits).
  REQUIRE(run("simulate --config " + (d / "study.json").string() + " --json", d / "sim.json",
              d / "err.txt") == 0);
  const double e2e = json::parse(slurp(d / "sim.json"))["policies"][0]["e2e_time_s"].get<double>();
  CHECK(e2e == doctest::Approx(out["best"]["value"].get<double>()).epsilon(1e-8));
  // The default (tolerance 1.03 from the policy string, no chunk) is at least as slow as the best.
  CHECK(out["default"]["value"].get<double>() >= out["best"]["value"].get<double>());
  CHECK(out["margin"].get<double>() >= 0);
}

TEST_CASE("tune refuses an unwritable output before searching") {
  const fs::path d = temp_dir("tune_unwritable");
  // Every point is invalid (Ulysses over 5 or 7 GPUs: 24 heads do not divide), so a search
  // that ran would end in "no valid configuration" (exit 2, every failure on the input); the
  // output check must come first (exit 2 with the output's message).
  std::ofstream(d / "tune.json") << R"({"schema_version": 1,
    "study": {"schema_version": 1, "topologies": ["8x-l40s-gen4-4switch"], "model": "hunyuanvideo-sta",
              "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
              "gpus": 7, "steps": [0], "layers": [0],
              "policies": [{"placement": "head_parallel", "scheme": "ulysses", "runtime": "sync"}]},
    "parameters": [{"name": "gpus", "values": [5, 7]}], "budget": 10})";
  const std::string cfg = (d / "tune.json").string();
  // Sanity: with a writable output the search runs and finds nothing valid.
  CHECK(run("tune -c " + cfg + " -o " + (d / "p.json").string(), d / "out.txt", d / "err.txt") ==
        2);
  CHECK(slurp(d / "err.txt")
            .find(": no valid configuration among 2 evaluated, each failed on its "
                  "input (first: ") != std::string::npos);
  const std::string missing = (d / "no" / "such" / "p.json").string();
  CHECK(run("tune -c " + cfg + " -o " + missing, d / "out.txt", d / "err.txt") == 2);
  CHECK(slurp(d / "err.txt") == "sparsp: " + missing + ": cannot write: folder " +
                                    (d / "no" / "such").string() + " does not exist\n");
  // The study output is checked too; a folder is not a file.
  CHECK(run("tune -c " + cfg + " -o " + (d / "p.json").string() + " --study-output " + d.string(),
            d / "out.txt", d / "err.txt") == 2);
  CHECK(slurp(d / "err.txt") == "sparsp: " + d.string() + ": cannot write: is a folder\n");
  CHECK_FALSE(fs::exists(d / "p.json.tmp"));  // the write check leaves nothing behind
}

TEST_CASE("sweep: a policy left out at a point keeps its row, status skipped, with the reason") {
  // gpus 3: USP has no Ulysses x ring split below 4 ranks (default degree 1), so it is left out;
  // gpus 4: the default degree is 4/2 = 2 (divides 4 and the 24 heads) and it runs.
  const fs::path d = temp_dir("left_out");
  std::ofstream(d / "sweep.json") << R"({
  "schema_version": 1,
  "study": {"schema_version": 1, "topologies": ["8x-l40s-gen4-4switch"], "model": "hunyuanvideo-sta",
            "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
            "gpus": 4, "steps": [0], "layers": [0],
            "policies": ["contiguous/ring/sm_overlap", "contiguous/usp/sm_overlap"]},
  "axes": [{"name": "gpus", "values": [3, 4]}]})";
  REQUIRE(run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "r.jsonl").string() +
                  " -j 1 --progress off",
              d / "out.txt", d / "err.txt") == 0);
  std::vector<json> rows;
  std::istringstream lines(slurp(d / "r.jsonl"));
  for (std::string line; std::getline(lines, line);) rows.push_back(json::parse(line));
  REQUIRE(rows.size() == 4);  // 2 points x 2 policies, in study order
  CHECK(rows[0]["status"] == "ok");
  CHECK(rows[1]["status"] == "skipped");
  CHECK(rows[1]["reason"] == "left out: no Ulysses x ring split of 3 ranks");
  CHECK(rows[1]["policy"] == "contiguous/usp/sm_overlap");
  CHECK(rows[1]["topology"] == "8x-l40s-gen4-4switch");
  CHECK(rows[1]["e2e_time_s"].is_null());
  CHECK(rows[2]["status"] == "ok");
  CHECK(rows[3]["status"] == "ok");
  CHECK(rows[3]["scheme"] == "usp");
  CHECK(rows[3]["e2e_time_s"].get<double>() > 0);
  // CSV: the same row with empty metric cells.
  REQUIRE(run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "r.csv").string() +
                  " -j 1 --progress off",
              d / "out.txt", d / "err.txt") == 0);
  const std::string csv = slurp(d / "r.csv");
  CHECK(csv.find(",skipped,left out: no Ulysses x ring split of 3 ranks,8x-l40s-gen4-4switch,"
                 "contiguous/usp/sm_overlap,contiguous,usp,sm_overlap,") != std::string::npos);
}
