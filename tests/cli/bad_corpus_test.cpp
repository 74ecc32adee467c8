// The malformed-input corpus, tests/data/bad/ (issue 18): one file per defect class, each with
// its command, exit code and whole one-line message in tests/data/bad/cases.txt. Bad input never
// crashes and never silently succeeds.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("tests/data/bad: every malformed file gives its one-line message and exit code") {
  const fs::path dir = fs::path(SPARSP_TEST_DATA_DIR) / "bad";
  const fs::path out = sparsp::test::fresh_dir("sparsp_bad_corpus");
  std::ifstream in(dir / "cases.txt");
  REQUIRE(in);
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    for (size_t a = 0, b; a <= line.size(); a = b + 1) {
      b = line.find(" | ", a);
      if (b == std::string::npos) b = line.size();
      f.push_back(trim(line.substr(a, b - a)));
      if (b != line.size()) b += 2;
    }
    REQUIRE(f.size() == 4);
    const std::string file = (dir / f[0]).string();
    CAPTURE(f[0]);
    REQUIRE(fs::exists(file));
    auto fill = [&](const std::string& s) {
      return replace_all(replace_all(replace_all(s, "@", file), "OUT", out.string()), "DIR",
                         dir.string());
    };
    const auto r = sparsp::test::run(fill(f[2]));
    CHECK(r.rc == std::stoi(f[1]));
    CHECK(r.err == "sparsp: " + fill(f[3]) + "\n");
    ++cases;
  }
  CHECK(cases == 128);
}
