#pragma once
// Helpers of the tests that run the project's Python scripts (plot.py, x2_table.py).
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sparsp::test {

/// The interpreter the scripts' shebang names (Debian's, with python3-matplotlib).
inline constexpr const char* kPython = "/usr/bin/python3";

/// Whole file as bytes ("" when missing).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `cmd` through the shell; its exit status (-1 when it did not exit normally).
inline int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/// Whether kPython can import matplotlib (plot.py tests skip otherwise).
inline bool have_matplotlib() {
  return sh(std::string(kPython) + " -c 'import matplotlib' > /dev/null 2>&1") == 0;
}

}  // namespace sparsp::test
