// `sparsp sim run` through the real binary: JSON output, trace file, error exit code.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {
struct Run {
  int rc;
  std::string out;
};
Run run(const std::string& args) {
  const std::string cmd = std::string(SPARSP_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
const std::string kData = SPARSP_TEST_DATA_DIR;
}  // namespace

TEST_CASE("cli: sim run --json and --trace") {
  const std::string trace = "engine_cli_test_trace.json";
  std::remove(trace.c_str());
  const Run r = run("sim run --topology " + kData + "/sim/switch_l40s.json --workload " + kData +
                    "/sim/one_flow_then_compute.json --json --trace " + trace);
  REQUIRE_MESSAGE(r.rc == 0, r.out);
  const auto j = nlohmann::json::parse(r.out);
  // t0: gpu0 -> sw0 -> gpu1 at 20 GB/s, latency 2 x 0.5 us, launch 2 us: 3e-6 + 1e9 / 20e9
  // = 0.050003 s; c0 then runs 1 ms: makespan 0.051003 s.
  REQUIRE(j["activities"].size() == 2);
  CHECK(j["activities"][0]["id"] == "t0");
  CHECK(j["activities"][0]["start_s"].get<double>() == 0);
  CHECK(j["activities"][0]["end_s"].get<double>() == doctest::Approx(0.050003).epsilon(1e-12));
  CHECK(j["activities"][1]["id"] == "c0");
  CHECK(j["activities"][1]["start_s"].get<double>() == doctest::Approx(0.050003).epsilon(1e-12));
  CHECK(j["makespan_s"].get<double>() == doctest::Approx(0.051003).epsilon(1e-12));
  CHECK(j["critical_path"] == nlohmann::json::array({"t0", "c0"}));
  // The trace: one process per GPU, a copy-engine track, a counter for a busy link.
  std::ifstream in(trace);
  REQUIRE(in.good());
  const auto t = nlohmann::json::parse(in);
  bool gpu0 = false, ce = false, counter = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "gpu0") gpu0 = true;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "ce0") ce = true;
    if (e["ph"] == "C" && e["name"] == "gpu0->sw0") counter = true;
  }
  CHECK(gpu0);
  CHECK(ce);
  CHECK(counter);
  std::remove(trace.c_str());
}

TEST_CASE("cli: bad workload -> one-line error naming the place, exit 2") {
  const Run r = run("sim run --topology " + kData + "/sim/switch_l40s.json --workload " + kData +
                    "/sim/bad_endpoint.json");
  CHECK(r.rc == 2);
  CHECK(r.out == "sparsp: " + kData + "/sim/bad_endpoint.json:/transfers/0/dst: unknown endpoint 'gpu9'\n");
  CHECK(run("sim run --topology " + kData + "/sim/switch_l40s.json --workload /nonexistent.json").rc == 2);
  CHECK(run("sim run --help").rc == 0);
}
