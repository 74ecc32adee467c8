// CTest runs each doctest case by name (doctest_discover_tests), and CMake splits a name at ';'
// into two tests that each select no case and pass. 24 cases ran under no CTest until 2026-12-03
// this way (one had failed since it was written). Names must not hold ';'.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

TEST_CASE("no test case name holds a semicolon (CTest would run nothing for it)") {
  namespace fs = std::filesystem;
  const std::regex name(R"(TEST_CASE\(\s*"([^"]*)\")");
  int cases = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(SPARSP_SOURCE_DIR) / "tests")) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), name), end; it != end; ++it) {
      ++cases;
      const std::string where = e.path().string() + ": " + (*it)[1].str();
      CHECK_MESSAGE((*it)[1].str().find(';') == std::string::npos, where);
    }
  }
  CHECK(cases > 300);  // the scan saw the suite (411 CTest entries on 2026-12-03)
}
