#pragma once
// Helpers of the tests that run the project's Python scripts (plot.py, x2_table.py, e2e_rows.py).
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

/// Whether a python3 on PATH can run the scripts that need only the standard library.
inline bool have_python() { return sh("python3 -c 'import json' > /dev/null 2>&1") == 0; }

/// A fresh, empty folder <temp>/<name> for one script test.
inline std::filesystem::path fresh_script_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace sparsp::test
