#pragma once
// Plan-building fixtures shared by the replay tests (test_host_replay.cpp, test_plan_checks.cpp).
#include <string>
#include <utility>
#include <vector>

#include "sparsp/plan.hpp"
#include "sparsp/replay.hpp"

namespace sparsp::test {

/// A transfer `id` of `bytes` from `src` to `dst` carrying `kv_blocks` (empty: opaque payload).
inline sim::Transfer transfer(std::string id, std::string src, std::string dst, double bytes,
                              std::vector<int32_t> kv_blocks) {
  sim::Transfer t;
  t.id = std::move(id);
  t.src = std::move(src);
  t.dst = std::move(dst);
  t.bytes = bytes;
  t.kv_blocks = std::move(kv_blocks);
  return t;
}

/// The toy plan both suites start from, without layers: 3 ranks, 6 KV blocks owned
/// {0,0,1,1,2,2}, block = 2 (K,V) * 4 tokens * 2 heads * 8 dim * 2 B = 256 B, policy
/// contiguous/ring/sync.
inline policy::Plan toy_plan() {
  policy::Plan p;
  p.model = "toy";
  p.gpus = 3;
  p.block_tokens = 4;
  p.heads = 2;
  p.head_dim = 8;
  p.num_blocks = 6;
  p.kv_block_bytes = 256;
  p.policy = {"contiguous", "ring", "sync", {}};
  p.block_owner = {0, 0, 1, 1, 2, 2};
  return p;
}

/// Host-backend replay options with `warmup` + `iterations` runs.
inline replay::ReplayOptions host_options(int warmup, int iterations) {
  replay::ReplayOptions o;
  o.backend = "host";
  o.warmup = warmup;
  o.iterations = iterations;
  return o;
}

}  // namespace sparsp::test
