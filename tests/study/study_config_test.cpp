// Study JSON reading: fields, overrides, and errors naming the JSON pointer.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sparsp/study.hpp"

using namespace sparsp;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
const char* kMinimal = R"({"schema_version": 1, "topology": "8x-l40s-gen4-4switch",
  "pattern": "sta", "policies": ["contiguous/ring/sync"]})";
}  // namespace

TEST_CASE("the compiled-in default study is configs/studies/default.json") {
  const auto file = read(std::string(SPARSP_SOURCE_DIR) + "/configs/studies/default.json");
  REQUIRE_FALSE(file.empty());
  CHECK(nlohmann::json::parse(file) == nlohmann::json::parse(study::default_study_json()));
  auto s = study::default_study();
  REQUIRE(s.ok());
  CHECK(s->topologies == std::vector<std::string>{"8x-rtx4090-epyc-nop2p", "8x-l40s-gen4-4switch"});
  CHECK(s->model == "hunyuanvideo-sta");
  CHECK(s->pattern.kind == "sta");
  CHECK(s->pattern.block_tokens == 384);
  CHECK(s->num_gpus == 8);
  CHECK(s->policies.size() == 10);
  CHECK(s->baseline == "contiguous/ring/sm_overlap");
}

TEST_CASE("every study in configs/studies parses") {
  for (const char* name : {"default.json", "pcie-sta.json", "pcie-radial.json",
                           "replay-1gpu-sta.json", "topk-dynamic.json"}) {
    CAPTURE(name);
    auto s = study::load_study(std::string(SPARSP_SOURCE_DIR) + "/configs/studies/" + name);
    CHECK(s.ok());
    if (!s.ok()) MESSAGE(s.error().message);
  }
}

TEST_CASE("study fields") {
  auto s =
      study::parse_study(R"({"schema_version": 1, "topologies": ["a", "b"], "model": "cogvideox-5b",
    "pattern": {"kind": "radial", "block": 128, "decay": 0.5, "seed": 3},
    "gpus": ["gpu0", 2], "granularity": "head_block",
    "policies": ["contiguous/ring/sync", {"placement": "dependency_aware", "scheme": "demand_direct",
                 "runtime": "ce_decoupled", "params": {"tolerance": 1.05}, "route": "host_staged"}],
    "baseline": "contiguous/ring/sync", "steps": {"first": 2, "count": 3}, "layers": [0, 5],
    "compute": {"attention_efficiency": 0.5, "launch_overhead_us": 3},
    "sim": {"staging_chunk_overhead_us": 4.5}})",
                         "s.json");
  REQUIRE(s.ok());
  CHECK(s->topologies == std::vector<std::string>{"a", "b"});
  CHECK(s->pattern.kind == "radial");
  CHECK(s->pattern.decay == 0.5);
  CHECK(s->pattern.seed == 3);
  CHECK(s->gpus == std::vector<int>{0, 2});
  CHECK(s->granularity == policy::Granularity::head_block);
  REQUIRE(s->policies.size() == 2);
  CHECK(s->policies[1].params.at("host_staged") == 1.0);
  CHECK(s->policies[1].params.at("tolerance") == 1.05);
  CHECK(s->steps == std::vector<int>{2, 3, 4});
  CHECK(s->layers == std::vector<int>{0, 5});
  CHECK(s->attention_efficiency == 0.5);
  CHECK(s->sim.launch_overhead_s == doctest::Approx(3e-6));
  CHECK(s->sim.staging_chunk_overhead_s == doctest::Approx(4.5e-6));
  auto m = study::parse_study(kMinimal, "m.json");
  REQUIRE(m.ok());
  // Default: the H200 staged-pipeline fit, 6.25 us per chunk (replay/RESULTS.md, "staged:0").
  CHECK(m->sim.staging_chunk_overhead_s == doctest::Approx(6.25e-6));
}

TEST_CASE("study errors name the file and the JSON pointer") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {R"({"schema_version": 2})", "e.json:/schema_version: expected 1..1, got 2"},
      {R"({"schema_version": 1, "pattern": "sta", "policies": ["contiguous/ring/sync"]})",
       "e.json:/topology: missing"},
      {R"({"schema_version": 1, "topology": "x", "pattern": "sta", "policies": ["contiguous/ring"]})",
       "e.json:/policies/0: policy 'contiguous/ring': expected "
       "PLACEMENT/SCHEME/RUNTIME[:key=value,...]"},
      {R"({"schema_version": 1, "topology": "x", "pattern": "sta",
           "policies": [{"placement": "contiguous", "scheme": "ring", "runtime": "fast"}]})",
       "e.json:/policies/0: unknown runtime 'fast' (known: sync, sm_overlap, ce_decoupled)"},
      {R"({"schema_version": 1, "topology": "x", "pattern": {"kind": "sta", "tile": [6, 8]},
           "policies": ["contiguous/ring/sync"]})",
       "e.json:/pattern/tile: expected [t, h, w]"},
      {R"({"schema_version": 1, "topology": "x", "pattern": "sta", "gpus": [0, 0],
           "policies": ["contiguous/ring/sync"]})",
       "e.json:/gpus/1: GPU listed twice"},
      {R"({"schema_version": 1, "topology": "x", "pattern": "sta", "colour": 1,
           "policies": ["contiguous/ring/sync"]})",
       "e.json:/colour: unknown field"},
      {R"({"schema_version": 1, "topology": "x", "pattern": "sta",
           "policies": ["contiguous/ring/sync"], "sim": {"staging_chunk_overhead_us": -1}})",
       "e.json:/sim/staging_chunk_overhead_us: expected 0..1e+06, got -1"},
  };
  for (const auto& c : cases) {
    auto s = study::parse_study(c.text, "e.json");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == c.message);
    CHECK(s.error().exit_code == 2);
  }
}

TEST_CASE("JSON syntax errors report the line, not the byte offset") {
  // The stray x is on line 4, the 21st byte; nlohmann reports that 1-based byte offset (21).
  auto s = study::parse_study("{\n  \"name\": \"a\",\n\n  x\n}\n", "bad5.json");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().exit_code == 2);
  CHECK(s.error().message.rfind("bad5.json:4: invalid JSON", 0) == 0);
  // Truncated at the end of line 2.
  auto t = study::parse_study("{\n  \"name\": ", "t.json");
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.rfind("t.json:2: ", 0) == 0);
}
