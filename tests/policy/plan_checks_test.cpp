// Plan-file input checks a fresh-user test found missing (policy/plan_io.cpp, policy/PLAN.md).
// Each case failed before the fix.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "sparsp/plan.hpp"
#include "sparsp/policy.hpp"
#include "sparsp/topology.hpp"

using nlohmann::ordered_json;
using namespace sparsp;

namespace {

// 2 ranks, 4 blocks of 256 B (2 (K,V) * 4 tokens * 2 heads * 8 dim * 2 B) owned {0,0,1,1};
// one transfer gpu0 -> gpu1 of blocks {0,1} = 512 B and one compute task on gpu1 after it.
ordered_json good_plan() {
  policy::Plan p;
  p.model = "toy";
  p.gpus = 2;
  p.block_tokens = 4;
  p.heads = 2;
  p.head_dim = 8;
  p.num_blocks = 4;
  p.kv_block_bytes = 256;
  p.policy = {"contiguous", "ring", "sync", {}};
  p.block_owner = {0, 0, 1, 1};
  policy::LayerPlan L;
  sim::Transfer t;
  t.id = "t0";
  t.src = "gpu0";
  t.dst = "gpu1";
  t.bytes = 512;
  t.kv_blocks = {0, 1};
  L.work.transfers.push_back(t);
  sim::ComputeTask c;
  c.id = "c0";
  c.gpu = "gpu1";
  c.duration_s = 1e-3;
  c.after = {"t0"};
  L.work.compute.push_back(c);
  p.layers.push_back(L);
  return ordered_json::parse(policy::to_json(p));
}

// The error message of parsing `j` as p.json ("" when it loads).
std::string plan_error(const ordered_json& j) {
  auto r = policy::parse_plan(j.dump(), "p.json");
  if (r.ok()) return "";
  CHECK(r.error().exit_code == 2);
  return r.error().message;
}

bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("plan: the reference plan loads") { CHECK(plan_error(good_plan()) == ""); }

TEST_CASE("plan: unknown fields are refused at every level with their pointer") {
  auto j = good_plan();
  j["bogus"] = 1;
  CHECK(starts(plan_error(j), "p.json:/bogus: unknown field \"bogus\""));
  j = good_plan();
  j["policy"]["placment"] = "x";
  CHECK(starts(plan_error(j), "p.json:/policy/placment: unknown field"));
  j = good_plan();
  j["layers"][0]["repeats"] = 2;
  CHECK(starts(plan_error(j), "p.json:/layers/0/repeats: unknown field"));
  j = good_plan();
  j["layers"][0]["transfers"][0]["chunk"] = 2;
  CHECK(starts(plan_error(j), "p.json:/layers/0/transfers/0/chunk: unknown field"));
  j = good_plan();
  j["layers"][0]["compute"][0]["duration"] = 2;
  CHECK(starts(plan_error(j), "p.json:/layers/0/compute/0/duration: unknown field"));
}

TEST_CASE("plan: gpus must be the ranks the plan uses and fit its topology") {
  auto j = good_plan();
  j["gpus"] = 3;  // ranks 0 and 1 own blocks and move data; rank 2 does nothing
  CHECK(plan_error(j) ==
        "p.json:/gpus: 3 GPUs, but the plan uses 2 (gpu2 owns no block and is no endpoint of any "
        "transfer or compute task)");
  // A rank used only as a transfer endpoint counts: blocks all on gpu0, gpu1 receives them.
  j = good_plan();
  j["block_owner"] = {0, 0, 0, 0};
  CHECK(plan_error(j) == "");
  // The embedded topology must have at least gpus GPUs (2x-h200-nvlink has 2).
  auto topo = topology::Topology::load("2x-h200-nvlink");
  REQUIRE(topo.ok());
  REQUIRE(topo->num_gpus() == 2);
  j = good_plan();
  j["topology"] = ordered_json::parse(topo->to_json());
  CHECK(plan_error(j) == "");
  j["gpus"] = 3;
  j["block_owner"] = {0, 1, 2, 2};
  CHECK(plan_error(j) ==
        "p.json:/gpus: 3 GPUs, but the embedded topology '" + topo->name() + "' has only 2");
}

TEST_CASE("plan: errors in the embedded topology name the plan file and /topology/...") {
  auto topo = topology::Topology::load("2x-h200-nvlink");
  REQUIRE(topo.ok());
  auto j = good_plan();
  j["topology"] = ordered_json::parse(topo->to_json());
  j["topology"]["nccl"] = {{"p2p_Bps", -1}};
  const std::string e = plan_error(j);
  CHECK_MESSAGE(starts(e, "p.json:/topology/nccl/p2p_Bps"), e);
}

TEST_CASE("plan: kv_block_bytes > 0 with blocks, at least one layer plan, bounded durations") {
  auto j = good_plan();
  j["kv_block_bytes"] = 0;
  CHECK(starts(plan_error(j), "p.json:/kv_block_bytes: expected > 0 when num_blocks > 0"));
  j = good_plan();
  j["layers"] = ordered_json::array();
  CHECK(plan_error(j) == "p.json:/layers: no layer plans (expected at least one entry)");
  // Durations are capped at 1e6 s (policy/PLAN.md): 1e6 itself loads, 1e300 does not.
  j = good_plan();
  j["layers"][0]["compute"][0]["duration_s"] = 1e6;
  CHECK(plan_error(j) == "");
  j["layers"][0]["compute"][0]["duration_s"] = 1e300;
  CHECK(plan_error(j) ==
        "p.json:/layers/0/compute/0/duration_s: expected seconds in 0..1e6, got 1e+300");
  j = good_plan();
  j["layers"][0]["compute"][0].erase("duration_s");  // 'duration_s' or 'flops', not both
  j["layers"][0]["compute"][0]["flops"] = 1e300;
  CHECK(starts(plan_error(j), "p.json:/layers/0/compute/0/flops: expected FLOP in 0..1e24"));
}

TEST_CASE("rank topology: NCCL's default P2P level (P2P up to PXB, SHM beyond, NVLink always)") {
  // NCCL 2.30.7 src/graph/paths.cc ncclTopoCheckP2p: p2pLevel = PATH_PXB unless an AMD CPU with
  // <= 2 GPUs. 8x-l40s-gen4-4switch (topo matrix): GPU0-GPU1 PIX -> P2P; GPU0-GPU2 NODE and
  // GPU0-GPU4 SYS -> SHM, though the topology allows peer access on all three pairs.
  auto topo = topology::Topology::load("8x-l40s-gen4-4switch");
  REQUIRE(topo.ok());
  auto rt = policy::rank_topology(*topo, {0, 1, 2, 4});
  REQUIRE(rt.ok());
  CHECK(rt->p2p_allowed(0, 1));
  CHECK(rt->p2p_allowed(0, 2));
  CHECK(rt->nccl_p2p_allowed(0, 1));
  CHECK_FALSE(rt->nccl_p2p_allowed(0, 2));
  CHECK_FALSE(rt->nccl_p2p_allowed(0, 3));  // rank 3 = GPU4, SYS
  auto nv = topology::Topology::load("2x-h200-nvlink");
  REQUIRE(nv.ok());
  auto rt_nv = policy::rank_topology(*nv, {0, 1});
  REQUIRE(rt_nv.ok());
  CHECK(rt_nv->nccl_p2p_allowed(0, 1));
  // nccl.p2p_level overrides the level (NCCL_P2P_LEVEL): PHB covers NODE (GPU0-GPU2) but not
  // SYS (GPU0-GPU4); SYS covers both; LOC and NVL leave no PCIe pair on P2P.
  auto with_level = [&](const std::string& level) {
    auto j = nlohmann::json::parse(topo->to_json());
    j["nccl"] = {{"p2p_level", level}};
    auto t = topology::Topology::from_json_text(j.dump(), "<level>");
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
    auto r = policy::rank_topology(*t, {0, 1, 2, 4});
    REQUIRE(r.ok());
    return std::vector<bool>{r->nccl_p2p_allowed(0, 1), r->nccl_p2p_allowed(0, 2),
                             r->nccl_p2p_allowed(0, 3)};
  };
  CHECK(with_level("PHB") == std::vector<bool>{true, true, false});
  CHECK(with_level("SYS") == std::vector<bool>{true, true, true});
  CHECK(with_level("PIX") == std::vector<bool>{true, false, false});
  CHECK(with_level("NVL") == std::vector<bool>{false, false, false});
  CHECK(with_level("LOC") == std::vector<bool>{false, false, false});
  // A flat test topology (no paths): same as its peer access.
  CHECK(policy::RankTopology::flat(2, true).nccl_p2p_allowed(0, 1));
  CHECK_FALSE(policy::RankTopology::flat(2, false).nccl_p2p_allowed(0, 1));
}

TEST_CASE("plan: copy_kind is written for non-plain copies, read back, and checked") {
  auto j = good_plan();
  auto& c = j["layers"][0]["compute"][0];
  c["kind"] = "copy";
  c.erase("partial");
  c["bytes"] = 1024;
  CHECK(plan_error(j) == "");  // absent: plain, as every copy before copy_kind
  c["copy_kind"] = "transpose";
  auto r = policy::parse_plan(j.dump(), "p.json");
  REQUIRE(r.ok());
  CHECK(r->layers[0].work.compute[0].what.copy_kind == sim::CopyKind::transpose);
  // Written back as read; a plain copy writes no key.
  const auto back = ordered_json::parse(policy::to_json(*r));
  CHECK(back["layers"][0]["compute"][0]["copy_kind"] == "transpose");
  c["copy_kind"] = "plain";
  auto plain = policy::parse_plan(j.dump(), "p.json");
  REQUIRE(plain.ok());
  CHECK(!ordered_json::parse(policy::to_json(*plain))["layers"][0]["compute"][0].contains(
      "copy_kind"));
  c["copy_kind"] = "strided";
  CHECK(plan_error(j) ==
        "p.json:/layers/0/compute/0/copy_kind: expected \"plain\", \"transpose\" or \"cast\"");
  c["copy_kind"] = 1;
  CHECK(plan_error(j) ==
        "p.json:/layers/0/compute/0/copy_kind: expected \"plain\", \"transpose\" or \"cast\"");
  c["kind"] = "attention";
  c.erase("bytes");
  c["copy_kind"] = "cast";
  CHECK(plan_error(j) == "p.json:/layers/0/compute/0/copy_kind: applies to kind \"copy\" only");
}
