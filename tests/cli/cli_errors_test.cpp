// Command-line errors through the real binary: every CLI11 parse/validation error is one line
// "sparsp: <subcommand>: <option>: <message>" on stderr with exit 2 (bounds written plainly, NaN
// and infinities refused), --help still exits 0, output paths that are folders exit 2, and a
// workload asking for more SMs than its GPU has is refused with the JSON pointer.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_support.hpp"
#include "sparsp/sweep.hpp"

namespace fs = std::filesystem;

namespace {

struct Run {
  int rc;
  std::string out;  ///< stdout or stderr, as asked
};

/// Runs `sparsp ARGS`; returns its stderr (`want_stderr`) or stdout, and its exit code.
Run run(const std::string& args, bool want_stderr = true) {
  const std::string cmd = std::string(SPARSP_CLI_PATH) + " " + args +
                          (want_stderr ? " 2>&1 >/dev/null" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kData = SPARSP_TEST_DATA_DIR;

}  // namespace

TEST_CASE("cli: CLI11 errors are one line 'sparsp: <subcommand>: <option>: <message>', exit 2") {
  // An existing file for the options whose file is checked before the option under test (the
  // process stops at the first error, before any file is read).
  const std::string cfg = kData + "/sweep/study.json";
  struct Case {
    std::string args, err;
  };
  const Case cases[] = {
      // Range validators name the bound as written, not 1.79769e+308 (DBL_MAX).
      {"replay --plan /x.json --timeout-s -1",
       "replay: --timeout-s: must be between 0 and 1e+07, got -1"},
      {"bogus",
       "unknown subcommand 'bogus' (one of: topo, pattern, sim, simulate, replay, validate, "
       "calibrate, sweep, tune, check-published; see sparsp --help)"},
      {"sweep -c " + cfg + " -o x.csv -j -1", "sweep: --threads: must be >= 0, got -1"},
      {"tune -c " + cfg + " --budget -1", "tune: --budget: must be >= 1, got -1"},
      {"tune -c " + cfg + " --top 0", "tune: --top: must be >= 1, got 0"},
      {"tune -c " + cfg + " --seed -2", "tune: --seed: must be >= 0, got -2"},
      {"topo import --format nvidia-smi x -o y --pcie-gen 9",
       "topo import: --pcie-gen: must be between 1 and 6, got 9"},
      // Conversion failures (2^33 does not fit an int; 1.5 is not an integer).
      {"simulate --gpus 99999999999",
       "simulate: --gpus: expected an integer (malformed or out of range), got '99999999999'"},
      {"simulate --gpus 1.5",
       "simulate: --gpus: expected an integer (malformed or out of range), got '1.5'"},
      {"simulate --density abc",
       "simulate: --density: expected a finite number between 0 and 1, got 'abc'"},
      // Files: a folder or a missing file where a file is meant.
      {"sweep --config /tmp -o x.csv", "sweep: --config: /tmp: is a directory, not a file"},
      {"sweep --config /nonexistent.json -o x.csv",
       "sweep: --config: /nonexistent.json: no such file"},
      // Values accepted (exit 0) before: NaN, negative counts, zero SMs.
      {"replay --plan /x.json --timeout-s nan",
       "replay: --timeout-s: expected a finite number between 0 and 1e+07, got nan"},
      {"replay --plan /x.json --timeout-s inf",
       "replay: --timeout-s: expected a finite number between 0 and 1e+07, got inf"},
      {"replay --plan /x.json --max-layers -1", "replay: --max-layers: must be >= 0, got -1"},
      {"replay --plan /x.json --comm-sms 0", "replay: --comm-sms: must be >= 1, got 0"},
      {"replay --plan /x.json --payload-scale 0",
       "replay: --payload-scale: must be between 1e-06 and 1, got 0"},
      {"validate --plan a --trace b --top -1", "validate: --top: must be >= 0, got -1"},
      {"sweep -c " + cfg + " -o x.csv --progress-interval nan",
       "sweep: --progress-interval: expected a finite number >= 0, got nan"},
      {"simulate --seed -1", "simulate: --seed: must be >= 0, got -1"},
      {"pattern stats --seed -5", "pattern stats: --seed: must be >= 0, got -5"},
      // calibrate --from: negative virtual ranks, and measuring options that do not apply.
      {"calibrate --from M --topology-out x.json --virtual-ranks -3",
       "calibrate: --virtual-ranks: must be between 0 and 64, got -3"},
      {"calibrate --iterations 0", "calibrate: --iterations: must be >= 1, got 0"},
      {"calibrate --max-bytes -1", "calibrate: --max-bytes: must be >= 1, got -1"},
      {"calibrate --concurrency-copies -1",
       "calibrate: --concurrency-copies: must be between 0 and 64, got -1"},
      // Other parse errors, same shape.
      {"replay --timeout-s 1", "replay: --plan: required but not given (see sparsp replay --help)"},
      {"replay --plan", "replay: --plan: expected a value (TEXT)"},
      {"simulate --bogus",
       "simulate: unexpected argument(s): --bogus (see sparsp simulate --help)"},
      {"topo", "topo: a subcommand is required"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const Run r = run(c.args);
    CHECK(r.rc == 2);
    CHECK(r.out == "sparsp: " + c.err + "\n");
  }
  // Measuring options with --from: refused, whichever side CLI11 reports them from.
  for (const std::string flag : {"--devices 0", "--iterations 3", "--max-bytes 1e6",
                                 "--concurrency-copies 2", "--no-nccl", "-o m.json", "--json"}) {
    CAPTURE(flag);
    const Run r = run("calibrate --from M --topology-out x.json " + flag);
    CHECK(r.rc == 2);
    const std::string name = flag == "-o m.json" ? "--output" : flag.substr(0, flag.find(' '));
    const bool named =
        r.out == "sparsp: calibrate: " + name + ": cannot be combined with --from\n" ||
        r.out == "sparsp: calibrate: --from: cannot be combined with " + name + "\n";
    CHECK_MESSAGE(named, r.out);
  }
}

TEST_CASE("cli: --help and --version still exit 0 on stdout, help shows plain defaults") {
  for (const std::string cmd : {"--help", "--version", "replay --help", "calibrate --help",
                                "topo import --help", "sweep --help"}) {
    CAPTURE(cmd);
    const Run r = run(cmd, false);
    CHECK(r.rc == 0);
    CHECK_FALSE(r.out.empty());
  }
  const std::string help = run("calibrate --help", false).out;
  CHECK(help.find("{false}") == std::string::npos);      // was "--no-nccl{false}"
  CHECK(help.find("2.68435e+08") == std::string::npos);  // was "--max-bytes FLOAT=2.68435e+08"
  // 256 MiB = 2^28 = 268435456 bytes, at least 1.
  CHECK(help.find("--max-bytes BYTES:[1,inf)=268435456") != std::string::npos);
  const std::string replay = run("replay --help", false).out;
  CHECK(replay.find("1.79769e+308") == std::string::npos);
  CHECK(replay.find("--payload-scale FLOAT:[1e-06,1]=1") != std::string::npos);
  // Subcommand descriptions start with a capital letter, like the others.
  const std::string pattern = run("pattern --help", false).out;
  CHECK(pattern.find("Generate a pattern") != std::string::npos);
  CHECK(run("--help", false).out.find("Attention-sparsity patterns") != std::string::npos);
}

TEST_CASE("cli: sim run --trace into a folder exits 2 naming the path, comm_sms <= sm_count") {
  const fs::path d = fs::temp_directory_path() / "sparsp_cli_errors_test";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string topo = kData + "/sim/switch_l40s.json";
  const Run r = run("sim run --topology " + topo + " --workload " + kData +
                    "/sim/one_flow_then_compute.json --trace " + d.string());
  CHECK(r.rc == 2);
  CHECK(r.out == "sparsp: " + d.string() + ": cannot write: is a folder\n");
  // An SM-driven transfer between the two L40S GPUs of switch_l40s.json (142 SMs each, NVIDIA
  // L40S datasheet, topology/gpu_models.cpp): 142 SMs is allowed, 143 is not.
  auto workload = [&](int sms) {
    const fs::path w = d / ("sms" + std::to_string(sms) + ".json");
    std::ofstream(w) << R"({"schema_version": 1, "transfers": [{"id": "t0", "src": "gpu0", )"
                     << R"("dst": "gpu1", "bytes": 1e6, "engine": "sm", "comm_sms": )" << sms
                     << "}], \"compute\": []}\n";
    return w.string();
  };
  const std::string ok = workload(142), bad = workload(143);
  CHECK(run("sim run --topology " + topo + " --workload " + ok).rc == 0);
  const Run b = run("sim run --topology " + topo + " --workload " + bad);
  CHECK(b.rc == 2);
  CHECK(b.out == "sparsp: " + bad + ":/transfers/0/comm_sms: 143 SMs but gpu0 has 142\n");
  fs::remove_all(d);
}

TEST_CASE("progress rates: 3 significant digits with SI suffixes") {
  // 25351327.1 layers/s (the rate of a first update after microseconds) reads 25.4M.
  CHECK(sparsp::study::format_rate(25351327.1) == "25.4M");
  CHECK(sparsp::study::format_rate(41.0) == "41.0");
  CHECK(sparsp::study::format_rate(999.0) == "999");
  CHECK(sparsp::study::format_rate(999.96) == "1.00k");  // rounds to 1000 -> next suffix
  CHECK(sparsp::study::format_rate(1200.0) == "1.20k");
  CHECK(sparsp::study::format_rate(3e9) == "3.00G");
  CHECK(sparsp::study::format_rate(0.5) == "0.50");
  CHECK(sparsp::study::format_rate(0.0) == "0.0");
  CHECK(sparsp::study::format_rate(-1.0) == "?");
  // A final update right after the start: no rate yet (under 0.2 s elapsed).
  std::ostringstream out;
  sparsp::study::ProgressMeter meter(sparsp::study::ProgressMode::lines, 10, 0, "layers",
                                     "simulate", 10.0, &out);
  meter.update(10, true);
  CHECK(out.str() == "simulate: 10/10 layers\n");
}

TEST_CASE("cli: an output path naming an input or another output is refused before any work") {
  const fs::path dir = fs::temp_directory_path() / "sparsp_cli_same_path";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string plan = (dir / "p.plan.json").string();
  fs::copy_file(fs::path(SPARSP_SOURCE_DIR) / "replay/results/x2/plans/wan14b-sta" /
                    "2x-h200-nvlink__dependency_aware_demand_direct_sync.plan.json",
                plan);
  auto size_before = fs::file_size(plan);
  // replay -o onto its own plan, written as another spelling of the same path.
  auto r =
      run("replay --plan " + plan + " --backend host -o " + (dir / "." / "p.plan.json").string());
  CHECK(r.rc == 2);
  CHECK(r.out.find("is also --plan; refusing to overwrite it") != std::string::npos);
  CHECK(fs::file_size(plan) == size_before);
  // -o and --perfetto the same file.
  r = run("replay --plan " + plan + " --backend host -o " + (dir / "t.json").string() +
          " --perfetto " + (dir / "t.json").string());
  CHECK(r.rc == 2);
  CHECK_FALSE(fs::exists(dir / "t.json"));
  // validate -o onto its trace; calibrate --from onto itself.
  r = run("validate --plan " + plan + " --trace " + plan + " -o " + plan);
  CHECK(r.rc == 2);
  r = run("calibrate --from " + plan + " --topology-out " + plan);
  CHECK(r.rc == 2);
  CHECK(fs::file_size(plan) == size_before);
}

TEST_CASE("pattern stats warns when a mask has no active pair") {
  // Break-it pass (2026-12-02): an all-zero mask printed density 0 and nothing else. A random
  // mask that keeps each pair with probability 0 has no active pair: the report is still exact
  // (exit 0), and stderr says why it is empty.
  const auto r = sparsp::test::run(
      "pattern stats --model hunyuanvideo-sta --kind random --density 0 --block 384 --max-steps 1");
  CHECK(r.rc == 0);
  CHECK(r.out.find("density          0\n") != std::string::npos);
  CHECK(r.err ==
        "sparsp: warning: the mask has no active (query block, KV block) pair (density 0): "
        "attention computes nothing\n");
  const auto d = sparsp::test::run(
      "pattern stats --model hunyuanvideo-sta --kind random --density 0.5 --block 384 --max-steps "
      "1");
  CHECK(d.rc == 0);
  CHECK(d.err.empty());
}

TEST_CASE("a preset name's control bytes are written as \\xNN") {
  // Break-it pass 2026-12-03: `--topology` with an ESC sequence reached the terminal raw.
  const auto r = sparsp::test::run("topo show \"$(printf 'x\\033[31my')\"");
  CHECK(r.rc == 2);
  CHECK(r.err.rfind("sparsp: x\\x1b[31my: no such preset (presets: ", 0) == 0);
  CHECK(r.err.find('\x1b') == std::string::npos);
}

TEST_CASE("words that reach a message outside input_error are escaped too") {
  // Break-it pass 2026-12-04: an unknown subcommand, a --progress value (CLI11's own message) and
  // a --baseline value printed ESC, U+2028 (e2 80 a8) and U+202E (e2 80 ae) raw.
  const std::string x = "\"$(printf 'Z\\033[31m\\342\\200\\250\\342\\200\\256')\"";
  const auto sub = sparsp::test::run(x);
  CHECK(sub.rc == 2);
  CHECK(sub.err.rfind("sparsp: unknown subcommand 'Z\\x1b[31m\\u2028\\u202e' (one of: ", 0) == 0);
  const auto menu = sparsp::test::run("simulate --progress " + x);
  CHECK(menu.rc == 2);
  CHECK(menu.err ==
        "sparsp: simulate: --progress: Z\\x1b[31m\\u2028\\u202e not in {auto,bar,lines,off}\n");
  const auto base = sparsp::test::run(
      "simulate --steps 1 --layers 1 --policy contiguous/ring/sm_overlap --baseline " + x);
  CHECK(base.rc == 2);
  CHECK(base.err ==
        "sparsp: <command line>:--baseline: baseline 'Z\\x1b[31m\\u2028\\u202e' is not one of the "
        "policies\n");
}
