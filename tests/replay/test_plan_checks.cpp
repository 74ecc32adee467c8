// Plan checks of KV payloads (policy/plan_io.cpp, replay/lower.cpp): a transfer naming kv_blocks
// must carry them whole and its source must hold them; ragged blocks are checked block by block.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sparsp/plan.hpp"
#include "sparsp/replay.hpp"

using namespace sparsp;

namespace {
using test::transfer;

// test::toy_plan(): 3 ranks, 6 blocks owned {0,0,1,1,2,2}; ragged sizes as tile padding gives them:
// block = 2 (K,V) * tokens * 2 heads * 8 dim * 2 B = 64 B per token, tokens {4,3,4,2,4,1}
// -> block_bytes {256,192,256,128,256,64}.
// a: gpu0 -> gpu1 {0,1} = 256 + 192 = 448 B; fwd: gpu1 -> gpu2 {0,1} after a (448 B);
// b: gpu2 -> gpu0 {4,5} = 256 + 64 = 320 B.
policy::Plan ragged_plan() {
  policy::Plan p = test::toy_plan();
  p.block_bytes = {256, 192, 256, 128, 256, 64};
  policy::LayerPlan L;
  L.work.transfers.push_back(transfer("a", "gpu0", "gpu1", 448, {0, 1}));
  auto fwd = transfer("fwd", "gpu1", "gpu2", 448, {0, 1});
  fwd.after = {"a"};
  L.work.transfers.push_back(fwd);
  L.work.transfers.push_back(transfer("b", "gpu2", "gpu0", 320, {4, 5}));
  p.layers.push_back(L);
  return p;
}

Result<policy::Plan> reparse(const policy::Plan& p) {
  return policy::parse_plan(policy::to_json(p), "p.json");
}

replay::ReplayOptions host_opts() { return test::host_options(0, 1); }
}  // namespace

TEST_CASE("a well-formed ragged plan loads") {
  auto r = reparse(ragged_plan());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
}

TEST_CASE("transfer bytes that do not match its blocks are refused with file and pointer") {
  auto p = ragged_plan();
  p.layers[0].work.transfers[0].bytes = 1000;  // blocks {0,1} hold 256 + 192 = 448
  auto r = reparse(p);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message.find("p.json:/layers/0/transfers/0/bytes: 1000 bytes, but its 2 "
                               "kv_blocks hold 448 bytes") == 0);
  // Half the payload (224 B) is refused too: no silent partial verification.
  p.layers[0].work.transfers[0].bytes = 224;
  r = reparse(p);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("p.json:/layers/0/transfers/0/bytes: 224 bytes") == 0);
  // In memory (replay::run without a file), lowering refuses it before any work.
  auto run = replay::run(p, host_opts());
  REQUIRE(!run.ok());
  CHECK(run.error().exit_code == 2);
  CHECK(run.error().message.find("/layers/0/transfers/0/bytes: 224 bytes, but its 2 kv_blocks "
                                 "hold 448 bytes") != std::string::npos);
}

TEST_CASE("without block_bytes only the last block may be partial, inferred once") {
  auto p = ragged_plan();
  p.block_bytes.clear();  // all 256 B, last inferred
  p.layers[0].work.transfers[0].bytes = 512;
  p.layers[0].work.transfers[1].bytes = 512;
  p.layers[0].work.transfers[2].bytes = 256 + 64;  // last block 5 holds 64 B
  auto r = reparse(p);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  // A second transfer carrying block 5 must agree with the inferred 64 B: 256 + 256 != 320.
  p.layers[0].work.transfers.push_back(transfer("c", "gpu2", "gpu1", 512, {4, 5}));
  r = reparse(p);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("p.json:/layers/0/transfers/3/bytes: 512 bytes, but its 2 "
                               "kv_blocks hold 320 bytes") == 0);
}

TEST_CASE("a sender must own each block or receive it earlier in dependency order") {
  auto p = ragged_plan();
  p.layers[0].work.transfers[0].kv_blocks = {0, 2};  // block 2 is gpu1's; 256 + 256 B
  p.layers[0].work.transfers[0].bytes = 512;
  p.layers[0].work.transfers[1].kv_blocks = {0};
  p.layers[0].work.transfers[1].bytes = 256;
  auto r = reparse(p);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message.find("p.json:/layers/0/transfers/0/kv_blocks/1: gpu0 sends block 2 "
                               "but neither owns it (owner gpu1)") == 0);
  // The forward without `after`: gpu1 receives {0,1} but not before it sends them.
  p = ragged_plan();
  p.layers[0].work.transfers[1].after.clear();
  r = reparse(p);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("p.json:/layers/0/transfers/1/kv_blocks/0: gpu1 sends block 0") ==
        0);
  // Ordered by a named stream instead: accepted (FIFO order is dependency order).
  p.layers[0].work.transfers[0].stream = "s";
  p.layers[0].work.transfers[1].stream = "s";
  r = reparse(p);
  CHECK_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  // Transitively through a compute task: a -> attn -> fwd.
  p = ragged_plan();
  sim::ComputeTask c;
  c.id = "attn";
  c.gpu = "gpu1";
  c.after = {"a"};
  p.layers[0].work.compute.push_back(c);
  p.layers[0].work.transfers[1].after = {"attn"};
  r = reparse(p);
  CHECK_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
}

TEST_CASE("dependency cycles are refused at load with file and pointer") {
  auto p = ragged_plan();
  p.layers[0].work.transfers[0].after = {"fwd"};
  auto r = reparse(p);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("p.json:/layers/0/transfers/0: dependency cycle through \"a\"") ==
        0);
}

TEST_CASE("ragged blocks are verified block by block") {
  auto loaded = reparse(ragged_plan());
  REQUIRE(loaded.ok());
  auto o = host_opts();
  auto r = replay::run(*loaded, o);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  // Received copies: gpu1 {0,1} 448, gpu2 {0,1} 448, gpu0 {4,5} 320 -> 1216 B in 6 blocks.
  CHECK(r->bytes_verified == doctest::Approx(1216.0));
  CHECK(r->blocks_verified == 6);
  // Corruption inside the 64-byte block 5 (at gpu0) is caught: corrupt() flips the middle byte.
  o.corrupt_block = 5;
  r = replay::run(*loaded, o);
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 1);
  CHECK(r.error().message.find("block 5 (owner gpu2) at gpu0: byte 32 of 64") != std::string::npos);
}
