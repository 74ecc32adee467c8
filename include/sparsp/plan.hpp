#pragma once
// Transfer plans: what `sparsp simulate --emit-plan` writes and `sparsp replay` runs. A plan is a
// placement plus, per distinct (step, layer), a Workload of transfers and compute tasks on the
// GPUs of the sequence-parallel group. Schema (versioned) documented in policy/PLAN.md.
// Part of sparsp::policy (policy/plan_io.cpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sparsp/sim.hpp"
#include "sparsp/status.hpp"

namespace sparsp::policy {

struct PolicySpec {
  std::string placement;                 ///< e.g. "dependency_aware"
  std::string scheme;                    ///< e.g. "demand_direct"
  std::string runtime;                   ///< "sync" | "sm_overlap" | "ce_decoupled"
  std::map<std::string, double> params;  ///< numeric parameters (chunk_bytes, comm_sms, ...)
  std::string name() const { return placement + "/" + scheme + "/" + runtime; }
};

/// One simulated unit: the workload of one (step, layer). `repeat` counts how many (step, layer)
/// pairs of the run share exactly this workload (they are simulated once and reused).
struct LayerPlan {
  int step = 0;
  int layer = 0;
  int64_t repeat = 1;
  sim::Workload work;
};

struct Plan {
  int schema_version = 2;     ///< 2: compute tasks carry `kind` (1 still loads)
  std::string topology_json;  ///< canonical topology (Topology::to_json())
  std::string model;          ///< model preset name
  std::string pattern;        ///< Pattern::describe()
  int gpus = 0;               ///< sequence-parallel degree P
  int block_tokens = 0;
  int heads = 0;
  int head_dim = 0;
  int dtype_bytes = 2;
  int num_blocks = 0;
  double kv_block_bytes = 0;  ///< K and V of one block, all KV heads (kv_heads, GQA)
  PolicySpec policy;
  std::vector<int> block_owner;  ///< [num_blocks] GPU rank owning each query/KV block
  /// [num_blocks] or empty: bytes of K and V of each block when blocks differ in size (a partial
  /// last video block, a text block). Empty: every block is kv_block_bytes, except that replay
  /// infers a partial last block from transfer sizes (policy/PLAN.md).
  std::vector<double> block_bytes;
  std::vector<LayerPlan> layers;
};

Result<Plan> load_plan(const std::string& path);
Result<Plan> parse_plan(const std::string& text, const std::string& source_name);
/// Deterministic (byte-identical for identical plans).
std::string to_json(const Plan& plan);

}  // namespace sparsp::policy
