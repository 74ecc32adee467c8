// scripts/plot.py on a tiny sweep CSV: a column name that is not in the file, given to any option
// (or an option's default), exits 2 with a message listing the columns instead of plotting
// something else. Skipped where /usr/bin/python3 with matplotlib is missing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "script_support.hpp"

namespace fs = std::filesystem;
using namespace sparsp::test;

TEST_CASE("plot.py: unknown column names exit 2 and list the columns") {
  if (!have_matplotlib()) {
    MESSAGE("no /usr/bin/python3 with matplotlib: skipped");
    return;
  }
  const fs::path d = fs::temp_directory_path() / "sparsp_plot_script";
  fs::remove_all(d);
  fs::create_directories(d);
  const fs::path csv = d / "r.csv";
  std::ofstream(csv) << "point,sparsity,status,reason,policy,speedup,e2e_time_s\n"
                        "0,0.5,ok,,a,1.0,2.0\n0,0.5,ok,,b,1.5,1.3\n"
                        "1,0.9,ok,,a,1.0,2.0\n1,0.9,ok,,b,2.0,1.0\n";
  const std::string script = std::string(SPARSP_SOURCE_DIR) + "/scripts/plot.py";
  auto plot = [&](const std::string& args) {
    return sh(std::string(kPython) + " " + script + " " + args + " > " + (d / "out").string() +
              " 2> " + (d / "err").string());
  };
  const std::string columns =
      "(columns: point, sparsity, status, reason, policy, speedup, e2e_time_s)\n";
  struct Case {
    std::string args, message;
  };
  const std::string r = csv.string();
  const Case cases[] = {
      {"speedup " + r + " --x nosuchcol", "--x nosuchcol"},
      {"line " + r + " --x sparsity --y nope", "--y nope"},
      {"speedup " + r + " --x sparsity --by pol", "--by pol"},
      {"speedup " + r + " --x sparsity --facet topology", "--facet topology"},
      {"speedup " + r + " --x sparsity --where pol=a", "--where pol"},
      {"bars " + r + " --x sparsity --y volume", "--y volume"},
      // `volume` plots volume_bytes by default: missing here.
      {"volume " + r, "--y volume_bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    CHECK(plot(c.args + " -o " + (d / "bad").string()) == 2);
    CHECK(slurp(d / "err") == "plot: " + r + ": " + c.message + ": no such column " + columns);
    CHECK_FALSE(fs::exists(d / "bad.png"));
  }
  // Known columns plot (PNG and SVG written).
  CHECK(plot("speedup " + r + " --x sparsity --where policy=b -o " + (d / "good").string()) == 0);
  CHECK(fs::exists(d / "good.png"));
  CHECK(fs::exists(d / "good.svg"));
}

TEST_CASE("plot.py: a CSV cut off mid-row or with only a header exits 2 saying so") {
  // Break-it defect 22: a truncated CSV plotted with exit 0; a header-only one said
  // "(columns: none)".
  if (!have_matplotlib()) {
    MESSAGE("no /usr/bin/python3 with matplotlib: skipped");
    return;
  }
  const fs::path d = fs::temp_directory_path() / "sparsp_plot_script_torn";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string script = std::string(SPARSP_SOURCE_DIR) + "/scripts/plot.py";
  auto plot = [&](const fs::path& csv) {
    return sh(std::string(kPython) + " " + script + " line " + csv.string() +
              " --x sparsity --y e2e_time_s -o " + (d / "out").string() + " > /dev/null 2> " +
              (d / "err").string());
  };
  const std::string header = "point,sparsity,status,reason,policy,speedup,e2e_time_s\n";
  std::ofstream(d / "torn.csv") << header << "0,0.5,ok,,a,1.0,2.0\n1,0.9,ok,,a,1.";
  CHECK(plot(d / "torn.csv") == 2);
  CHECK(slurp(d / "err") == "plot: " + (d / "torn.csv").string() +
                                ":3: the last row is cut off (no newline at the end; is the sweep "
                                "still writing it?)\n");
  std::ofstream(d / "short.csv") << header << "0,0.5,ok,,a,1.0,2.0\n1,0.9,ok\n";
  CHECK(plot(d / "short.csv") == 2);
  CHECK(slurp(d / "err") ==
        "plot: " + (d / "short.csv").string() + ":3: 3 fields, but the header has 7\n");
  std::ofstream(d / "head.csv") << header;
  CHECK(plot(d / "head.csv") == 2);
  CHECK(slurp(d / "err") == "plot: " + (d / "head.csv").string() +
                                ": no rows to plot (only a header, or every row skipped or "
                                "filtered out)\n");
  CHECK_FALSE(fs::exists(d / "out.png"));
}
