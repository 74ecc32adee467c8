// Topology JSON "measured_compute" (configs/README.md): parsing, units and round trip.
#include <doctest/doctest.h>

#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
std::string topo(const std::string& mc) {
  return R"({"schema_version": 1, "name": "m",
 "nodes": [{"id": "cpu0", "kind": "cpu", "numa_node": 0},
           {"id": "gpu0", "kind": "gpu", "model": "NVIDIA H200"}],
 "links": [{"a": "cpu0", "b": "gpu0", "kind": "pcie", "gen": 5, "width": 16}],
 "measured_compute": )" +
         mc + "}";
}
}  // namespace

TEST_CASE("measured_compute: figures in file units become FLOP/s and seconds") {
  auto t = topology::Topology::from_json_text(
      topo(R"([{"gpu_model": "h200", "kernel": "sparsp", "head_dim": 128,
                "attention_TFLOPs": {"512": 600, "128": 500}, "gemm_TFLOPs": 700,
                "launch_overhead_us": 4.5, "contention": {"ce_copy": 0.02, "sm_copy_per_sm": 0.01},
                "conditions": "115200 tokens, density 0.1"}])"),
      "t.json");
  REQUIRE(t.ok());
  const auto& mc = t->options().measured_compute;
  REQUIRE(mc.size() == 1);
  CHECK(mc[0].gpu_model == "NVIDIA H200");  // the registry's full name
  CHECK(mc[0].kernel == "sparsp");
  CHECK(mc[0].head_dim == 128);
  REQUIRE(mc[0].attention_flops_by_block.size() == 2);
  CHECK(mc[0].attention_flops_by_block[0].first == 128);  // sorted by block
  CHECK(mc[0].attention_flops_by_block[0].second == 500e12);
  CHECK(mc[0].gemm_flops == 700e12);
  CHECK(mc[0].launch_overhead_s == doctest::Approx(4.5e-6));
  CHECK(mc[0].contention_ce_copy == 0.02);
  CHECK(mc[0].contention_sm_copy_per_sm == 0.01);
  CHECK(mc[0].place == "/measured_compute/0");
  // Round trip through the canonical export.
  auto back = topology::Topology::from_json_text(t->to_json(), "back.json");
  REQUIRE(back.ok());
  REQUIRE(back->options().measured_compute.size() == 1);
  CHECK(back->options().measured_compute[0].attention_flops_by_block[1].second == 600e12);
  CHECK(back->options().measured_compute[0].conditions == "115200 tokens, density 0.1");
}

TEST_CASE("measured_compute: bad entries name the file and the JSON pointer") {
  auto err = [](const std::string& mc) {
    auto t = topology::Topology::from_json_text(topo(mc), "t.json");
    REQUIRE(!t.ok());
    CHECK(t.error().exit_code == 2);
    return t.error().message;
  };
  CHECK(err(R"({})") == "t.json:/measured_compute: expected an array, got object");
  CHECK(err(R"([{"gpu_model": "NVIDIA H200", "kernel": "x", "head_dim": 128, "tflops": 1}])") ==
        "t.json:/measured_compute/0/tflops: unknown key 'tflops'");
  CHECK(err(R"([{"gpu_model": "NVIDIA H900", "kernel": "x", "head_dim": 128}])") ==
        "t.json:/measured_compute/0/gpu_model: unknown GPU model 'NVIDIA H900' (see `sparsp topo "
        "models`)");
  CHECK(
      err(R"([{"gpu_model": "NVIDIA H200", "kernel": "x", "head_dim": 128, "gemm_TFLOPs": -1}])") ==
      "t.json:/measured_compute/0/gemm_TFLOPs: must be >= 0, got -1");
  CHECK(err(R"([{"gpu_model": "NVIDIA H200", "kernel": "x", "head_dim": 128,
                 "attention_TFLOPs": {"big": 1}}])") ==
        "t.json:/measured_compute/0/attention_TFLOPs/big: expected a block size in tokens (a "
        "positive integer) as the key");
  CHECK(err(R"([{"gpu_model": "NVIDIA H200", "kernel": "x", "head_dim": 128,
                 "contention": {"hbm": 1}}])") ==
        "t.json:/measured_compute/0/contention/hbm: unknown key 'hbm'");
  CHECK(err(R"([{"gpu_model": "NVIDIA H200", "kernel": "x"}])") ==
        "t.json:/measured_compute/0/head_dim: missing required key 'head_dim'");
}
