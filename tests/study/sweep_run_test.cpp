// Running sweeps with a closed-form fake evaluator: exact output text, order independent of the
// thread count, resumption after a kill at any byte, refusal to mix different sweeps.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "sparsp/sweep.hpp"

using nlohmann::json;
namespace fs = std::filesystem;
using namespace sparsp::study;

namespace {

// Fake evaluator: study {"x": int, "y": {"z": number}} -> two rows ("p1": x + z, "p2": x * z);
// x == 3 is "invalid" (skipped). Counts its calls.
PointEvaluator fake_evaluator(std::atomic<int>* calls = nullptr) {
  PointEvaluator ev;
  ev.columns = {"policy", "value"};
  ev.evaluate = [calls](const SweepPoint& p) {
    if (calls) ++*calls;
    const json s = json::parse(p.study_json);
    const int x = s["x"].get<int>();
    const double z = s["y"]["z"].get<double>();
    PointOutcome o;
    if (x == 3) {
      o.skipped = true;
      o.reason = "x=3 is not allowed,\nsee docs";
      return o;
    }
    o.rows.push_back({"\"p1\"", json(x + z).dump()});
    o.rows.push_back({"\"p2\"", json(x * z).dump()});
    return o;
  };
  return ev;
}

SweepSpec small_spec(const std::string& xs = "[1, 2, 3]") {
  auto r = parse_sweep(R"({"study": {"x": 0, "y": {"z": 0.5}}, "axes": [
      {"path": "/x", "name": "x", "values": )" +
                           xs + R"(},
      {"path": "/y/z", "name": "z", "values": [0.5, 2]}]})",
                       "t.json", "");
  REQUIRE(r.ok());
  return r.value();
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sparsp_sweep_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

SweepOptions opts(const fs::path& out, int threads) {
  SweepOptions o;
  o.output_path = out.string();
  o.threads = threads;
  o.progress = ProgressMode::off;
  return o;
}

}  // namespace

TEST_CASE("CSV output is exactly the hand-computed table") {
  const fs::path d = temp_dir("csv");
  auto sum = run_sweep(small_spec(), fake_evaluator(), opts(d / "r.csv", 2));
  REQUIRE(sum.ok());
  CHECK(sum->complete);
  CHECK(sum->total_points == 6);    // 3 x values x 2 z values
  CHECK(sum->skipped_points == 2);  // x = 3 with z = 0.5 and z = 2
  CHECK(sum->rows_written == 10);   // 4 ok points x 2 rows + 2 skipped x 1 row
  CHECK_FALSE(fs::exists(d / "r.csv.partial"));
  // p1 = x + z, p2 = x * z: (1, 0.5) -> 1.5, 0.5; (1, 2) -> 3, 2; (2, 0.5) -> 2.5, 1; (2, 2) ->
  // 4, 4.
  CHECK(slurp(d / "r.csv") ==
        "point,x,z,status,reason,policy,value\n"
        "0,1,0.5,ok,,p1,1.5\n"
        "0,1,0.5,ok,,p2,0.5\n"
        "1,1,2,ok,,p1,3.0\n"
        "1,1,2,ok,,p2,2.0\n"
        "2,2,0.5,ok,,p1,2.5\n"
        "2,2,0.5,ok,,p2,1.0\n"
        "3,2,2,ok,,p1,4.0\n"
        "3,2,2,ok,,p2,4.0\n"
        "4,3,0.5,skipped,\"x=3 is not allowed, see docs\",,\n"
        "5,3,2,skipped,\"x=3 is not allowed, see docs\",,\n");
}

TEST_CASE("an existing empty output file is a fresh start, not a finished sweep") {
  // `: > r.csv` then a sweep into it reported "6 resumed, 0 rows", exit 0, and left 0 bytes.
  const fs::path d = temp_dir("empty_output");
  { std::ofstream(d / "r.csv"); }
  std::atomic<int> calls{0};
  auto sum = run_sweep(small_spec(), fake_evaluator(&calls), opts(d / "r.csv", 1));
  REQUIRE(sum.ok());
  CHECK(sum->complete);
  CHECK(sum->resumed_points == 0);
  CHECK(calls.load() == 6);
  CHECK(sum->rows_written == 10);
  CHECK(slurp(d / "r.csv").rfind("point,x,z,status,reason,policy,value\n0,1,0.5,ok,,p1,1.5\n", 0) ==
        0);
}

TEST_CASE("JSON Lines output") {
  const fs::path d = temp_dir("jsonl");
  auto sum = run_sweep(small_spec("[3, 1]"), fake_evaluator(), opts(d / "r.jsonl", 1));
  REQUIRE(sum.ok());
  CHECK(slurp(d / "r.jsonl") ==
        "{\"point\":0,\"x\":3,\"z\":0.5,\"status\":\"skipped\",\"reason\":\"x=3 is not allowed, "
        "see docs\",\"policy\":null,\"value\":null}\n"
        "{\"point\":1,\"x\":3,\"z\":2,\"status\":\"skipped\",\"reason\":\"x=3 is not allowed, "
        "see docs\",\"policy\":null,\"value\":null}\n"
        "{\"point\":2,\"x\":1,\"z\":0.5,\"status\":\"ok\",\"reason\":\"\",\"policy\":\"p1\","
        "\"value\":1.5}\n"
        "{\"point\":2,\"x\":1,\"z\":0.5,\"status\":\"ok\",\"reason\":\"\",\"policy\":\"p2\","
        "\"value\":0.5}\n"
        "{\"point\":3,\"x\":1,\"z\":2,\"status\":\"ok\",\"reason\":\"\",\"policy\":\"p1\","
        "\"value\":3.0}\n"
        "{\"point\":3,\"x\":1,\"z\":2,\"status\":\"ok\",\"reason\":\"\",\"policy\":\"p2\","
        "\"value\":2.0}\n");
}

TEST_CASE("output order does not depend on the thread count") {
  // 40 x 2 = 80 points; the evaluator sleeps longer on early points so threads finish out of order.
  auto spec = parse_sweep(R"({"study": {"x": 0, "y": {"z": 0.5}}, "axes": [
      {"path": "/x", "name": "x", "range": {"start": 0, "stop": 39, "step": 1}},
      {"path": "/y/z", "name": "z", "values": [0.5, 2]}]})",
                          "t.json", "");
  REQUIRE(spec.ok());
  PointEvaluator ev = fake_evaluator();
  auto inner = ev.evaluate;
  ev.evaluate = [inner](const SweepPoint& p) {
    std::this_thread::sleep_for(std::chrono::microseconds(100 * ((80 - p.index) % 7)));
    return inner(p);
  };
  const fs::path d = temp_dir("threads");
  // oneTBB workers: 1, 2 and 4 (more than this 2-core machine has), and 7; byte-identical.
  for (const char* ext : {".csv", ".jsonl"})
    for (int t : {1, 2, 4, 7})
      REQUIRE(run_sweep(*spec, ev, opts(d / ("t" + std::to_string(t) + ext), t)).ok());
  for (int t : {2, 4, 7}) {
    CHECK(slurp(d / "t1.csv") == slurp(d / ("t" + std::to_string(t) + ".csv")));
    CHECK(slurp(d / "t1.jsonl") == slurp(d / ("t" + std::to_string(t) + ".jsonl")));
  }
  // 80 points: 78 with x != 3 give 2 rows, 2 skipped give 1 -> 158 rows + header.
  const std::string csv = slurp(d / "t1.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 159);
}

TEST_CASE("resumption after a kill at any byte gives the uninterrupted file") {
  for (const char* name : {"r.csv", "r.jsonl"}) {
    const fs::path d = temp_dir("resume");
    const SweepSpec spec = small_spec();
    fs::create_directories(d / "full");
    REQUIRE(run_sweep(spec, fake_evaluator(), opts(d / "full" / name, 1)).ok());
    const std::string full = slurp(d / "full" / name);
    REQUIRE(full.size() > 100);
    // A killed run leaves <out>.partial holding a prefix of the full output (points are written
    // in order, whole rows flushed): simulate every cut point, resume, compare.
    for (size_t cut = 0; cut <= full.size(); ++cut) {
      const fs::path out = d / name;
      fs::remove(out);
      std::ofstream(out.string() + ".partial", std::ios::binary) << full.substr(0, cut);
      std::atomic<int> calls{0};
      auto sum = run_sweep(spec, fake_evaluator(&calls), opts(out, 3));
      REQUIRE(sum.ok());
      CHECK(sum->complete);
      REQUIRE(slurp(out) == full);
      // Points whose rows were all there before the last point present are not evaluated again.
      CHECK(calls.load() == 6 - sum->resumed_points);
    }
  }
}

TEST_CASE("a stopped run resumes where it stopped, a finished one is not re-run") {
  const fs::path d = temp_dir("stop");
  const SweepSpec spec = small_spec();
  REQUIRE(run_sweep(spec, fake_evaluator(), opts(d / "ref.csv", 1)).ok());
  SweepOptions o = opts(d / "r.csv", 2);
  o.stop_after_points = 4;
  auto first = run_sweep(spec, fake_evaluator(), o);
  REQUIRE(first.ok());
  CHECK_FALSE(first->complete);
  CHECK(first->evaluated_points == 4);
  CHECK(fs::exists(d / "r.csv.partial"));
  CHECK_FALSE(fs::exists(d / "r.csv"));
  std::atomic<int> calls{0};
  auto second = run_sweep(spec, fake_evaluator(&calls), opts(d / "r.csv", 2));
  REQUIRE(second.ok());
  // Points 0..2 kept; point 3, the last present, is evaluated again (it could be cut), then 4, 5.
  CHECK(second->resumed_points == 3);
  CHECK(calls.load() == 3);
  CHECK(slurp(d / "r.csv") == slurp(d / "ref.csv"));
  calls = 0;
  auto third = run_sweep(spec, fake_evaluator(&calls), opts(d / "r.csv", 2));
  REQUIRE(third.ok());
  CHECK(calls.load() == 0);
  CHECK(third->resumed_points == 6);
}

TEST_CASE("output of a different sweep is refused, not mixed") {
  const fs::path d = temp_dir("mix");
  REQUIRE(run_sweep(small_spec("[1, 2, 3]"), fake_evaluator(), opts(d / "r.csv", 1)).ok());
  auto other = run_sweep(small_spec("[1, 5, 3]"), fake_evaluator(), opts(d / "r.csv", 1));
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().exit_code == 2);
  // Point 2 of the new sweep is (x=5, z=0.5); line 6 of the file (header + 4 rows) has x=2.
  CHECK(other.error().message.rfind((d / "r.csv").string() + ":6: axis values of point 2", 0) == 0);
  SweepOptions o = opts(d / "r.csv", 1);
  o.restart = true;
  REQUIRE(run_sweep(small_spec("[1, 5, 3]"), fake_evaluator(), o).ok());
  CHECK(slurp(d / "r.csv").find("\n2,5,0.5,ok,,p1,5.5\n") != std::string::npos);  // 5 + 0.5
}

TEST_CASE("plain progress lines when not a terminal") {
  const fs::path d = temp_dir("progress");
  std::ostringstream log;
  SweepOptions o = opts(d / "r.csv", 1);
  o.progress = ProgressMode::lines;
  o.progress_interval_s = 0;
  o.progress_stream = &log;
  REQUIRE(run_sweep(small_spec(), fake_evaluator(), o).ok());
  CHECK(log.str().find("sweep: 3/6 points") != std::string::npos);
  CHECK(log.str().find("sweep: 6/6 points") != std::string::npos);
}

TEST_CASE("unsupported output extension is bad input") {
  auto r = run_sweep(small_spec(), fake_evaluator(), opts("/tmp/x.txt", 1));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message == "/tmp/x.txt: output must end in .csv or .jsonl");
}

TEST_CASE("a resume after the base study changed is refused, naming what changed (issue 18, 4)") {
  const fs::path d = temp_dir("fingerprint");
  SweepSpec spec = small_spec();
  SweepOptions o = opts(d / "r.csv", 1);
  o.stop_after_points = 2;  // as if killed after two points
  REQUIRE(run_sweep(spec, fake_evaluator(), o).ok());
  CHECK(fs::exists(d / "r.csv.partial"));
  CHECK(fs::exists(d / "r.csv.partial.study"));  // the record of the whole effective sweep
  // Same axes and values, another base study (the break-it pass changed only its policies):
  // the axis values of the rows match, so only the record can tell.
  SweepSpec changed = spec;
  json base = json::parse(spec.base_study_json);
  base["policies"] = json::array({"contiguous/ring/sync"});
  changed.base_study_json = base.dump();
  auto r = run_sweep(changed, fake_evaluator(), opts(d / "r.csv", 1));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message == (d / "r.csv.partial").string() +
                                 ": written by a different sweep (/policies changed); use another "
                                 "output file or --restart");
  // The unchanged sweep resumes, completes, and removes the record.
  std::atomic<int> calls{0};
  auto ok = run_sweep(spec, fake_evaluator(&calls), opts(d / "r.csv", 1));
  REQUIRE(ok.ok());
  CHECK(ok->complete);
  CHECK(calls.load() == 6 - 1);  // points 1..5 (point 1, the last present, again)
  CHECK_FALSE(fs::exists(d / "r.csv.partial.study"));
  CHECK_FALSE(fs::exists(d / "r.csv.partial"));
  REQUIRE(run_sweep(spec, fake_evaluator(), opts(d / "ref.csv", 1)).ok());
  CHECK(slurp(d / "r.csv") == slurp(d / "ref.csv"));
}

TEST_CASE("a resume after a file the study names by path changed is refused") {
  // Break-it pass 2026-12-03: editing the model file a study names ("model": "m.json") between
  // a stop and its resume mixed old and new rows, exit 0. The file's contents are part of the
  // fingerprint now; the fake evaluator does not read it, so only the record can tell.
  const fs::path d = temp_dir("named_file");
  auto write_model = [&](int layers) {
    std::ofstream(d / "m.json") << R"({"name": "m", "layers": )" << layers << "}";
  };
  auto spec_now = [&] {
    auto r = parse_sweep(R"({"study": {"x": 0, "y": {"z": 0.5}, "model": "m.json"}, "axes": [
        {"path": "/x", "name": "x", "values": [1, 2, 3]},
        {"path": "/y/z", "name": "z", "values": [0.5, 2]}]})",
                         "t.json", d.string());
    REQUIRE(r.ok());
    return r.value();
  };
  write_model(60);
  SweepOptions o = opts(d / "r.csv", 1);
  o.stop_after_points = 2;
  REQUIRE(run_sweep(spec_now(), fake_evaluator(), o).ok());
  write_model(61);
  auto r = run_sweep(spec_now(), fake_evaluator(), opts(d / "r.csv", 1));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message == (d / "r.csv.partial").string() +
                                 ": written by a different sweep (the file /model names changed); "
                                 "use another output file or --restart");
  write_model(60);  // as it was: the resume goes on
  REQUIRE(run_sweep(spec_now(), fake_evaluator(), opts(d / "r.csv", 1)).ok());
}

TEST_CASE("files named in axis values and a cluster's server file are in the fingerprint too") {
  // Final break-it pass 2026-12-03: a model file named only in an axis value, and the server
  // file a cluster file names, could change between a stop and its resume unnoticed.
  const fs::path d = temp_dir("named_file_axis");
  std::ofstream(d / "m2.json") << R"({"layers": 60})";
  std::ofstream(d / "srv.json") << R"({"pcie_gen": 4})";
  std::ofstream(d / "c.cluster.json") << R"({"cluster": {"server": "srv.json", "nodes": 2}})";
  std::ofstream(d / "p.spm", std::ios::binary) << "SPM1 recorded masks";
  auto spec_now = [&] {
    auto r = parse_sweep(R"({"study": {"x": 0, "y": {"z": 0.5}, "topology": "c.cluster.json",
                                       "pattern": {"kind": "file", "input": "p.spm"}},
        "axes": [{"path": "/x", "name": "x", "values": [1, 2, 3]},
                 {"path": "/model", "name": "model", "values": ["cogvideox-2b", "m2.json"]}]})",
                         "t.json", d.string());
    REQUIRE(r.ok());
    return r.value();
  };
  auto stop_then_resume = [&](const std::string& out) {
    SweepOptions o = opts(d / out, 1);
    o.stop_after_points = 2;
    REQUIRE(run_sweep(spec_now(), fake_evaluator(), o).ok());
  };
  stop_then_resume("a.csv");
  std::ofstream(d / "m2.json") << R"({"layers": 61})";
  auto a = run_sweep(spec_now(), fake_evaluator(), opts(d / "a.csv", 1));
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message == (d / "a.csv.partial").string() +
                                 ": written by a different sweep (the file /axes/1/values/1 names "
                                 "changed); use another output file or --restart");
  stop_then_resume("b.csv");
  std::ofstream(d / "srv.json") << R"({"pcie_gen": 5})";
  auto b = run_sweep(spec_now(), fake_evaluator(), opts(d / "b.csv", 1));
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message == (d / "b.csv.partial").string() +
                                 ": written by a different sweep (the file "
                                 "/topology/cluster/server names changed); use another output "
                                 "file or --restart");
  stop_then_resume("c.csv");  // a recorded pattern (binary)
  std::ofstream(d / "p.spm", std::ios::binary) << "SPM1 other masks";
  auto c = run_sweep(spec_now(), fake_evaluator(), opts(d / "c.csv", 1));
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.find("(the file /pattern/input names changed)") != std::string::npos);
}

TEST_CASE("a resume with another memory limit is refused, naming the option and both values") {
  // The limit decides which points are skipped (issue 18, leftover of 4): it is part of what a
  // resume must match, as SweepOptions::row_options.
  const fs::path d = temp_dir("fingerprint_options");
  SweepOptions o = opts(d / "r.csv", 1);
  o.row_options["--max-memory-gib"] = "16.0";
  o.stop_after_points = 2;  // as if killed after two points
  REQUIRE(run_sweep(small_spec(), fake_evaluator(), o).ok());
  SweepOptions other = opts(d / "r.csv", 1);
  other.row_options["--max-memory-gib"] = "0.5";
  auto r = run_sweep(small_spec(), fake_evaluator(), other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message == (d / "r.csv.partial").string() +
                                 ": written by a different sweep (--max-memory-gib (was 16.0, now "
                                 "0.5) changed); use another output file or --restart");
  // The same limit resumes and completes.
  SweepOptions same = opts(d / "r.csv", 1);
  same.row_options["--max-memory-gib"] = "16.0";
  auto ok = run_sweep(small_spec(), fake_evaluator(), same);
  REQUIRE(ok.ok());
  CHECK(ok->complete);
}
