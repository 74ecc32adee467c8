// validate's input errors: every one is "<file>:<place>: <what>", file = the plan or trace path
// (ValidateOptions::plan_source / trace_source) or the topology path, place = a JSON pointer.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "sparsp/plan.hpp"
#include "sparsp/replay.hpp"

namespace fs = std::filesystem;
using namespace sparsp;

namespace {
const std::string kPlanPath =
    (fs::path(SPARSP_TEST_DATA_DIR) / "studies" / "replay-plans" / "sp2" /
     "4x-h200-pcie-replay__contiguous_allgather_sync_ce_only-1_host_staged-1.plan.json")
        .string();

// A trace that matches the plan: per layer plan its (step, layer) and the plan's activity ids.
replay::ReplayResult matching_trace(const policy::Plan& p) {
  replay::ReplayResult r;
  for (const auto& L : p.layers) {
    replay::LayerReplay lr;
    lr.step = L.step;
    lr.layer = L.layer;
    lr.repeat = L.repeat;
    lr.makespan_s = 1e-3;
    for (const auto& t : L.work.transfers) {
      sim::ActivityResult a;
      a.id = t.id;
      a.where = t.src + "->" + t.dst;
      a.end_s = 1e-4;
      a.bytes = t.bytes;
      lr.activities.push_back(a);
    }
    for (const auto& c : L.work.compute) {
      sim::ActivityResult a;
      a.id = c.id;
      a.where = c.gpu;
      a.is_transfer = false;
      a.end_s = 1e-4;
      lr.activities.push_back(a);
    }
    r.layers.push_back(lr);
  }
  return r;
}

replay::ValidateOptions named() {
  replay::ValidateOptions o;
  o.plan_source = "p.plan.json";
  o.trace_source = "t.trace.json";
  return o;
}

std::string error_of(const policy::Plan& p, const replay::ReplayResult& t,
                     const replay::ValidateOptions& o = named()) {
  auto r = replay::validate(p, t, o);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  return r.error().message;
}
}  // namespace

TEST_CASE("validate errors name the trace or plan file and the JSON pointer") {
  auto plan = policy::load_plan(kPlanPath);
  REQUIRE(plan.ok());
  REQUIRE(!plan->layers.empty());
  REQUIRE(plan->layers[0].work.transfers.size() >= 2);
  const auto good = matching_trace(*plan);
  // The matching trace validates (the tests below would pass for the wrong reason otherwise).
  REQUIRE(replay::validate(*plan, good, named()).ok());

  SUBCASE("an activity of the trace that the plan lacks: trace file, activity pointer") {
    auto t = good;
    t.layers[0].activities[1].id = "nosuch";
    CHECK(error_of(*plan, t) ==
          "t.trace.json:/layers/0/activities/1/id: trace activity \"nosuch\" is not in the plan "
          "(p.plan.json:/layers/0)");
  }
  SUBCASE("a plan activity missing from the trace") {
    auto t = good;
    const std::string id = t.layers[0].activities[0].id;
    t.layers[0].activities.erase(t.layers[0].activities.begin());
    CHECK(error_of(*plan, t) == "t.trace.json:/layers/0/activities: the plan's activity \"" + id +
                                    "\" (p.plan.json:/layers/0) is missing from the trace");
  }
  SUBCASE("bytes, endpoints or kind that differ from the plan") {
    auto t = good;
    t.layers[0].activities[0].bytes = 5;
    CHECK(error_of(*plan, t).rfind("t.trace.json:/layers/0/activities/0/bytes: replayed 5 bytes but "
                                   "the plan moves ",
                                   0) == 0);
    t = good;
    t.layers[0].activities[0].where = "gpu9->gpu8";
    CHECK(error_of(*plan, t).rfind("t.trace.json:/layers/0/activities/0/where: \"gpu9->gpu8\"", 0) ==
          0);
    t = good;
    t.layers[0].activities[0].is_transfer = false;
    CHECK(error_of(*plan, t).rfind("t.trace.json:/layers/0/activities/0/is_transfer: ", 0) == 0);
    // A scaled run (payload_scale 0.5) carries half the bytes and validates.
    t = good;
    t.payload_scale = 0.5;
    for (auto& a : t.layers[0].activities) a.bytes *= 0.5;
    CHECK(replay::validate(*plan, t, named()).ok());
  }
  SUBCASE("a compute task on another GPU, a layer plan of another repeat count") {
    auto t = good;
    auto& acts = t.layers[0].activities;
    auto c = std::find_if(acts.begin(), acts.end(), [](const auto& a) { return !a.is_transfer; });
    REQUIRE(c != acts.end());
    c->where = "gpu7";
    CHECK(error_of(*plan, t).find("/where: \"gpu7\" but the plan's compute task") !=
          std::string::npos);
    t = good;
    t.layers[0].repeat += 1;
    CHECK(error_of(*plan, t).rfind("t.trace.json:/layers/0/repeat: ", 0) == 0);
  }
  SUBCASE("a trace of another plan: ranks, model, policy") {
    auto t = good;
    t.gpus = plan->gpus + 1;
    CHECK(error_of(*plan, t).rfind("t.trace.json:/gpus: ", 0) == 0);
    t = good;
    t.policy = "contiguous/ring/sync";
    CHECK(error_of(*plan, t).rfind("t.trace.json:/policy: ", 0) == 0);
  }
  SUBCASE("a layer plan of another (step, layer)") {
    auto t = good;
    t.layers[0].step = 7;
    CHECK(error_of(*plan, t).rfind("t.trace.json:/layers/0: layer plan is (step 7, layer ", 0) ==
          0);
  }
  SUBCASE("more layer plans in the trace than in the plan") {
    auto t = good;
    t.layers.push_back(t.layers[0]);
    CHECK(error_of(*plan, t) ==
          "t.trace.json:/layers: the trace has " + std::to_string(t.layers.size()) +
              " layer plans, the plan (p.plan.json) only " + std::to_string(plan->layers.size()));
  }
  SUBCASE("a plan transfer the simulator refuses: plan file, pointer into the layer plan") {
    auto p = *plan;
    p.layers[0].work.transfers[1].src = "gpu99";
    auto t = good;
    t.layers[0].activities[1].where.clear();  // (an edited plan: the trace's endpoints differ)
    CHECK(error_of(p, t) == "p.plan.json:/layers/0/transfers/1/src: unknown endpoint 'gpu99'");
  }
  SUBCASE("no embedded topology and no --topology") {
    auto p = *plan;
    p.topology_json.clear();
    CHECK(error_of(p, good) ==
          "p.plan.json:/topology: the plan has no embedded topology; pass --topology");
  }
  SUBCASE("an embedded topology with too few GPUs") {
    auto p = *plan;
    p.gpus = 64;
    const std::string e = error_of(p, good);
    CHECK(e.rfind("p.plan.json:/topology: topology ", 0) == 0);
    CHECK(e.find("GPUs; the plan needs 64 (p.plan.json:/gpus)") != std::string::npos);
  }
  SUBCASE("a --topology file that does not exist names that file") {
    auto o = named();
    o.topology_path = "/nonexistent/topo.json";
    CHECK(error_of(*plan, good, o).rfind("/nonexistent/topo.json", 0) == 0);
  }
}

TEST_CASE("trace files are checked strictly: keys, numbers, ids, makespan") {
  const std::string head =
      R"({"schema": "sparsp.trace", "schema_version": 1, "layers": [{"step": 0, "layer": 0, )";
  auto err = [](const std::string& text) {
    auto r = replay::parse_trace(text, "t.json");
    REQUIRE(!r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  const std::string act = R"({"id": "a", "start_s": 0, "end_s": 0.001, "bytes": 10})";
  // The well-formed base parses.
  REQUIRE(replay::parse_trace(head + R"("makespan_s": 0.001, "activities": [)" + act + "]}]}",
                              "t.json")
              .ok());
  CHECK(err(R"({"schema": "sparsp.trace", "schema_version": 1, "bogus": 1, "layers": []})") ==
        "t.json:/bogus: unknown key 'bogus'");
  CHECK(err(R"({"schema": "sparsp.trace", "schema_version": 1, "layers": []})") ==
        "t.json:/layers: no layer plans (an empty trace has nothing to compare)");
  CHECK(err(head + R"("makespan_s": -1, "activities": []}]})")
            .rfind("t.json:/layers/0/makespan_s: must be a finite number", 0) == 0);
  CHECK(err(head + R"("makespan_s": 0, "activities": [)" + act + "]}]}") ==
        "t.json:/layers/0/makespan_s: must be > 0 for a layer plan with activities");
  CHECK(err(head + R"("makespan_s": 0.001, "activities": [)" + act + "," + act + "]}]}") ==
        "t.json:/layers/0/activities/1/id: duplicate id \"a\"");
  CHECK(err(head + R"("makespan_s": 0.001, "activities": [{"id": "a", "start_s": 0.002, "end_s": 0.001}]}]})")
            .rfind("t.json:/layers/0/activities/0/end_s: ends before it starts", 0) == 0);
  CHECK(err(head + R"("makespan_s": 0.0001, "activities": [)" + act + "]}]}") ==
        "t.json:/layers/0/makespan_s: is 0.000100 s but an activity ends at 0.001000 s (the "
        "activities are the run whose makespan this is)");
  CHECK(err(R"({"schema": "sparsp.trace", "schema_version": 1, "compute_emulated": "no", "layers": []})") ==
        "t.json:/compute_emulated: expected true or false, got \"no\"");
  CHECK(err(head + R"("makespan_s": 0.001, "activities": [{"id": "a", "start_s": 0, "end_s": -1}]}]})")
            .rfind("t.json:/layers/0/activities/0/end_s: must be a finite number", 0) == 0);
  // A syntax error gives the line.
  CHECK(err("{\n\"schema\": \"sparsp.trace\",\n oops}").rfind("t.json:3: invalid JSON", 0) == 0);
}

TEST_CASE("trace files: wrong types, devices, output_check and compute are errors at a pointer") {
  // Issue 18, last break-it pass: these were a library exception without a pointer, or accepted.
  const std::string top = R"({"schema": "sparsp.trace", "schema_version": 1, )";
  const std::string layers =
      R"("layers": [{"step": 0, "layer": 0, "makespan_s": 0.001, "activities": []}]})";
  auto err = [](const std::string& text) {
    auto r = replay::parse_trace(text, "t.json");
    REQUIRE(!r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  REQUIRE(replay::parse_trace(top +
                                  R"("gpus": 2, "devices": [0, 0], "compute": "real", )"
                                  R"("output_check": {"checked_blocks": 3, "max_abs_error": 0, )"
                                  R"("tolerance": 0.01, "passed": true}, )" +
                                  layers,
                              "t.json")
              .ok());
  CHECK(err(top + R"("backend": 7, )" + layers) ==
        "t.json:/backend: expected a string, got number");
  CHECK(err(top + R"("compute": 1, )" + layers) ==
        "t.json:/compute: expected \"real\", \"emulated\" or \"none\", got 1");
  CHECK(err(top + R"("devices": "0,1", )" + layers) ==
        "t.json:/devices: expected an array of device indices, got string");
  CHECK(err(top + R"("devices": [0, -1], )" + layers) ==
        "t.json:/devices/1: expected a device index in 0..1023, got -1");
  CHECK(err(top + R"("gpus": 2, "devices": [0], )" + layers) ==
        "t.json:/devices: 1 entries, but /gpus is 2 (one device per rank)");
  CHECK(err(top + R"("gpus": 1.5, )" + layers) == "t.json:/gpus: expected an integer, got 1.5");
  CHECK(err(top +
            R"("compute": "real", "output_check": {"checked_blocks": "3", )"
            R"("max_abs_error": 0, "tolerance": 0.01, "passed": true}, )" +
            layers) == "t.json:/output_check/checked_blocks: expected a number");
  CHECK(err(top +
            R"("compute": "real", "output_check": {"checked_blocks": 3, )"
            R"("max_abs_error": 0, "tolerance": 0.01, "passed": "yes"}, )" +
            layers) == "t.json:/output_check/passed: expected true or false, got \"yes\"");
  CHECK(err(top +
            R"("compute": "real", "output_check": {"checked_blocks": 3, "bogus": 1, )"
            R"("max_abs_error": 0, "tolerance": 0.01, "passed": true}, )" +
            layers) == "t.json:/output_check/bogus: unknown key 'bogus'");
  CHECK(err(top +
            R"("compute": "emulated", "output_check": {"checked_blocks": 3, )"
            R"("max_abs_error": 0, "tolerance": 0.01, "passed": true}, )" +
            layers) ==
        "t.json:/output_check: an output check, but /compute is \"emulated\" (only real compute "
        "has outputs to check)");
  CHECK(err(top + R"("layers": [{"step": 0, "layer": 0, "makespan_s": 0.001, "activities": )"
                  R"([{"id": 5, "start_s": 0, "end_s": 0}]}]})") ==
        "t.json:/layers/0/activities/0/id: expected a string, got number");
  CHECK(err(top + R"("layers": [{"step": 0, "layer": 0, "makespan_s": 0.001, "activities": )"
                  R"([{"id": "a", "is_transfer": 1, "start_s": 0, "end_s": 0}]}]})") ==
        "t.json:/layers/0/activities/0/is_transfer: expected true or false, got 1");
  CHECK(err(top + R"("layers": [{"step": 0, "layer": 0, "makespan_s": 0.001, )"
                  R"("makespan_samples_s": 0.001, "activities": []}]})") ==
        "t.json:/layers/0/makespan_samples_s: expected an array of times, got number");
  // Contradictions (last break-it pass: accepted, then modelled as compute MAPE 100%).
  CHECK(err(top + R"("compute": "real", "compute_emulated": false, )" + layers) ==
        "t.json:/compute_emulated: false, but /compute is \"real\" (compute_emulated is true "
        "exactly when compute ran)");
  CHECK(err(top + R"("compute": "none", "compute_emulated": true, )" + layers) ==
        "t.json:/compute_emulated: true, but /compute is \"none\" (compute_emulated is true "
        "exactly when compute ran)");
  CHECK(err(top +
            R"("compute": "real", "output_check": {"checked_blocks": 3, )"
            R"("max_abs_error": 5, "tolerance": 0.01, "passed": false}, )" +
            layers) ==
        "t.json:/output_check/passed: false: the replay's output check failed, so its timings "
        "are of a run that computed the wrong attention");
  CHECK(err(top +
            R"("output_check": {"checked_blocks": 3, )"
            R"("max_abs_error": 0, "tolerance": 0.01, "passed": true}, )" +
            layers) ==
        "t.json:/output_check: an output check, but /compute is \"emulated\" (absent: read as "
        "emulated) (only real compute has outputs to check)");
}

TEST_CASE("validate --no-compute on a trace that records compute is refused, not 100 % error") {
  auto plan = policy::load_plan(kPlanPath);
  REQUIRE(plan.ok());
  auto o = named();
  o.no_compute = true;
  auto t = matching_trace(*plan);
  t.compute = "real";  // recorded by the replay (compute_recorded: the "compute" key was there)
  CHECK(error_of(*plan, t, o) ==
        "<command line>:--no-compute: t.trace.json records compute \"real\" (the replay "
        "computed); --no-compute is for traces of replay --no-compute that do not say so");
  t.compute = "none";  // a --no-compute replay: the flag agrees
  CHECK(replay::validate(*plan, t, o).ok());
  t.compute = "emulated";
  t.compute_recorded = false;  // an old trace that does not say: the flag decides
  CHECK(replay::validate(*plan, t, o).ok());
}

TEST_CASE("no transfer compared: MAPE is n/a (text) and null (JSON), not 0.00%") {
  // Every measured duration 0 (break-it defect 22): nothing was compared, so there is no error
  // figure to give.
  replay::ValidateReport r;
  r.topology_name = "t";
  r.transfers = 0;
  const std::string table = replay::validate_table(r);
  CHECK(table.find("transfer durations: MAPE n/a (no transfer with a measured duration above 0)") !=
        std::string::npos);
  CHECK(table.find("MAPE 0.00%  p50") == std::string::npos);
  const std::string json = replay::validate_json(r);
  CHECK(json.find("\"mape\": null") != std::string::npos);
  CHECK(json.find("\"max_error\": null") != std::string::npos);
  r.transfers = 3;
  r.mape = 0.25;
  CHECK(replay::validate_table(r).find("MAPE 25.00%") != std::string::npos);
}
