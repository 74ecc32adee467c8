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
