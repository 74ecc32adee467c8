// Sweep files: axes, point order, JSON-pointer patching, and input errors (exit 2).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "sparsp/sweep.hpp"

using nlohmann::json;
using sparsp::study::make_point;
using sparsp::study::num_points;
using sparsp::study::parse_sweep;
using sparsp::study::point_coordinates;

namespace {
const char* kStudy = R"({"num_gpus": 8, "model": "hunyuanvideo-720p",
  "topologies": [{"name": "t", "template": {"sockets": 1, "switches_per_socket": 2,
                                            "gpus_per_switch": 4, "pcie_gen": 4, "p2p": true}}],
  "pattern": {"kind": "sta", "window": [3, 3, 3], "block": 384},
  "policies": [{"placement": "contiguous", "scheme": "ring", "runtime": "sync"}]})";

std::string sweep(const std::string& axes, const std::string& extra = "") {
  return std::string(R"({"schema_version": 1, "study": )") + kStudy + extra + R"(, "axes": )" +
         axes + "}";
}

std::string error_of(const std::string& text) {
  auto r = parse_sweep(text, "s.json", "");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_code == 2);
  return r.error().message;
}
}  // namespace

TEST_CASE("product axes: count, row-major order, patched study") {
  auto r = parse_sweep(sweep(R"([{"name": "gpus_per_switch", "values": [2, 4]},
      {"name": "block", "values": [128, 256, 384]}])"),
                       "s.json", "");
  REQUIRE(r.ok());
  // 2 values x 3 values = 6 points.
  CHECK(num_points(*r) == 6);
  // Row-major: the last axis varies fastest, so point 4 = (1, 1): gpus_per_switch=4, block=256.
  CHECK(point_coordinates(*r, 4) == std::vector<int>{1, 1});
  auto p = make_point(*r, 4);
  REQUIRE(p.ok());
  const json s = json::parse(p->study_json);
  // friendly names -> /topologies/0/template/gpus_per_switch and /pattern/block
  CHECK(s["topologies"][0]["template"]["gpus_per_switch"] == 4);
  CHECK(s["pattern"]["block"] == 256);
  CHECK(s["topologies"][0]["template"]["sockets"] == 1);  // untouched fields keep their values
  REQUIRE(p->settings.size() == 2);
  CHECK(p->settings[0].name == "gpus_per_switch");
  CHECK(p->settings[1].value_json == "256");
}

TEST_CASE("zip groups advance together, product with the rest") {
  auto r = parse_sweep(sweep(R"([{"zip": [{"name": "pcie_gen", "values": [3, 4, 5]},
                                    {"path": "/topologies/0/template/pcie_width", "values": [16, 16, 8]}]},
                                  {"name": "p2p", "values": [true, false]}])"),
                       "s.json", "");
  REQUIRE(r.ok());
  // 3 zipped pairs x 2 = 6 points; point 5 = pair 2 (gen 5, width 8), p2p false.
  CHECK(num_points(*r) == 6);
  CHECK(point_coordinates(*r, 5) == std::vector<int>{2, 2, 1});
  const json s = json::parse(make_point(*r, 5)->study_json);
  const json& t = s["topologies"][0]["template"];
  CHECK(t["pcie_gen"] == 5);
  CHECK(t["pcie_width"] == 8);  // new field under an existing object: added
  CHECK(t["p2p"] == false);
  // An axis given by path gets the pointer without its leading slash as its name.
  CHECK(r->axes[1].name == "topologies/0/template/pcie_width");
}

TEST_CASE("combine zip and ranges") {
  auto r =
      parse_sweep(sweep(R"([{"name": "density", "range": {"start": 0.5, "stop": 0.9, "step": 0.2}},
      {"name": "block", "range": {"start": 128, "stop": 384, "step": 128}}])",
                        R"(, "combine": "zip")"),
                  "s.json", "");
  REQUIRE(r.ok());
  // Ranges include the stop: 0.5, 0.7, 0.9 and 128, 256, 384; zipped -> 3 points.
  CHECK(num_points(*r) == 3);
  const json s = json::parse(make_point(*r, 2)->study_json);
  CHECK(s["pattern"]["density"].get<double>() == doctest::Approx(0.9));
  CHECK(s["pattern"]["block"] == 384);
}

TEST_CASE("range values are start + i*step rounded to the step's decimals (issue 18, defect 20)") {
  auto r = parse_sweep(
      sweep(R"([{"name": "sparsity", "range": {"start": 0.3, "stop": 0.98, "step": 0.02}}])"),
      "s.json", "");
  REQUIRE(r.ok());
  // (0.98 - 0.3) / 0.02 + 1 = 35 values; 0.3 + 2 * 0.02 was 0.33999999999999997 in the CSV.
  REQUIRE(r->axes[0].values_json.size() == 35);
  CHECK(r->axes[0].values_json[2] == "0.34");
  CHECK(r->axes[0].values_json[14] == "0.58");
  CHECK(r->axes[0].values_json[30] == "0.9");
  CHECK(r->axes[0].values_json[34] == "0.98");
}

TEST_CASE("array elements and whole objects as values") {
  auto r = parse_sweep(sweep(R"([{"name": "policy", "values": [
      {"placement": "striped", "scheme": "ring", "runtime": "sync"},
      {"placement": "balanced", "scheme": "demand_direct", "runtime": "ce_decoupled"}]}])"),
                       "s.json", "");
  REQUIRE(r.ok());
  const json s = json::parse(make_point(*r, 1)->study_json);
  CHECK(s["policies"].size() == 1);
  CHECK(s["policies"][0]["scheme"] == "demand_direct");
}

TEST_CASE("bad sweep input names the JSON pointer") {
  CHECK(
      error_of(
          sweep(
              R"([{"name": "block", "values": [128]}, {"name": "gpu_per_switch", "values": [2]}])"))
          .rfind("s.json:/axes/1/name: unknown axis \"gpu_per_switch\"", 0) == 0);
  CHECK(error_of(sweep(R"([{"name": "block", "values": []}])")) ==
        "s.json:/axes/0/values: empty axis (no values)");
  CHECK(error_of(sweep(R"([{"name": "block", "values": [128, "256"]}])")) ==
        "s.json:/axes/0/values/1: type mismatch: expected a number (as /pattern/block in the "
        "study), got a string");
  CHECK(error_of(sweep(R"([{"path": "/pattern/window", "values": [[3,3,3], 4]}])")) ==
        "s.json:/axes/0/values/1: type mismatch: expected an array (as /pattern/window in the "
        "study), got a number");
  CHECK(
      error_of(sweep(
          R"([{"zip": [{"name": "block", "values": [1, 2]}, {"name": "window", "values": [[1,1,1]]}]}])")) ==
      "s.json:/axes/0/zip/1: zipped axes need equal lengths: 1 values vs 2");
  CHECK(error_of(sweep(R"([{"path": "/no/such", "values": [1]}])")) ==
        "s.json:/axes/0/path: the study has no object at /no to hold /no/such");
  CHECK(error_of(sweep(R"([{"path": "/policies/0/scheme/x", "values": [1]}])")) ==
        "s.json:/axes/0/path: the study has no object at /policies/0/scheme to hold "
        "/policies/0/scheme/x (it is a string; inline that part of the study as an object to "
        "sweep its fields)");
  CHECK(
      error_of(sweep(R"([{"name": "block", "values": [1]}, {"name": "block", "values": [2]}])")) ==
      "s.json:/axes/1/name: duplicate axis name \"block\"");
  CHECK(
      error_of(
          sweep(
              R"([{"name": "policies", "values": [[]]}, {"name": "scheme", "values": ["ring"]}])"))
          .find("overlap") != std::string::npos);
  CHECK(error_of(sweep(R"([])")) == "s.json:/axes: expected a non-empty array of axes");
  CHECK(error_of(sweep(R"([{"name": "block", "values": [1], "vals": 2}])")) ==
        "s.json:/axes/0/vals: unknown key (expected name, path, values, range, description)");
  CHECK(error_of(R"({"study": {}, "axes": [{"name": "block", "values": [1]}], "extra": 1})") ==
        "s.json:/extra: unknown key");
  CHECK(error_of("{\n\"study\": ,}").rfind("s.json:2: invalid JSON", 0) == 0);
  CHECK(
      error_of(
          R"({"study": "/nonexistent/study.json", "axes": [{"name": "block", "values": [1]}]})") ==
      "s.json:/study: /nonexistent/study.json: cannot open file");
}

TEST_CASE("a referenced topology file is inlined to sweep its template, sparsity = 1 - density") {
  auto r = sparsp::study::load_sweep(SPARSP_TEST_DATA_DIR "/sweep/gps.json");
  REQUIRE(r.ok());
  CHECK(r->base_dir == SPARSP_TEST_DATA_DIR "/sweep");
  // Point 3 = (gpus_per_switch 4, sparsity 0.75).
  const json s = json::parse(make_point(*r, 3)->study_json);
  // "topo-template.json" was replaced by its content, then the template field was written.
  CHECK(s["topologies"][0]["name"] == "test-template");
  CHECK(s["topologies"][0]["template"]["gpus_per_switch"] == 4);
  CHECK(s["topologies"][0]["template"]["sockets"] == 1);
  // sparsity 0.75 -> density 1 - 0.75 = 0.25 (exact in binary floating point).
  CHECK(s["pattern"]["density"].get<double>() == 0.25);
  CHECK(make_point(*r, 3)->settings[1].value_json == "0.75");
}

TEST_CASE("policy strings become objects to sweep their parameters, topology -> topologies") {
  auto r = parse_sweep(R"({"study": {"topology": "no-such-preset", "pattern": {"kind": "sta"},
      "policies": ["contiguous/ring/sm_overlap:skip_empty=1", "balanced/demand_direct/sync"]},
      "axes": [{"name": "comm_sms", "values": [8, 16]}, {"name": "topology", "values": ["a", "b"]}]})",
                       "s.json", "");
  REQUIRE(r.ok());
  const json s = json::parse(make_point(*r, 3)->study_json);
  // Point 3 = (comm_sms 16, topology "b"); "topology" was moved into the list "topologies".
  CHECK(s["topologies"] == json::array({"b"}));
  CHECK_FALSE(s.contains("topology"));
  CHECK(s["policies"][0] == json::parse(R"({"placement": "contiguous", "scheme": "ring",
      "runtime": "sm_overlap", "params": {"skip_empty": 1.0, "comm_sms": 16}})"));
  CHECK(s["policies"][1] == "balanced/demand_direct/sync");  // untouched
}

TEST_CASE("staging_chunk_overhead_us names /sim/staging_chunk_overhead_us") {
  auto r = parse_sweep(R"({"schema_version": 1, "study": {"sim": {"staging_buffers": 2}},
      "axes": [{"name": "staging_chunk_overhead_us", "values": [0, 6.25]}]})",
                       "s.json", "");
  REQUIRE(r.ok());
  CHECK(r->axes[0].pointer == "/sim/staging_chunk_overhead_us");
  auto p = make_point(*r, 1);
  REQUIRE(p.ok());
  CHECK(json::parse(p->study_json)["sim"]["staging_chunk_overhead_us"] == 6.25);
}
