// Plan JSON round trip and error reporting (policy/plan_io.cpp, schema policy/PLAN.md).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "sparsp/plan.hpp"

using namespace sparsp;

namespace {
policy::Plan small_plan() {
  policy::Plan p;
  p.model = "toy";
  p.pattern = "dense";
  p.gpus = 2;
  p.block_tokens = 4;
  p.heads = 2;
  p.head_dim = 8;
  p.num_blocks = 4;
  p.kv_block_bytes = 2.0 * 4 * 2 * 8 * 2;  // K+V * tokens * heads * head_dim * bf16 = 256
  p.policy = {"contiguous", "demand_direct", "sync", {{"chunk_bytes", 128}, {"comm_sms", 4}}};
  p.block_owner = {0, 0, 1, 1};
  policy::LayerPlan L;
  L.step = 0;
  L.layer = 3;
  L.repeat = 7;
  sim::Transfer t;
  t.id = "t0";
  t.src = "gpu0";
  t.dst = "gpu1";
  t.bytes = 512;
  t.kv_blocks = {0, 1};
  t.route = topology::RouteMode::host_staged;
  t.chunk_bytes = 128;
  t.layer = 3;
  L.work.transfers.push_back(t);
  sim::ComputeTask c;
  c.id = "c1";
  c.gpu = "gpu1";
  c.duration_s = 1.5e-3;
  c.after = {"t0"};
  c.layer = 3;
  L.work.compute.push_back(c);
  p.layers.push_back(L);
  return p;
}
}  // namespace

TEST_CASE("plan JSON round-trips byte for byte") {
  const policy::Plan p = small_plan();
  const std::string a = policy::to_json(p);
  auto q = policy::parse_plan(a, "a.json");
  REQUIRE(q.ok());
  CHECK(q->gpus == 2);
  CHECK(q->kv_block_bytes == 256);
  CHECK(q->policy.params.at("chunk_bytes") == 128);
  REQUIRE(q->layers.size() == 1);
  CHECK(q->layers[0].repeat == 7);
  REQUIRE(q->layers[0].work.transfers.size() == 1);
  const auto& t = q->layers[0].work.transfers[0];
  CHECK(t.route == topology::RouteMode::host_staged);
  CHECK(t.kv_blocks == std::vector<int32_t>{0, 1});
  CHECK(t.layer == 3);
  CHECK(q->layers[0].work.compute[0].after == std::vector<std::string>{"t0"});
  CHECK(q->layers[0].work.compute[0].duration_s == 1.5e-3);
  CHECK(policy::to_json(*q) == a);
}

TEST_CASE("plan errors name the file and JSON pointer") {
  policy::Plan p = small_plan();
  p.layers[0].work.transfers[0].dst = "gpu9";  // only gpu0, gpu1 exist
  auto r = policy::parse_plan(policy::to_json(p), "bad.json");
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("bad.json:/layers/0/transfers/0/dst:") == 0);

  p = small_plan();
  p.layers[0].work.compute[0].after = {"nope"};
  r = policy::parse_plan(policy::to_json(p), "bad.json");
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("bad.json:/layers/0/compute/0/after/0:") == 0);

  p = small_plan();
  p.block_owner = {0, 0, 2, 1};  // rank 2 does not exist with gpus = 2
  r = policy::parse_plan(policy::to_json(p), "bad.json");
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("bad.json:/block_owner/2:") == 0);

  r = policy::parse_plan("{\n\"schema_version\": 1,\n  oops", "x.json");
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("x.json:3:") == 0);  // error on line 3
  CHECK(r.error().exit_code == 2);

  r = policy::load_plan("/nonexistent/plan.json");
  REQUIRE(!r.ok());
}

TEST_CASE("every committed plan loads, a hand-made plan names the scheme custom") {
  // replay/RESULTS.md replays these; once the loader required registered scheme names, the
  // hand-made ones ("handmade") were refused with exit 2 until they were renamed "custom".
  namespace fs = std::filesystem;
  int n = 0;
  for (const char* dir :
       {"/replay/results/plans-handmade", "/replay/results/x2/plans/hunyuan-sta",
        "/replay/results/x2/plans/wan14b-sta", "/tests/data/studies/replay-plans/sp2",
        "/tests/data/studies/replay-plans/sp4", "/replay/results/compute/plans"})
    if (fs::is_directory(std::string(SPARSP_SOURCE_DIR) + dir))
      for (const auto& e : fs::directory_iterator(std::string(SPARSP_SOURCE_DIR) + dir))
        if (e.path().extension() == ".json") {
          auto r = policy::load_plan(e.path().string());
          CHECK_MESSAGE(r.ok(), e.path().string() << ": " << (r.ok() ? "" : r.error().message));
          ++n;
        }
  // 7 hand-made, 12 + 12 two-GPU study plans, 8 + 8 replay plans, 4 real-compute ring plans
  CHECK(n == 7 + 12 + 12 + 8 + 8 + 4);
  std::ifstream in(std::string(SPARSP_SOURCE_DIR) +
                   "/replay/results/plans-handmade/local_p2p.json");
  auto j = nlohmann::ordered_json::parse(in);
  CHECK(j["policy"]["scheme"] == "custom");
  j["policy"]["scheme"] = "handmade";
  auto r = policy::parse_plan(j.dump(), "h.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("h.json:/policy/scheme: unknown scheme 'handmade'") == 0);
  j["policy"]["placement"] = "custom";  // "custom" is a scheme only
  j["policy"]["scheme"] = "custom";
  r = policy::parse_plan(j.dump(), "h.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("h.json:/policy/placement: unknown placement 'custom'") == 0);
}

TEST_CASE("a plan's layer plans are distinct (step, layer) pairs") {
  std::ifstream in(std::string(SPARSP_SOURCE_DIR) + "/replay/results/x2/plans/wan14b-sta/" +
                   "2x-h200-nvlink__dependency_aware_demand_direct_sync.plan.json");
  REQUIRE(in.good());
  auto j = nlohmann::ordered_json::parse(in);
  REQUIRE(policy::parse_plan(j.dump(), "p.json").ok());
  j["layers"].push_back(j["layers"][0]);  // the same (step 0, layer 0) again
  auto r = policy::parse_plan(j.dump(), "p.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "p.json:/layers/1: (step 0, layer 0) repeats /layers/0");
}

TEST_CASE("plan schema 2: compute kinds round-trip, schema 1 plans load as attention") {
  policy::Plan p = small_plan();
  CHECK(p.schema_version == 2);
  auto& c = p.layers[0].work.compute[0];
  c.what.kv_ranks = {0};
  c.what.head_begin = 0;
  c.what.head_end = 1;
  c.what.partial = true;
  sim::ComputeTask copy;
  copy.id = "c2";
  copy.gpu = "gpu0";
  copy.duration_s = 1e-5;
  copy.layer = 3;
  copy.what.kind = sim::TaskKind::copy;
  copy.what.bytes = 2097152;
  p.layers[0].work.compute.push_back(copy);
  const std::string a = policy::to_json(p);
  auto q = policy::parse_plan(a, "a.json");
  REQUIRE(q.ok());
  const auto& w = q->layers[0].work.compute;
  REQUIRE(w.size() == 2);
  CHECK(w[0].what.kind == sim::TaskKind::attention);
  CHECK(w[0].what.kv_ranks == std::vector<int>{0});
  CHECK(w[0].what.head_end == 1);
  CHECK(w[0].what.partial);
  CHECK(w[1].what.kind == sim::TaskKind::copy);
  CHECK(w[1].what.bytes == 2097152);
  CHECK(policy::to_json(*q) == a);

  // A schema-1 plan (no kind fields) loads; its tasks are attention.
  auto j = nlohmann::json::parse(a);
  j["schema_version"] = 1;
  for (auto& t : j["layers"][0]["compute"])
    for (const char* k : {"kind", "kv_ranks", "heads", "partial", "bytes"}) t.erase(k);
  auto old = policy::parse_plan(j.dump(), "old.json");
  REQUIRE(old.ok());
  CHECK(old->layers[0].work.compute[1].what.kind == sim::TaskKind::attention);
  // Written again, it is schema 2 (its tasks now carry their kind) and loads.
  const std::string rewritten = policy::to_json(*old);
  CHECK(nlohmann::json::parse(rewritten)["schema_version"] == 2);
  CHECK(policy::parse_plan(rewritten, "new.json").ok());
  // A schema-2 key in a schema-1 plan is refused at its pointer (break-it D2: it was read as
  // schema 2 silently).
  for (const char* key : {"kv_ranks", "partial", "kind"}) {
    CAPTURE(key);
    auto mixed = j;
    mixed["layers"][0]["compute"][0][key] =
        nlohmann::json::parse(a)["layers"][0]["compute"][0][key];
    auto m = policy::parse_plan(mixed.dump(), "mixed.json");
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().exit_code == 2);
    CHECK(m.error().message == "mixed.json:/layers/0/compute/0/" + std::string(key) +
                                   ": a schema 2 key, but the plan says schema_version 1; write "
                                   "schema_version 2 (policy/PLAN.md, compute kinds)");
  }

  // Bad kinds and fields of another kind are refused with their pointer.
  j = nlohmann::json::parse(a);
  j["layers"][0]["compute"][1]["kind"] = "matmul";
  auto bad = policy::parse_plan(j.dump(), "bad.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "bad.json:/layers/0/compute/1/kind: unknown kind \"matmul\" (known: attention, gemm, "
        "copy, other)");
  j = nlohmann::json::parse(a);
  j["layers"][0]["compute"][0]["bytes"] = 5;
  bad = policy::parse_plan(j.dump(), "bad.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "bad.json:/layers/0/compute/0/bytes: applies to kind \"copy\" only");
}

TEST_CASE("plan integers are range-checked at their pointer, never wrapped mod 2^32") {
  // Issue 18: get<int>() wrapped 4294967298 GPUs to 2; a fraction failed without its range.
  const nlohmann::ordered_json base = nlohmann::ordered_json::parse(policy::to_json(small_plan()));
  REQUIRE(policy::parse_plan(base.dump(), "p.json").ok());
  auto err = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    auto j = base;
    edit(j);
    auto r = policy::parse_plan(j.dump(), "p.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  const uint64_t wrap2 = (uint64_t{1} << 32) + 2;  // read as 2 by get<int>()
  CHECK(err([&](auto& j) { j["gpus"] = wrap2; }) ==
        "p.json:/gpus: expected an integer in 1..4096, got 4294967298");
  CHECK(err([&](auto& j) { j["schema_version"] = wrap2; }) ==
        "p.json:/schema_version: expected an integer in 1..1073741824, got 4294967298");
  CHECK(err([&](auto& j) { j["num_blocks"] = (uint64_t{1} << 32) + 4; }) ==
        "p.json:/num_blocks: expected an integer in 0..2147483647, got 4294967300");
  CHECK(err([&](auto& j) { j["heads"] = -2; }) ==
        "p.json:/heads: expected an integer in 0..4096, got -2");
  CHECK(err([&](auto& j) { j["head_dim"] = 8.5; }) ==
        "p.json:/head_dim: expected an integer in 0..65536, got 8.5");
  CHECK(err([&](auto& j) { j["block_tokens"] = "4"; }) ==
        "p.json:/block_tokens: expected an integer in 0..2147483647, got string");
  CHECK(err([&](auto& j) { j["dtype_bytes"] = 18446744073709551615ull; }) ==
        "p.json:/dtype_bytes: expected an integer in 1..8, got 18446744073709551615");
  CHECK(err([&](auto& j) { j["layers"][0]["step"] = wrap2; }) ==
        "p.json:/layers/0/step: expected an integer in 0..2147483647, got 4294967298");
  CHECK(err([&](auto& j) { j["layers"][0]["repeat"] = 2.5; }) ==
        "p.json:/layers/0/repeat: expected an integer in 1..2147483647, got 2.5");
  CHECK(err([&](auto& j) { j["layers"][0]["transfers"][0]["layer"] = wrap2 + 1; }) ==
        "p.json:/layers/0/transfers/0/layer: expected an integer in -1..2147483647, got "
        "4294967299");
  // -1 is sim::ComputeTask's "unset" layer (include/sparsp/sim.hpp), written as it is.
  CHECK(err([&](auto& j) { j["layers"][0]["compute"][0]["layer"] = -2; }) ==
        "p.json:/layers/0/compute/0/layer: expected an integer in -1..2147483647, got -2");
}

TEST_CASE("plan kv_heads and head ranges: kv_heads 0, schema 1 keys, heads past the plan's") {
  const nlohmann::ordered_json base = nlohmann::ordered_json::parse(policy::to_json(small_plan()));
  auto err = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    auto j = base;
    edit(j);
    auto r = policy::parse_plan(j.dump(), "p.json");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  // kv_heads written means K/V heads; 0 is none (absent is "as many as heads").
  CHECK(err([](auto& j) { j["kv_heads"] = 0; }) ==
        "p.json:/kv_heads: expected an integer in 1..4096, got 0");
  CHECK(err([](auto& j) {
          j["schema_version"] = 1;
          j["kv_heads"] = 1;
          j["layers"][0]["compute"][0].erase("kind");
        }) ==
        "p.json:/kv_heads: a schema 2 key, but the plan says schema_version 1; write "
        "schema_version 2 (policy/PLAN.md)");
  CHECK(err([](auto& j) {
          j["schema_version"] = 1;
          j["layers"][0]["compute"][0].erase("kind");
          j["layers"][0]["mask"] = nlohmann::ordered_json::object();
        }) ==
        "p.json:/layers/0/mask: a schema 2 key, but the plan says schema_version 1; write "
        "schema_version 2 (policy/PLAN.md)");
  // The plan has heads 2: a task's head range ends at 2 at most.
  CHECK(err([](auto& j) {
          j["layers"][0]["compute"][0]["heads"] = {0, 3};
        }) ==
        "p.json:/layers/0/compute/0/heads: expected [first, end) with 0 <= first < end <= 2 (the "
        "plan's heads)");
  auto ok = base;
  ok["layers"][0]["compute"][0]["heads"] = {1, 2};
  CHECK(policy::parse_plan(ok.dump(), "p.json").ok());
}
