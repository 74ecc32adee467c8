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
/// The layer's block mask in CSR form (plan JSON "mask", policy/PLAN.md "Masks"): query block q
/// (row r = q, or r = h * num_blocks + q when `per_head`) reads KV blocks
/// kv_blocks[row_ptr[r] .. row_ptr[r + 1]), strictly increasing. Empty row_ptr: not recorded
/// (plans written before it, or hand-made ones); replay then cannot run real attention.
struct LayerMask {
  bool per_head = false;
  std::vector<int32_t> row_ptr;    ///< num_blocks + 1, or heads * num_blocks + 1 entries
  std::vector<int32_t> kv_blocks;  ///< row_ptr.back() entries, each in [0, num_blocks)
  bool empty() const { return row_ptr.empty(); }
  /// The KV list of query block q for head h (h ignored unless per_head).
  std::pair<const int32_t*, const int32_t*> row(int q, int h, int num_blocks) const {
    const size_t r = static_cast<size_t>(per_head ? h * num_blocks + q : q);
    return {kv_blocks.data() + row_ptr[r], kv_blocks.data() + row_ptr[r + 1]};
  }
};

struct LayerPlan {
  int step = 0;
  int layer = 0;
  int64_t repeat = 1;
  sim::Workload work;
  LayerMask mask;  ///< the (query block, KV block) pairs attention computes; may be empty
};

struct Plan {
  int schema_version = 2;     ///< 2: compute tasks carry `kind` (1 still loads)
  std::string topology_json;  ///< canonical topology (Topology::to_json())
  std::string model;          ///< model preset name
  std::string pattern;        ///< Pattern::describe()
  int gpus = 0;               ///< sequence-parallel degree P
  /// [gpus] or empty: the embedded topology's GPU index of each rank, for a plan made for GPUs
  /// other than gpu0..gpu{P-1} (a study's "gpus": [4, 5]); empty: rank r runs on gpu r.
  /// Transfer and compute endpoints name these GPUs ("gpu4"); block_owner, q_ranks and kv_ranks
  /// are ranks (policy/PLAN.md, `rank_gpus`).
  std::vector<int> rank_gpus;
  int block_tokens = 0;
  int heads = 0;
  int kv_heads = 0;  ///< K/V heads (grouped-query attention); 0: heads
  int head_dim = 0;
  int dtype_bytes = 2;
  int num_blocks = 0;
  double kv_block_bytes = 0;  ///< K and V of one block, all KV heads (kv_heads, GQA)
  PolicySpec policy;
  /// Where the compute tasks' times came from (study: policy::ResolvedCompute::source, e.g.
  /// "generic (hopper, 0.5 of peak)"); empty when not recorded. `simulate --plan` reports it.
  std::string compute_source;
  std::vector<int> block_owner;  ///< [num_blocks] GPU rank owning each query/KV block
  /// [num_blocks] or empty: bytes of K and V of each block when blocks differ in size (a partial
  /// last video block, a text block). Empty: every block is kv_block_bytes, except that replay
  /// infers a partial last block from transfer sizes (policy/PLAN.md).
  std::vector<double> block_bytes;
  /// Blocks of text tokens (ascending; empty: none or not recorded). Demand schemes compute a
  /// text block's rows where each KV block lives and return the partial outputs ("text_out"
  /// messages); replay's real compute does the same only for these blocks.
  std::vector<int> text_blocks;
  std::vector<LayerPlan> layers;
  int kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  /// The endpoint name of rank `rank`'s GPU: "gpu<rank>", or "gpu<rank_gpus[rank]>".
  std::string gpu_endpoint(int rank) const {
    return "gpu" + std::to_string(rank_gpus.empty() ? rank : rank_gpus[static_cast<size_t>(rank)]);
  }
  /// The rank running on the topology's GPU `gpu` (an endpoint "gpuN"'s N), or -1 for none.
  int rank_of_gpu(long gpu) const {
    if (rank_gpus.empty()) return gpu >= 0 && gpu < gpus ? static_cast<int>(gpu) : -1;
    for (size_t r = 0; r < rank_gpus.size(); ++r)
      if (rank_gpus[r] == gpu) return static_cast<int>(r);
    return -1;
  }
};

Result<Plan> load_plan(const std::string& path);
Result<Plan> parse_plan(const std::string& text, const std::string& source_name);
/// Deterministic (byte-identical for identical plans).
std::string to_json(const Plan& plan);

}  // namespace sparsp::policy
