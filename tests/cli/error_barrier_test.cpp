// The top-level error barrier and the abort cases of the break-it pass (issue 18, defects 1 and
// 2): each used to end the process with SIGABRT (an uncaught C++ exception, exit 134). Through
// the real binary, each now gives one line on stderr, naming the command and what failed, and
// exit 2 (input) or 0 (where the input is fine and only the environment was odd).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_support.hpp"

namespace fs = std::filesystem;

namespace {

using namespace sparsp::test;  // NOLINT: run, Run, slurp, lines

std::filesystem::path temp_dir(const std::string& name) {
  return sparsp::test::fresh_dir("sparsp_barrier_" + name);
}

// One step, one layer, two points, an inline topology (so the evaluator writes a scratch file).
const char* kSweep = R"({"schema_version": 1,
  "study": {"schema_version": 1, "topology": {"schema_version": 1, "name": "t2",
              "template": {"sockets": 1, "switches_per_socket": 1, "gpus_per_switch": 2, "gpu_model": "NVIDIA L40S",
                           "pcie_gen": 4}},
            "model": "hunyuanvideo-sta",
            "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
            "steps": [0], "layers": [0], "policies": ["contiguous/ring/sm_overlap"]},
  "axes": [{"name": "window", "values": [[3, 3, 3], [1, 3, 3]]}]})";

}  // namespace

TEST_CASE("TMPDIR naming no folder: sweep and tune fall back to /tmp (was SIGABRT)") {
  const fs::path d = temp_dir("tmpdir");
  std::ofstream(d / "sweep.json") << kSweep;
  std::ofstream(d / "afile") << "x";
  fs::create_directory_symlink(d / "loop", d / "loop");  // a symlink loop
  for (const std::string& tmpdir :
       {std::string("/nonexistent"), (d / "afile").string(), (d / "loop").string()}) {
    CAPTURE(tmpdir);
    const fs::path out = d / "o.csv";
    fs::remove(out);
    const Run r = run(
        "sweep -c " + (d / "sweep.json").string() + " -o " + out.string() + " -j 1 --progress off",
        "TMPDIR=" + tmpdir);
    CHECK(r.rc == 0);
    CHECK(r.err == "");
    // Header + two points of one row each, both evaluated (not skipped).
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(lines(ss.str()) == 3);
    CHECK(ss.str().find(",skipped,") == std::string::npos);
  }
}

TEST_CASE("TMPDIR naming no folder: tune falls back to /tmp too") {
  const fs::path d = temp_dir("tmpdir_tune");
  std::string tune = kSweep;
  tune.replace(tune.find(R"("axes")"), std::string::npos,
               R"("parameters": [{"name": "chunk_bytes", "values": [1048576, 4194304]}]})");
  std::ofstream(d / "tune.json") << tune;
  const Run r = run("tune -c " + (d / "tune.json").string() + " -o " + (d / "p.json").string(),
                    "TMPDIR=/nonexistent");
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  CHECK(fs::exists(d / "p.json"));
}

TEST_CASE(
    "--block 2 is refused before allocation with the estimate and the option (was bad_alloc)") {
  const Run r =
      run("simulate --model hunyuanvideo-720p --pattern dense --block 2 --topology "
          "8x-l40s-gen4-4switch --policy contiguous/ring/sm_overlap --steps 1 --layers 1");
  CHECK(r.rc == 2);
  CHECK(lines(r.err) == 1);
  // HunyuanVideo 720p: 30*45*80 = 108000 video tokens (+ text) / 2 -> ~54k blocks;
  // 10 B per block pair x 54k^2 = 29 GB = 27 GiB > 16 GiB.
  CHECK(r.err.find("<command line>:--block: block 2 gives ") != std::string::npos);
  CHECK(r.err.find("GiB") != std::string::npos);
  CHECK(r.err.find("--block") != std::string::npos);
  CHECK(r.err.find("--max-memory-gib") != std::string::npos);
}

TEST_CASE("non-regular input files are read to a bound (was bad_alloc after reading /dev/zero)") {
  const fs::path d = temp_dir("devzero");
  for (const std::string& args :
       {std::string("simulate --config /dev/zero"), std::string("topo show /dev/zero"),
        std::string("topo show /dev/urandom"), "sweep -c /dev/zero -o " + (d / "x.csv").string()}) {
    CAPTURE(args);
    const Run r = run(args);
    CHECK(r.rc == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("not a regular file, and longer than 64 MiB") != std::string::npos);
  }
}

TEST_CASE("sweep -j 100000 runs with a bounded number of threads (was std::system_error)") {
  const fs::path d = temp_dir("threads");
  std::ofstream(d / "sweep.json") << kSweep;
  const Run r = run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "o.csv").string() +
                    " -j 100000 --progress off");
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  CHECK(fs::exists(d / "o.csv"));
}

TEST_CASE(
    "a 300-character output name or a symlink loop: one line, exit 2 (was filesystem_error)") {
  const fs::path d = temp_dir("paths");
  std::ofstream(d / "sweep.json") << kSweep;
  fs::create_directory_symlink(d / "loop1", d / "loop2");
  fs::create_directory_symlink(d / "loop2", d / "loop1");
  for (const std::string& out :
       {(d / (std::string(300, 'a') + ".csv")).string(), (d / "loop1" / "out.csv").string()}) {
    CAPTURE(out);
    const Run r =
        run("sweep -c " + (d / "sweep.json").string() + " -o " + out + " -j 1 --progress off");
    CHECK(r.rc == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.rfind("sparsp: ", 0) == 0);
    CHECK(r.err.find(out) != std::string::npos);
  }
}
