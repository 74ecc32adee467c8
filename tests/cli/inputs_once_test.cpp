// Issue 18 leftovers at the command line: a pipe (/dev/stdin, a FIFO) as an input file is read
// once and then parsed, however often it is loaded; --emit-plan never passes an earlier run's
// plans off as this run's, and never writes a plan that replay would refuse; a study of
// topologies with different GPU counts names each count.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.hpp"

namespace fs = std::filesystem;

namespace {

using namespace sparsp::test;  // NOLINT: run, Run, slurp, fresh_dir

const std::string kStudy = R"({"schema_version": 1, "topology": "2x-h200-nvlink",
  "model": "hunyuanvideo-sta",
  "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
  "steps": [0], "layers": [0], "policies": ["contiguous/ring/sm_overlap"]})";

}  // namespace

TEST_CASE("/dev/stdin and a FIFO as a study, topology or sweep: read once, then parsed") {
  const fs::path d = fresh_dir("sparsp_inputs_once");
  std::ofstream(d / "s.json") << kStudy;
  const Run ref = run("simulate --config " + (d / "s.json").string());
  REQUIRE(ref.rc == 0);
  // The study from a pipe: the same table as from the file (the loader used to read it twice,
  // the second time finding it empty).
  Run r = run("simulate --config /dev/stdin", "cat " + (d / "s.json").string() + " |");
  CHECK(r.err == "");
  CHECK(r.rc == 0);
  CHECK(r.out == ref.out);
  // The topology from a pipe, with the study from a file naming it.
  const std::string topo =
      std::string(SPARSP_SOURCE_DIR) + "/configs/topologies/2x-h200-nvlink.json";
  std::string st = kStudy;
  st.replace(st.find("\"2x-h200-nvlink\""), 16, "\"/dev/stdin\"");
  std::ofstream(d / "s_stdin.json") << st;
  r = run("simulate --config " + (d / "s_stdin.json").string(), "cat " + topo + " |");
  CHECK(r.err == "");
  CHECK(r.rc == 0);
  // A FIFO as the topology of every point of a sweep: one write into it serves all points (a
  // second open would block with no writer left, so `timeout` ends a regression).
  const fs::path fifo = d / "topo.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  st.replace(st.find("\"/dev/stdin\""), 12, "\"" + fifo.string() + "\"");
  std::ofstream(d / "sweep.json")
      << R"({"schema_version": 1, "study": )" << st
      << R"(, "axes": [{"name": "window", "values": [[3, 3, 3], [1, 1, 1]]}]})";
  r = run("sweep -c " + (d / "sweep.json").string() + " -j 1 --progress off -o " +
              (d / "out.csv").string(),
          "(cat " + topo + " > " + fifo.string() + " &); timeout 60");
  CHECK(r.err == "");
  CHECK(r.rc == 0);
  const std::string csv = slurp(d / "out.csv");
  CHECK(csv.find(",skipped,") == std::string::npos);
  CHECK(lines(csv) == 3);  // header + 2 points
}

TEST_CASE("--emit-plan refuses a folder holding plans this run does not write") {
  const fs::path d = fresh_dir("sparsp_emit_stale");
  std::ofstream(d / "s.json") << kStudy;
  const std::string sim = "simulate --config " + (d / "s.json").string() + " --emit-plan ";
  // A rerun into its own folder is fine (it writes the same names again).
  REQUIRE(run(sim + (d / "plans").string()).rc == 0);
  const Run again = run(sim + (d / "plans").string());
  CHECK(again.rc == 0);
  CHECK(again.err == "");
  const std::string mine = "2x-h200-nvlink__contiguous_ring_sm_overlap.plan.json";
  REQUIRE(fs::exists(d / "plans" / mine));
  // A plan of an earlier, different run in the folder: refused, exit 2, nothing written.
  std::ofstream(d / "plans" / "8x-l40s-gen4-4switch__contiguous_ring_sm_overlap.plan.json") << "{}";
  fs::remove(d / "plans" / mine);
  const Run r = run(sim + (d / "plans").string());
  CHECK(r.rc == 2);
  CHECK(r.out == "");
  CHECK(r.err == "sparsp: " + (d / "plans").string() +
                     ": --emit-plan folder holds 1 .plan.json file that this run does not write "
                     "(8x-l40s-gen4-4switch__contiguous_ring_sm_overlap.plan.json), from an "
                     "earlier run; nothing was written: give an empty or new folder, or remove "
                     "them\n");
  CHECK_FALSE(fs::exists(d / "plans" / mine));
}

TEST_CASE("--emit-plan refuses, before writing, a plan with fewer blocks than GPUs") {
  // HunyuanVideo-720p dense with 30000-token blocks: ceil(118800 / 30000) = 4 video blocks +
  // 1 text block = 5 blocks for 8 GPUs: three GPUs would own no block, which replay refuses.
  const fs::path d = fresh_dir("sparsp_emit_few_blocks");
  const Run r =
      run("simulate --model hunyuanvideo-720p --pattern dense --block 30000 "
          "--topology 8x-l40s-gen4-4switch --policy contiguous/ring/sm_overlap "
          "--steps 1 --layers 1 --emit-plan " +
          (d / "plans").string());
  CHECK(r.rc == 2);
  CHECK(r.out == "");
  CHECK(r.err == "sparsp: " + (d / "plans").string() +
                     "/8x-l40s-gen4-4switch__contiguous_ring_sm_overlap.plan.json: not written: "
                     "the pattern has 5 blocks for 8 GPUs, so some GPU would own no block and "
                     "replay would refuse the plan; use a smaller --block or fewer --gpus\n");
  CHECK(fs::is_empty(d / "plans"));
}

TEST_CASE("a study of a 2-GPU and an 8-GPU server says both counts in its header") {
  const fs::path d = fresh_dir("sparsp_mixed_gpus");
  std::string st = kStudy;
  st.replace(st.find("\"topology\": \"2x-h200-nvlink\""), 28,
             "\"topologies\": [\"2x-h200-nvlink\", \"8x-l40s-gen4-4switch\"]");
  std::ofstream(d / "s.json") << st;
  const Run r = run("simulate --config " + (d / "s.json").string());
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("model hunyuanvideo-sta, pattern ", 0) == 0);
  CHECK(r.out.find(", 2 GPUs on 2x-h200-nvlink, 8 GPUs on 8x-l40s-gen4-4switch; baseline ") !=
        std::string::npos);
}
