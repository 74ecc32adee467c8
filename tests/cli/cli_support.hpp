#pragma once
// Helpers of the tests that run the sparsp binary (SPARSP_CLI_PATH) and look at what it printed.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "script_support.hpp"

namespace sparsp::test {

struct Run {
  int rc;           ///< exit status; -1 when ended by a signal
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// Runs `PREFIX sparsp ARGS` through the shell (PREFIX: environment assignments or shell
/// commands such as "ulimit -f 8;"), capturing stdout and stderr.
inline Run run(const std::string& args, const std::string& prefix = "") {
  static int n = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const auto o = dir / ("sparsp_cli_out" + std::to_string(n));
  const auto e = dir / ("sparsp_cli_err" + std::to_string(n++));
  const std::string cmd = prefix + (prefix.empty() ? "" : " ") + SPARSP_CLI_PATH + " " + args +
                          " >" + o.string() + " 2>" + e.string();
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(o), slurp(e)};
}

/// A fresh, empty folder <temp>/<name>.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

/// Number of newline-terminated lines.
inline size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

/// The smallest real study: one L40S switch of two GPUs (Gen4), HunyuanVideo-STA at block 384
/// (301 blocks), step 0 and layer 0 only, one policy (`policy`). Runs in well under a second.
inline std::string small_study_json(const std::string& policy = "contiguous/ring/sm_overlap") {
  return R"({"schema_version": 1, "topology": {"schema_version": 1, "name": "t2",
      "template": {"sockets": 1, "switches_per_socket": 1, "gpus_per_switch": 2,
                   "gpu_model": "NVIDIA L40S", "pcie_gen": 4}},
      "model": "hunyuanvideo-sta",
      "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
      "steps": [0], "layers": [0], "policies": [")" +
         policy + R"("]})";
}

/// A sweep of small_study_json(policy) over `pcie_gen` (`values`: a JSON array, e.g. "[4, 5]").
inline std::string small_sweep_json(const std::string& pcie_gen_values,
                                    const std::string& policy = "contiguous/ring/sm_overlap") {
  return R"({"schema_version": 1, "study": )" + small_study_json(policy) +
         R"(, "axes": [{"name": "pcie_gen", "values": )" + pcie_gen_values + "}]}";
}

}  // namespace sparsp::test
