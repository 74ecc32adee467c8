// check-published (issue 19 item 4): Kendall tau-a in closed form, a tiny hand-made benchmark
// file whose tau is known from the policies' structure, and the files in configs/published.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "../cli/cli_support.hpp"
#include "sparsp/study.hpp"

namespace fs = std::filesystem;
using sparsp::study::kendall_tau_a;

TEST_CASE("kendall_tau_a: hand-worked orderings, ties count as neither") {
  // Same order: all 6 pairs concordant.
  auto k = kendall_tau_a({1, 2, 3, 4}, {10, 20, 30, 40});
  CHECK(k.pairs == 6);
  CHECK(k.concordant == 6);
  CHECK(k.tau == doctest::Approx(1.0));
  // Reversed: all discordant.
  k = kendall_tau_a({1, 2, 3, 4}, {4, 3, 2, 1});
  CHECK(k.discordant == 6);
  CHECK(k.tau == doctest::Approx(-1.0));
  // One adjacent swap: 5 concordant, 1 discordant -> (5 - 1) / 6 = 2/3 (the issue's bar for
  // four policies).
  k = kendall_tau_a({1, 2, 3, 4}, {1, 3, 2, 4});
  CHECK(k.concordant == 5);
  CHECK(k.discordant == 1);
  CHECK(k.tau == doctest::Approx(2.0 / 3.0));
  // A tie in x: pair (0,1) is neither; (0,2), (1,2) concordant -> 2/3 (tau-a keeps n(n-1)/2).
  k = kendall_tau_a({1, 1, 2}, {1, 2, 3});
  CHECK(k.concordant == 2);
  CHECK(k.discordant == 0);
  CHECK(k.tau == doctest::Approx(2.0 / 3.0));
  // A tie in y and a discordant pair: (0,1) neither, (0,2) discordant, (1,2) discordant.
  k = kendall_tau_a({1, 2, 3}, {5, 5, 1});
  CHECK(k.discordant == 2);
  CHECK(k.tau == doctest::Approx(-2.0 / 3.0));
  // Fewer than two: no pair, NaN.
  CHECK(std::isnan(kendall_tau_a({1}, {2}).tau));
}

namespace {

// Three policies on two NVLink H200s: the all-gather forced through host memory is slower than
// the ring (NVLink P2P), and the ring with skip_empty=0 spelled out is the same policy as the
// default ring, an exact tie. So with measured B 3 ms, C 2 ms (500/s), D 1 ms the pairs are:
// (B,C) concordant, (B,D) concordant, (C,D) a predicted tie -> tau = 2/3; reversed measured
// (1, 2, 3 ms): two discordant, one tie -> -2/3.
std::string tiny_file() {
  const fs::path p = fs::temp_directory_path() / "sparsp_tiny.published.json";
  std::ofstream(p) << R"({"schema_version": 1, "name": "tiny",
 "source": {"url": "hand-made", "table": "test"},
 "setup": {"topology": "2x-h200-nvlink", "gpus": 2, "metric": "attention_time_s",
  "pattern": "dense",
  "model": {"schema_version": 1, "name": "m", "latent": [1, 1, 4096], "text_tokens": 0,
   "heads": 8, "head_dim": 64, "layers": 1, "hidden": 512, "dtype_bytes": 2, "steps": 1}},
 "sizes": [
  {"name": "agree", "measured": [
   {"policy": "contiguous/allgather/sync:host_staged=1", "time_s": 0.003},
   {"policy": "contiguous/ring/sync", "throughput_per_s": 500},
   {"policy": "contiguous/ring/sync:skip_empty=0", "time_s": 0.001}]},
  {"name": "disagree", "measured": [
   {"policy": "contiguous/allgather/sync:host_staged=1", "time_s": 0.001},
   {"policy": "contiguous/ring/sync", "time_s": 0.002},
   {"policy": "contiguous/ring/sync:skip_empty=0", "time_s": 0.003}]}]})";
  return p.string();
}

// tiny_file() with its first `from` replaced by `to`, written as <temp>/sparsp_tiny_<name>.
std::string tiny_file_with(const std::string& from, const std::string& to,
                           const std::string& name) {
  std::string text = sparsp::test::slurp(tiny_file());
  text.replace(text.find(from), from.size(), to);
  const fs::path p = fs::temp_directory_path() / ("sparsp_tiny_" + name + ".published.json");
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("check_published: a tiny file with known taus and errors") {
  auto c = sparsp::study::check_published({tiny_file()});
  REQUIRE(c);
  REQUIRE(c->files.size() == 1);
  const auto& f = c->files[0];
  REQUIRE(f.sizes.size() == 2);
  const auto& a = f.sizes[0];
  REQUIRE(a.rows.size() == 3);
  CHECK(a.rows[1].measured_time_s == doctest::Approx(0.002));  // 1 / 500 per s
  CHECK(a.rows[0].predicted_time_s > a.rows[1].predicted_time_s);
  CHECK(a.rows[1].predicted_time_s == a.rows[2].predicted_time_s);
  CHECK(a.tau.concordant == 2);
  CHECK(a.tau.discordant == 0);
  CHECK(a.tau.tau == doctest::Approx(2.0 / 3.0));
  CHECK(f.sizes[1].tau.tau == doctest::Approx(-2.0 / 3.0));
  CHECK(c->min_tau == doctest::Approx(-2.0 / 3.0));
  // Throughput error per row: |measured / predicted - 1|; the median of six.
  std::vector<double> e;
  for (const auto& s : f.sizes)
    for (const auto& r : s.rows) {
      CHECK(r.throughput_error ==
            doctest::Approx(std::fabs(r.measured_time_s / r.predicted_time_s - 1)));
      e.push_back(r.throughput_error);
    }
  std::sort(e.begin(), e.end());
  CHECK(f.median_throughput_error == doctest::Approx(0.5 * (e[2] + e[3])));
  CHECK(c->median_throughput_error == doctest::Approx(f.median_throughput_error));
}

TEST_CASE("format_published: a size named by its GPU count is not told twice") {
  // Break-it pass (2026-12-02): "size 2 GPUs, 2 GPUs: Kendall tau ...". The tiny file's first
  // size renamed "2 GPUs" (the setup's count) prints once; "disagree" still gets ", 2 GPUs".
  const std::string p = tiny_file_with("\"agree\"", "\"2 GPUs\"", "gpus");
  auto c = sparsp::study::check_published({p});
  REQUIRE(c);
  const std::string out = sparsp::study::format_published(*c);
  CHECK(out.find("  size 2 GPUs: Kendall tau 0.667") != std::string::npos);
  CHECK(out.find("  size disagree, 2 GPUs: Kendall tau -0.667") != std::string::npos);
  CHECK(out.find("2 GPUs, 2 GPUs") == std::string::npos);
}

TEST_CASE("a published time outside 1e-9..1e9 s is refused at its pointer") {
  // Break-it pass 2026-12-03: time_s 1e308 printed a 300-digit error column that overran the
  // table line. The tiny file's first measured time (0.003 s) set to 1e308.
  const std::string p = tiny_file_with("0.003", "1e308", "huge");
  auto c = sparsp::study::check_published({p});
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message ==
        p + ":/sizes/0/measured/0/time_s: expected a number in 1e-9..1e9, got 1e+308");
}

TEST_CASE("check-published CLI: --json, --require-tau, --require-median-error") {
  const std::string file = tiny_file();
  auto r = sparsp::test::run("check-published --json " + file);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["files"][0]["sizes"][0]["kendall_tau"].get<double>() == doctest::Approx(2.0 / 3.0));
  CHECK(j["files"][0]["sizes"][1]["pairs"] == 3);
  CHECK(j["min_kendall_tau"].get<double>() == doctest::Approx(-2.0 / 3.0));
  // -2/3 is below 0.5: exit 1, naming the size.
  r = sparsp::test::run("check-published --require-tau 0.5 " + file);
  CHECK(r.rc == 1);
  CHECK(r.err.find("size disagree: Kendall tau") != std::string::npos);
  CHECK(sparsp::test::run("check-published --require-tau -0.7 " + file).rc == 0);
  // Hand-made times are far from the model (ms vs tens of us): the error criterion fails.
  CHECK(sparsp::test::run("check-published --require-median-error 0.25 " + file).rc == 1);
}

TEST_CASE("check-published: every file in configs/published runs (pending ones: exit 2)") {
  const fs::path dir = fs::path(SPARSP_SOURCE_DIR) / "configs" / "published";
  int ran = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto j = nlohmann::json::parse(in);
    const bool pending =
        j.contains("notes") && j["notes"].get<std::string>().rfind("PENDING", 0) == 0;
    CAPTURE(e.path().string());
    const auto r = sparsp::test::run("check-published --json " + e.path().string());
    if (pending) {
      CHECK((r.rc == 0 || r.rc == 2));
      continue;
    }
    REQUIRE(r.rc == 0);
    const auto out = nlohmann::json::parse(r.out);
    for (const auto& s : out["files"][0]["sizes"])
      for (const auto& row : s["rows"]) CHECK(row["predicted_time_s"].get<double>() > 0);
    ++ran;
  }
  CHECK(ran >= 7);  // every file of configs/published (none pending)
}
