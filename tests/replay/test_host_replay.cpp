// Host-backend replay: the whole path above the CUDA line (lowering, integrity, timing, trace).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "fixtures.hpp"
#include "sparsp/replay.hpp"

using namespace sparsp;

namespace {
// test::toy_plan(): 3 ranks, 6 blocks (2 per rank), block = 2 (K,V) * 4 tokens * 2 heads * 8 dim
// * 2 B = 256 B.
// Layer 0: ring step: gpu0 -> gpu1 blocks {0,1}; gpu1 forwards {0,1} to gpu2 after it (a block
// gpu1 does not own, so integrity checks the forwarding); gpu2 -> gpu0 {4,5} host-staged in
// 100-byte chunks (rounded to the 256-byte alignment, so 2 chunks); an opaque 1000-byte transfer
// gpu1 -> host0; compute on gpu2 after the forward.
policy::Plan ring_plan() {
  policy::Plan p = test::toy_plan();
  policy::LayerPlan L;
  L.layer = 0;
  L.repeat = 4;
  L.work.transfers.push_back(test::transfer("a", "gpu0", "gpu1", 512, {0, 1}));
  auto fwd = test::transfer("fwd", "gpu1", "gpu2", 512, {0, 1});
  fwd.after = {"a"};
  L.work.transfers.push_back(fwd);
  auto st = test::transfer("staged", "gpu2", "gpu0", 512, {4, 5});
  st.route = topology::RouteMode::host_staged;
  st.chunk_bytes = 100;
  L.work.transfers.push_back(st);
  L.work.transfers.push_back(test::transfer("opaque", "gpu1", "host0", 1000, {}));
  sim::ComputeTask c;
  c.id = "attn2";
  c.gpu = "gpu2";
  c.duration_s = 1e-4;
  c.after = {"fwd"};
  L.work.compute.push_back(c);
  p.layers.push_back(L);
  return p;
}

replay::ReplayOptions host_opts() { return test::host_options(1, 3); }
}  // namespace

TEST_CASE("host replay moves and verifies every byte") {
  auto r = replay::run(ring_plan(), host_opts());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  // Per iteration: 3 block transfers of 512 B + 1000 B opaque = 2536 B moved, and received:
  // gpu1 {0,1}, gpu2 {0,1}, gpu0 {4,5} = 6 blocks * 256 + 1000 = 2536 B verified.
  // 4 iterations (1 warm-up + 3 timed).
  CHECK(r->bytes_moved == doctest::Approx(4 * 2536.0));
  CHECK(r->bytes_verified == doctest::Approx(4 * 2536.0));
  CHECK(r->blocks_verified == 4 * 6);
  REQUIRE(r->layers.size() == 1);
  const auto& L = r->layers[0];
  CHECK(L.repeat == 4);
  REQUIRE(L.activities.size() == 5);
  CHECK(L.activities[1].id == "fwd");
  // The forward starts after "a" ends; compute after the forward (dependencies were honoured).
  CHECK(L.activities[1].start_s >= L.activities[0].end_s);
  CHECK(L.activities[4].start_s >= L.activities[1].end_s);
  // Compute was emulated for 100 us: sleep_for never returns early.
  CHECK(L.activities[4].end_s - L.activities[4].start_s >= 1e-4);
  CHECK(L.makespan_s >= L.activities[4].end_s - 1e-12);
  CHECK(r->total_s == doctest::Approx(4 * L.makespan_s));
}

TEST_CASE("integrity check catches a corrupted block") {
  auto o = host_opts();
  o.corrupt_block = 4;  // received by gpu0 through host staging
  auto r = replay::run(ring_plan(), o);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 1);
  CHECK(r.error().message.find("block 4 (owner gpu2) at gpu0") != std::string::npos);
}

TEST_CASE("integrity check catches a missing transfer, also downstream of a forward") {
  auto o = host_opts();
  o.skip_transfer = "a";  // gpu1 never receives {0,1}: it forwards poison to gpu2
  auto r = replay::run(ring_plan(), o);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 1);
  // First failing check is block 0 at gpu1 (checks are in (holder, block) order: gpu0's 4,5 pass).
  CHECK(r.error().message.find("block 0 (owner gpu0) at gpu1") != std::string::npos);

  o.skip_transfer = "opaque";
  r = replay::run(ring_plan(), o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("transfer \"opaque\" payload at host0") != std::string::npos);
}

TEST_CASE("plans that send blocks the source never holds are refused before any work") {
  auto p = ring_plan();
  p.layers[0].work.transfers[1].kv_blocks = {0, 4};  // gpu1 neither owns nor receives block 4
  auto r = replay::run(p, host_opts());
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message.find("gpu1 sends block 4") != std::string::npos);

  auto o = host_opts();
  o.backend = "tpu";
  r = replay::run(ring_plan(), o);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  o = host_opts();
  o.devices = {0, 0};  // 3 ranks, 2 devices
  r = replay::run(ring_plan(), o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("2 devices but the plan has 3 ranks") != std::string::npos);
}

TEST_CASE("payload scale shrinks every payload") {
  auto o = host_opts();
  o.payload_scale = 0.5;
  o.warmup = 0;
  o.iterations = 1;
  auto r = replay::run(ring_plan(), o);
  REQUIRE(r.ok());
  // 6 blocks * 128 B + 500 B opaque = 1268 B.
  CHECK(r->bytes_verified == doctest::Approx(1268.0));
}

TEST_CASE("trace JSON round-trips") {
  const auto p = ring_plan();
  auto r = replay::run(p, host_opts());
  REQUIRE(r.ok());
  const std::string t = replay::trace_json(p, *r);
  auto back = replay::parse_trace(t, "t.json");
  REQUIRE(back.ok());
  CHECK(replay::trace_json(p, *back) == t);
  CHECK(back->layers[0].activities[2].id == "staged");
  CHECK(replay::perfetto_json(p, *r).find("\"traceEvents\"") != std::string::npos);
  CHECK(replay::summary_json(*r).find("\"bytes_verified\"") != std::string::npos);
  auto bad = replay::parse_trace("{\"schema\": \"x\"}", "t.json");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("t.json:/schema") == 0);
}

TEST_CASE("latency/bandwidth fit recovers a synthetic path") {
  // t = 10 us + x / 50 GB/s exactly: the fit must return those two numbers.
  std::vector<double> x, t;
  for (double s = 4096; s <= 256.0 * 1024 * 1024; s *= 4) {
    x.push_back(s);
    t.push_back(10e-6 + s / 50e9);
  }
  const auto f = replay::fit_latency_bandwidth("h2d:0", x, t);
  CHECK(f.latency_s == doctest::Approx(10e-6).epsilon(1e-6));
  CHECK(f.bandwidth_Bps == doctest::Approx(50e9).epsilon(1e-6));
}

TEST_CASE("a partial last block is inferred from transfer sizes and still checked block by block") {
  auto p = ring_plan();
  // Block 5 (the last) holds 100 of 256 bytes, as HunyuanVideo's 256-token text block does
  // beside 384-token video blocks: the staged transfer carries 256 + 100 = 356 bytes.
  p.layers[0].work.transfers[2].bytes = 356;
  auto o = host_opts();
  o.warmup = 0;
  o.iterations = 1;
  auto r = replay::run(p, o);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  // 4 blocks * 256 (gpu1, gpu2) + 256 + 100 (gpu0) + 1000 opaque = 2380 bytes, 6 blocks.
  CHECK(r->bytes_verified == doctest::Approx(2380.0));
  CHECK(r->blocks_verified == 6);
  o.corrupt_block = 5;
  r = replay::run(p, o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("block 5 (owner gpu2) at gpu0: byte 50 of 100") !=
        std::string::npos);
  // Explicit sizes win over the inference.
  p.block_bytes = {256, 256, 256, 256, 256, 100};
  o.corrupt_block = -1;
  r = replay::run(p, o);
  REQUIRE(r.ok());
  CHECK(r->bytes_verified == doctest::Approx(2380.0));
  auto back = policy::parse_plan(policy::to_json(p), "p.json");
  REQUIRE(back.ok());
  CHECK(back->block_bytes == p.block_bytes);
}
