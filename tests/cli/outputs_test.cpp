// Outputs (issue 18, remaining items of the break-it pass): standard output write errors are
// errors; an output that is a device, a FIFO or a symbolic link is written through, never
// replaced by a regular file; `topo import -o -` writes stdout; a sweep of skipped points only is
// not a success.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.hpp"

namespace fs = std::filesystem;

namespace {

using namespace sparsp::test;  // NOLINT: run, Run, slurp, lines

const std::string kData = SPARSP_TEST_DATA_DIR;
const std::string kSmiText = kData + "/topology/cases/2x-gen3-switch-no-p2p/topo.txt";

}  // namespace

TEST_CASE("a write error on standard output is exit 1 with a message, not exit 0") {
  // /dev/full takes no byte (ENOSPC); before, `sparsp ... > /dev/full` exited 0.
  const fs::path err = fresh_dir("sparsp_outputs_full") / "err";
  for (const char* args :
       {"topo show 2x-h200-nvlink", "topo presets", "topo models --json", "simulate --list"}) {
    CAPTURE(args);
    const std::string cmd =
        std::string(SPARSP_CLI_PATH) + " " + args + " >/dev/full 2>" + err.string();
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    const std::string msg = slurp(err);
    CHECK(msg.find(": cannot write standard output: ") != std::string::npos);
    CHECK(lines(msg) == 1);
  }
  const std::string cmd =
      std::string(SPARSP_CLI_PATH) + " topo show 2x-h200-nvlink >/dev/full 2>" + err.string();
  REQUIRE(std::system(cmd.c_str()) != 0);
  CHECK(slurp(err).rfind("sparsp: topo show: cannot write standard output: ", 0) == 0);
}

TEST_CASE("an output that is a device is written in place, never replaced") {
  // Before, `tune -o /dev/full` renamed its temporary file over /dev/full. Only character
  // devices every machine has: /dev/null takes everything, /dev/full nothing.
  Run r = run("topo import --format nvidia-smi " + kSmiText + " -o /dev/null");
  CHECK(r.rc == 0);
  r = run("topo import --format nvidia-smi " + kSmiText + " -o /dev/full");
  CHECK(r.rc == 1);
  CHECK(r.err == "sparsp: /dev/full: write failed: No space left on device\n");
  struct stat st {};
  REQUIRE(::stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("an output that is a symbolic link writes its target, the link stays") {
  const fs::path d = fresh_dir("sparsp_outputs_link");
  fs::create_directory(d / "sub");
  fs::create_symlink("sub/real.json", d / "link.json");  // dangling: names the file to create
  Run r = run("topo import --format nvidia-smi " + kSmiText + " -o " + (d / "link.json").string());
  REQUIRE(r.rc == 0);
  CHECK(fs::is_symlink(d / "link.json"));
  CHECK(fs::is_regular_file(d / "sub/real.json"));
  CHECK(slurp(d / "sub/real.json").find("\"schema_version\"") != std::string::npos);
  // Again, now that the target exists (replaced atomically, the link kept).
  r = run("topo import --format nvidia-smi " + kSmiText + " -o " + (d / "link.json").string());
  REQUIRE(r.rc == 0);
  CHECK(fs::is_symlink(d / "link.json"));
  // A loop of links is refused with one line.
  fs::create_symlink("loop2", d / "loop1");
  fs::create_symlink("loop1", d / "loop2");
  r = run("topo import --format nvidia-smi " + kSmiText + " -o " + (d / "loop1").string());
  CHECK(r.rc == 2);
  CHECK(r.err == "sparsp: " + (d / "loop1").string() +
                     ": cannot write: too many levels of symbolic links\n");
  // A FIFO is written in place (a reader takes it whole).
  const fs::path fifo = d / "pipe.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string cmd = "cat " + fifo.string() + " >" + (d / "from-pipe").string() + " & " +
                          SPARSP_CLI_PATH + " topo import --format nvidia-smi " + kSmiText +
                          " -o " + fifo.string() + " 2>/dev/null; rc=$?; wait; exit $rc";
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::is_fifo(fifo));
  CHECK(slurp(d / "from-pipe") == slurp(d / "sub/real.json"));
  // A sweep cannot keep its resumable .partial beside a device: refused before any work.
  fs::create_symlink("/dev/null", d / "null.csv");
  r = run("sweep -c " + kData + "/sweep/gps.json -o " + (d / "null.csv").string() +
          " --progress off");
  CHECK(r.rc == 2);
  CHECK(r.err.rfind(
            "sparsp: " + (d / "null.csv").string() + ": cannot write a sweep to a device or pipe",
            0) == 0);
  CHECK(fs::is_symlink(d / "null.csv"));
}

TEST_CASE("topo import -o - writes the topology JSON to standard output") {
  Run r = run("topo import --format nvidia-smi " + kSmiText + " -o -");
  REQUIRE(r.rc == 0);
  CHECK(r.out.rfind("{\n  \"schema_version\": 1,", 0) == 0);
  CHECK(!fs::exists("-"));
  const fs::path d = fresh_dir("sparsp_outputs_dash");
  REQUIRE(
      run("topo import --format nvidia-smi " + kSmiText + " -o " + (d / "t.json").string()).rc ==
      0);
  CHECK(r.out == slurp(d / "t.json"));
}

TEST_CASE("a sweep whose every point is skipped exits 1 saying so") {
  const fs::path d = fresh_dir("sparsp_outputs_skipped");
  // USP cannot split 2 ranks into Ulysses x ring (both >= 2): both points are skipped. (A value
  // the documents refuse, such as pcie_gen 4.5, is an error before any output: bad-corpus case
  // bad-axis-value.sweep.json.)
  std::ofstream(d / "sweep.json") << small_sweep_json("[4, 5]", "contiguous/usp/sm_overlap");
  const std::string out = (d / "r.csv").string();
  Run r = run("sweep -c " + (d / "sweep.json").string() + " -o " + out + " -j 1 --progress off");
  CHECK(r.rc == 1);
  CHECK(r.err == "sparsp: sweep: every one of the 2 points was skipped (see the reason column in " +
                     out + ")\n");
  CHECK(lines(slurp(out)) == 3);  // the reasons are still written: header + 2 skipped rows
}

TEST_CASE("sweep and tune take --max-memory-gib, as simulate does") {
  // Block 384 on HunyuanVideo-STA: 301 blocks, 10 B per block pair -> 0.9 MB, over a limit of
  // 0.0001 GiB (107 KB), under the default 16 GiB.
  const fs::path d = fresh_dir("sparsp_outputs_memory");
  const std::string study = small_study_json();
  std::ofstream(d / "sweep.json") << small_sweep_json("[4]");
  const std::string sweep = "sweep -c " + (d / "sweep.json").string() + " -j 1 --progress off -o ";
  Run r = run(sweep + (d / "a.csv").string());
  CHECK(r.rc == 0);
  r = run(sweep + (d / "b.csv").string() + " --max-memory-gib 0.0001");
  CHECK(r.rc == 1);  // its only point skipped
  CHECK(slurp(d / "b.csv").find("block 384 gives 301 blocks") != std::string::npos);
  std::ofstream(d / "tune.json")
      << R"({"schema_version": 1, "study": )" << study
      << R"(, "parameters": [{"name": "chunk_bytes", "values": [1048576]}],
      "objective": "e2e_time_s"})";
  r = run("tune -c " + (d / "tune.json").string() + " --max-memory-gib 0.0001");
  // Every point refused on its input (the memory estimate over the limit given): exit 2.
  CHECK(r.rc == 2);
  CHECK(r.err.find("no valid configuration among 1 evaluated, each failed on its input") !=
        std::string::npos);
  CHECK(r.err.find("block 384 gives 301 blocks") != std::string::npos);
  CHECK(run("tune -c " + (d / "tune.json").string()).rc == 0);
}

TEST_CASE("a sweep writes no scratch files: nothing is left behind by SIGINT or SIGKILL") {
  // Inline topology documents were files in $TMPDIR/sparsp-sweep-<pid>-N, left behind when a
  // signal ended the sweep. They are in-memory files now, so a TMPDIR where no folder can be
  // made (/proc) does not matter: before, every point was skipped ("cannot create the scratch
  // folder").
  const fs::path d = fresh_dir("sparsp_outputs_scratch");
  std::ofstream(d / "sweep.json") << small_sweep_json("[4, 5]");
  Run r = run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "r.csv").string() +
                  " -j 1 --progress off",
              "TMPDIR=/proc");
  CHECK(r.rc == 0);
  const std::string out = slurp(d / "r.csv");
  CHECK(out.find(",skipped,") == std::string::npos);
  CHECK(lines(out) == 3);
}

TEST_CASE("an empty output folder name and a folder given as a Q/K dump are one-line errors") {
  // --trace "" ran without a trace and said nothing.
  Run r = run("simulate --topology 2x-h200-nvlink --trace \"\"");
  CHECK(r.rc == 2);
  CHECK(r.err == "sparsp: simulate: --trace: expected a folder, got ''\n");
  r = run("simulate --topology 2x-h200-nvlink --emit-plan \"\"");
  CHECK(r.rc == 2);
  CHECK(r.err == "sparsp: simulate: --emit-plan: expected a folder, got ''\n");
  // A folder as --q: "not a .npy file (bad magic)" before; now the words every input uses.
  const fs::path d = fresh_dir("sparsp_outputs_qdir");
  r = run("pattern stats --model hunyuanvideo-sta --kind topk --q " + d.string() + " --k " +
          d.string());
  CHECK(r.rc == 2);
  CHECK(r.err == "sparsp: " + d.string() + ": is a directory, not a file\n");
}

TEST_CASE("simulate --csv quotes a topology name holding a comma or a quote") {
  // The name comes from the topology file; it was written as is, so the row had a column too
  // many.
  const fs::path d = fresh_dir("sparsp_outputs_csvname");
  std::ofstream(d / "t.json") << R"({"schema_version": 1, "name": "lab \"A\", rack 2",
    "template": {"sockets": 1, "switches_per_socket": 1, "gpus_per_switch": 2,
                 "gpu_model": "NVIDIA L40S", "pcie_gen": 4}})";
  Run r = run("simulate --topology " + (d / "t.json").string() +
              " --policy contiguous/ring/sm_overlap --steps 1 --layers 1 --csv");
  REQUIRE(r.rc == 0);
  const size_t row = r.out.find('\n') + 1;
  CHECK(r.out.substr(row).rfind("\"lab \"\"A\"\", rack 2\",\"contiguous/ring/sm_overlap\",", 0) ==
        0);
}

TEST_CASE("simulate --json: busiest_link is null where no link carries anything, not \"\"") {
  // One GPU: no transfers, no busiest link; the table shows '-'.
  Run r =
      run("simulate --topology 2x-h200-nvlink --gpus 1 --steps 1 --layers 1 --policy "
          "contiguous/ring/sm_overlap --json");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("\"busiest_link\": null") != std::string::npos);
  CHECK(r.out.find("\"busiest_link\": \"\"") == std::string::npos);
}

TEST_CASE("volume_bytes is the exact byte count in simulate JSON/CSV and sweep CSV (break-it D1)") {
  // HunyuanVideo-STA dense, ring over 2 GPUs: N = 30*48*80 + 256 = 115456 tokens; each rank's
  // K and V shard (N/2 tokens x 24 heads x 128 x 2 B, twice) goes to the other rank once per
  // layer -> N x 24 x 128 x 4 B = 1418723328 B per layer, x 60 layers = 85123399680 B per step.
  // Through 9 significant digits it read 85123399700 (JSON), 8.51233997e+10 (CSV) and
  // 85123399680.0 (sweep).
  const std::string args =
      "simulate --topology 2x-h200-nvlink --gpus 2 --policy contiguous/ring/sync --pattern dense "
      "--steps 1 --layers 1";
  Run r = run(args + " --json");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("\"volume_bytes\": 85123399680,") != std::string::npos);
  r = run(args + " --csv");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find(",contiguous,ring,sync,85123399680,0,") != std::string::npos);
  const fs::path d = fresh_dir("sparsp_outputs_bytes");
  std::ofstream(d / "sweep.json") << R"({"schema_version": 1, "study": {"schema_version": 1,
      "topology": "2x-h200-nvlink", "model": "hunyuanvideo-sta", "pattern": {"kind": "dense"},
      "gpus": 2, "steps": [0], "layers": [0], "policies": ["contiguous/ring/sync"]},
      "axes": [{"name": "gpus", "path": "/gpus", "values": [2]}]})";
  r = run("sweep -c " + (d / "sweep.json").string() + " -o " + (d / "r.csv").string() +
          " -j 1 --progress off");
  REQUIRE(r.rc == 0);
  CHECK(slurp(d / "r.csv").find(",contiguous,ring,sync,{},85123399680,0,") != std::string::npos);
}

TEST_CASE("calibrate --from says what it wrote, and the file loads") {
  // Break-it pass of 2026-12-02: a successful `calibrate --from` printed nothing.
  const fs::path d = fresh_dir("sparsp_calibrate_from");
  const std::string machine = std::string(SPARSP_SOURCE_DIR) + "/replay/results/h200.machine.json";
  const std::string out = (d / "h200.topology.json").string();
  Run r = run("calibrate --from " + machine + " --topology-out " + out);
  REQUIRE(r.rc == 0);
  CHECK(r.out == "topology " + out + " written from " + machine + "\n");
  r = run("topo show " + out);
  CHECK(r.rc == 0);
}
