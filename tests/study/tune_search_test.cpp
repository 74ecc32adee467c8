// `tune` search on closed-form objectives: exhaustive and coordinate descent find the known
// minimum, respect the budget, and do not depend on the thread count.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>

#include "sparsp/sweep.hpp"

using nlohmann::json;
using namespace sparsp::study;

namespace {

// Study: one policy with chunk_bytes (MiB units here), staging_buffers and comm_sms.
const char* kTune = R"({"schema_version": 1,
  "study": {"policies": [{"scheme": "demand_direct", "chunk_mib": 4, "staging_buffers": 2, "comm_sms": 8}]},
  "parameters": [
    {"path": "/policies/0/chunk_mib", "name": "chunk_mib", "values": [1, 2, 4, 8, 16, 32]},
    {"path": "/policies/0/staging_buffers", "name": "staging_buffers", "values": [1, 2, 3, 4]},
    {"path": "/policies/0/comm_sms", "name": "comm_sms", "values": [4, 8, 16, 32]}],
  "objective": "e2e_time_s", "top": 3)";  // "policy": the default, /policies/0

TuneSpec spec_with(const std::string& extra) {
  auto r = parse_tune(std::string(kTune) + extra + "}", "tune.json", "");
  REQUIRE(r.ok());
  return r.value();
}

// Separable convex objective with its minimum at chunk 8, buffers 3, SMs 16:
// f = (log2 chunk - 3)^2 + (buffers - 3)^2 + (log2 sms - 4)^2 + 10.
// Default (4, 2, 8): 1 + 1 + 1 + 10 = 13; best: 10 -> margin 13/10 - 1 = 0.3.
ScoreFn objective(std::atomic<int>* calls = nullptr) {
  return [calls](const SweepPoint& p) {
    if (calls) ++*calls;
    const json s = json::parse(p.study_json)["policies"][0];
    const double c = std::log2(s["chunk_mib"].get<double>());
    const double b = s["staging_buffers"].get<double>();
    const double m = std::log2(s["comm_sms"].get<double>());
    if (b == 1 && m == 5) return Score{false, 0, "1 buffer with 32 SMs is invalid"};
    return Score{true, (c - 3) * (c - 3) + (b - 3) * (b - 3) + (m - 4) * (m - 4) + 10, ""};
  };
}

}  // namespace

TEST_CASE("tune file: default coordinates from the base study") {
  TuneSpec t = spec_with("");
  // Base values 4, 2, 8 sit at indices 2, 1, 1 of their value lists.
  CHECK(t.default_coords == std::vector<int>{2, 1, 1});
  CHECK(t.budget == 64);
  CHECK(t.space.groups.size() == 3);  // parameters always combine as a product
}

TEST_CASE("exhaustive search when the space fits the budget") {
  TuneSpec t = spec_with(R"(, "budget": 96)");
  std::atomic<int> calls{0};
  auto r = run_tune(t, objective(&calls), 2);
  REQUIRE(r.ok());
  CHECK(r->method_used == TuneMethod::exhaustive);
  CHECK(r->space_size == 96);  // 6 x 4 x 4
  CHECK(r->evaluations == 96);
  CHECK(calls.load() == 97);  // every point + the default
  // 96 points minus the 6 invalid (buffers 1, SMs 32, any chunk) are ranked.
  CHECK(r->ranked.size() == 90);
  CHECK(r->best.coords == std::vector<int>{3, 2, 2});  // chunk 8, buffers 3, SMs 16
  CHECK(r->best.score.value == 10.0);
  CHECK(r->has_default);
  CHECK(r->default_entry.score.value == 13.0);
  CHECK(r->margin == doctest::Approx(0.3));
  CHECK(
      json::parse(r->tuned_policy_json) ==
      json::parse(
          R"({"scheme": "demand_direct", "chunk_mib": 8, "staging_buffers": 3, "comm_sms": 16})"));
  // Second best: one unit off in one coordinate (value 11); ties broken by point index, so
  // the first is chunk 4 (index 2*16 + 2*4 + 2 = 42).
  CHECK(r->ranked[1].score.value == 11.0);
  CHECK(r->ranked[1].point.index == 42);
  const std::string report = format_tune_report(t, *r);
  CHECK(report.find("margin:  default is +30.00% vs best") != std::string::npos);
}

TEST_CASE("method exhaustive with a budget below the space size is refused (break-it defect 21)") {
  // It evaluated the first `budget` points in grid order and still called that exhaustive.
  TuneSpec t = spec_with(R"(, "budget": 2, "method": "exhaustive")");
  std::atomic<int> calls{0};
  auto r = run_tune(t, objective(&calls), 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message ==
        "tune.json:/method: \"exhaustive\" evaluates every one of the 96 configurations, but the "
        "budget is 2 (raise /budget or --budget, or use \"auto\" or \"coordinate_descent\")");
  CHECK(calls.load() == 0);
}

TEST_CASE("the report shows a setting the base study leaves out as unset, not null") {
  // The base study has no staging_buffers: the default configuration runs without it.
  TuneSpec t = spec_with(R"(, "budget": 96)");
  json base = json::parse(t.space.base_study_json);
  base["policies"][0].erase("staging_buffers");
  t.space.base_study_json = base.dump();
  auto r = run_tune(
      t,
      [](const SweepPoint&) {
        return Score{true, 1, ""};
      },
      1);
  REQUIRE(r.ok());
  REQUIRE(r->has_default);
  const std::string report = format_tune_report(t, *r);
  CHECK(report.find("staging_buffers=(unset: default)") != std::string::npos);
  CHECK(report.find("staging_buffers=null") == std::string::npos);
}

TEST_CASE("coordinate descent within a budget smaller than the space") {
  TuneSpec t = spec_with(R"(, "budget": 20, "seed": 7)");
  std::atomic<int> calls{0};
  auto r = run_tune(t, objective(&calls), 1);
  REQUIRE(r.ok());
  CHECK(r->method_used == TuneMethod::coordinate_descent);
  CHECK(r->evaluations <= 20);
  // From the default (4, 2, 8) one line per coordinate reaches the optimum of a separable
  // function: lines of 6 + 4 + 4 values, less the 2 repeats of the start = 12 points.
  CHECK(r->best.coords == std::vector<int>{3, 2, 2});
  CHECK(r->best.score.value == 10.0);
  // Same seed, more threads: identical ranking.
  auto r4 = run_tune(t, objective(), 4);
  REQUIRE(r4.ok());
  REQUIRE(r4->ranked.size() == r->ranked.size());
  for (size_t i = 0; i < r->ranked.size(); ++i)
    CHECK(r4->ranked[i].point.index == r->ranked[i].point.index);
}

TEST_CASE("bad tune input") {
  auto bad = [](const std::string& extra) {
    auto r = parse_tune(std::string(kTune) + extra + "}", "tune.json", "");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  CHECK(bad(R"(, "budget": 0)") == "tune.json:/budget: expected an integer >= 1");
  CHECK(bad(R"(, "method": "annealing")") ==
        "tune.json:/method: expected \"auto\", \"exhaustive\" or \"coordinate_descent\"");
  CHECK(bad(R"(, "policy": "/policies/3")") ==
        "tune.json:/policy: the study has no policy object at /policies/3");
  // A key given twice is an error, not "the last one wins" (issue 18, defect 11).
  CHECK(bad(R"(, "top": 4)") == "tune.json:/top: duplicate key \"top\" (each key may appear once)");
  auto r = parse_tune(R"({"study": {"a": 1}, "parameters": [{"path": "/a", "values": []}]})",
                      "tune.json", "");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "tune.json:/parameters/0/values: empty axis (no values)");
}

TEST_CASE("a tuned policy given as a string takes its object form") {
  // The parameter lies outside the policy (/steps), so nothing else rewrites the string.
  auto r = parse_tune(R"({"study": {"policies": ["contiguous/ring/sync:comm_sms=8"], "steps": 1},
      "parameters": [{"path": "/steps", "name": "steps", "values": [1, 2]}]})",
                      "tune.json", "");
  REQUIRE(r.ok());
  CHECK(json::parse(r->space.base_study_json)["policies"][0] ==
        json::parse(R"({"placement": "contiguous", "scheme": "ring", "runtime": "sync",
                        "params": {"comm_sms": 8.0}})"));
  auto bad = parse_tune(R"({"study": {"policies": ["contiguous/ring"]},
      "parameters": [{"path": "/policies", "name": "p", "values": [[]]}]})",
                        "tune.json", "");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.rfind("tune.json:/policy: ", 0) == 0);
}

TEST_CASE("score_from_evaluator picks the metric of one policy row") {
  PointEvaluator ev;
  ev.columns = {"policy", "e2e_time_s"};
  ev.evaluate = [](const SweepPoint& p) {
    const int x = json::parse(p.study_json)["x"].get<int>();
    if (x < 0) return PointOutcome{true, "negative x", {}, {}};
    // Row 0: baseline at 10 s; row 1: the tuned policy at x + 1 s.
    return PointOutcome{false, "", {{"\"base\"", "10.0"}, {"\"tuned\"", json(x + 1.0).dump()}}, {}};
  };
  auto score = score_from_evaluator(ev, "e2e_time_s", 1);
  REQUIRE(score.ok());
  SweepPoint p;
  p.study_json = R"({"x": 2})";
  const Score s = (*score)(p);
  CHECK(s.ok);
  CHECK(s.value == 3.0);  // x + 1
  p.study_json = R"({"x": -1})";
  CHECK_FALSE((*score)(p).ok);
  CHECK((*score)(p).reason == "negative x");
  auto none = score_from_evaluator(ev, "makespan_s", 0);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message ==
        "tune:/objective: unknown metric \"makespan_s\" (known: policy, e2e_time_s)");
}

TEST_CASE("no valid configuration: exit 2 when every point failed on its input, else exit 1") {
  // The 96-point space, exhaustive; every point invalid. Points are ranked by index, so the
  // "first" failure is point 0 (chunk 1, buffers 1, SMs 4) unless the run-time one is elsewhere.
  TuneSpec t = spec_with(R"(, "budget": 96)");
  auto input_only = [](const SweepPoint& p) {
    return Score{false, 0, "<point " + std::to_string(p.index) + ">:/pattern/block: bad", 2};
  };
  auto r = run_tune(t, input_only, 2);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message ==
        "tune.json: no valid configuration among 96 evaluated, each failed on its input (first: "
        "<point 0>:/pattern/block: bad)");
  // One run-time failure (point 5, e.g. out of memory) among input errors: exit 1, naming it.
  auto one_runtime = [](const SweepPoint& p) {
    if (p.index == 5) return Score{false, 0, "evaluator failed: std::bad_alloc", 1};
    return Score{false, 0, "<point " + std::to_string(p.index) + ">: bad", 2};
  };
  r = run_tune(t, one_runtime, 2);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 1);
  CHECK(r.error().message ==
        "tune.json: no valid configuration among 96 evaluated (first: evaluator failed: "
        "std::bad_alloc)");
}
