// The built-in default study: the same text as configs/studies/default.json (a test keeps the two
// equal), compiled in so that `sparsp simulate` runs from any working directory.
#include "sparsp/study.hpp"

namespace sparsp::study {

const char* default_study_json() {
  return R"json({
  "schema_version": 1,
  "name": "default",
  "description": "HunyuanVideo 720p (STA setting, 117 frames at 768x1280) with sliding tile attention on two 8-GPU PCIe servers: every scheme with its usual placement and runtime",
  "topologies": ["8x-rtx4090-epyc-nop2p", "8x-l40s-gen4-4switch"],
  "model": "hunyuanvideo-sta",
  "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
  "gpus": 8,
  "granularity": "block",
  "policies": [
    "contiguous/ring/sm_overlap",
    "contiguous/ring/sm_overlap:skip_empty=1",
    "contiguous/allgather/sync",
    "head_parallel/ulysses/sync",
    "contiguous/usp/sm_overlap",
    "contiguous/demand_alltoall/sync",
    "contiguous/demand_direct/ce_decoupled",
    "balanced/demand_direct/ce_decoupled",
    "dependency_aware/demand_direct/ce_decoupled",
    "dependency_aware/demand_hierarchical/ce_decoupled"
  ],
  "baseline": "contiguous/ring/sm_overlap"
}
)json";
}

}  // namespace sparsp::study
