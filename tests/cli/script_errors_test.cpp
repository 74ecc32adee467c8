// scripts/plot.py, replay/tools/x2_table.py and sim/tools/e2e_rows.py on bad input: one line "plot:
// <file>: <what>" / "x2_table: <file>: <what>" on stderr and exit 2, no Python traceback. plot.py
// cases are skipped where /usr/bin/python3 with matplotlib is missing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "script_support.hpp"

namespace fs = std::filesystem;
using namespace sparsp::test;

TEST_CASE("plot.py: missing or malformed input exits 2 with one line") {
  if (!have_matplotlib()) {
    MESSAGE("no /usr/bin/python3 with matplotlib: skipped");
    return;
  }
  const fs::path d = fs::temp_directory_path() / "sparsp_script_errors_plot";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string script = std::string(SPARSP_SOURCE_DIR) + "/scripts/plot.py";
  auto plot = [&](const std::string& args) {
    return sh(std::string(kPython) + " " + script + " " + args + " -o " + (d / "o").string() +
              " > /dev/null 2> " + (d / "err").string());
  };
  const std::string missing = (d / "nonexist.csv").string();
  CHECK(plot("speedup " + missing + " --x p2p") == 2);
  CHECK(slurp(d / "err") == "plot: " + missing + ": No such file or directory\n");
  // A CSV given to gantt (which reads a JSON trace).
  const std::string csv = (d / "some.csv").string();
  std::ofstream(csv) << "a,b\n1,2\n";
  CHECK(plot("gantt " + csv) == 2);
  CHECK(slurp(d / "err") ==
        "plot: " + csv + ": not a JSON trace (Expecting value: line 1 column 1 (char 0))\n");
  // JSON, but an 'X' event without its track.
  const std::string trace = (d / "t.json").string();
  std::ofstream(trace) << R"({"traceEvents": [{"ph": "X", "ts": 0, "dur": 1}]})";
  CHECK(plot("gantt " + trace) == 2);
  CHECK(slurp(d / "err") ==
        "plot: " + trace + ": not a Chrome/Perfetto trace (an event: missing field 'pid')\n");
  // A JSON Lines file with a broken second row.
  const std::string jsonl = (d / "r.jsonl").string();
  std::ofstream(jsonl) << "{\"a\": 1}\nxx\n";
  CHECK(plot("line " + jsonl + " --x a --y a") == 2);
  CHECK(slurp(d / "err") == "plot: " + jsonl +
                                ":2: not a JSON Lines row (Expecting value: line 1 column 1 "
                                "(char 0))\n");
  CHECK_FALSE(fs::exists(d / "o.png"));
  fs::remove_all(d);
}

TEST_CASE("x2_table.py: a missing or empty results folder exits 2 with one line") {
  if (!have_python()) {
    MESSAGE("no python3: skipped");
    return;
  }
  const fs::path d = fresh_script_dir("sparsp_script_errors_x2");
  const std::string script = std::string(SPARSP_SOURCE_DIR) + "/replay/tools/x2_table.py";
  auto table = [&](const std::string& dir) {
    return sh("python3 " + script + " " + dir + " > /dev/null 2> " + (d / "err").string());
  };
  CHECK(table("/nonexistent") == 2);
  CHECK(slurp(d / "err") == "x2_table: /nonexistent: no such folder\n");
  const fs::path empty = d / "empty";
  fs::create_directories(empty);
  CHECK(table(empty.string()) == 2);  // was a traceback: max() of an empty sequence
  CHECK(slurp(d / "err") == "x2_table: " + empty.string() + ": no x2-*.validate.json files\n");
  // A validate report without its replay summary.
  std::ofstream(empty / "x2-a.validate.json") << "{}";
  CHECK(table(empty.string()) == 2);
  CHECK(slurp(d / "err") == "x2_table: " + (empty / "traces/a.summary.json").string() +
                                ": No such file or directory\n");
  fs::remove_all(d);
}

TEST_CASE("e2e_rows.py: a missing sparsp binary or a bare --json exits 2 with one line") {
  if (!have_python()) {
    MESSAGE("no python3: skipped");
    return;
  }
  const fs::path d = fresh_script_dir("sparsp_script_errors_e2e");
  const std::string script = std::string(SPARSP_SOURCE_DIR) + "/sim/tools/e2e_rows.py";
  auto rows = [&](const std::string& args) {
    return sh("cd " + std::string(SPARSP_SOURCE_DIR) + " && python3 " + script + " " + args +
              " > /dev/null 2> " + (d / "err").string());
  };
  CHECK(rows("/nonexistent/sparsp") == 2);  // was a traceback (FileNotFoundError)
  CHECK(slurp(d / "err") == "e2e_rows: /nonexistent/sparsp: No such file or directory\n");
  CHECK(rows("--json") == 2);
  CHECK(slurp(d / "err") == "e2e_rows: --json: expected a file name\n");
  fs::remove_all(d);
}
