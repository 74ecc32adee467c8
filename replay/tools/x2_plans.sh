#!/bin/bash
# Plans of the two-GPU hardware validation (issue 8): HunyuanVideo 720p and Wan2.1-14B 720p, STA and
# radial masks, sequence-parallel degree 2 on the 2x-h200-nvlink preset.
# Usage: replay/tools/x2_plans.sh SPARSP_BINARY OUTDIR
set -euo pipefail
B=$1 OUT=$2
mkdir -p "$OUT"
POL=(
  dependency_aware/demand_direct/sync dependency_aware/demand_direct/ce_decoupled
  dependency_aware/demand_direct/sync:route=host_staged
  dependency_aware/demand_direct/ce_decoupled:route=host_staged
  contiguous/ring/sync:ce_only=1 contiguous/ring/ce_decoupled
  contiguous/allgather/sync contiguous/allgather/ce_decoupled
  head_parallel/ulysses/sync head_parallel/ulysses/ce_decoupled
  dependency_aware/demand_alltoall/sync dependency_aware/demand_alltoall/ce_decoupled
)
args=()
for p in "${POL[@]}"; do args+=(--policy "$p"); done
gen() {  # name, simulate arguments...
  local name=$1; shift
  mkdir -p "$OUT/$name"
  "$B" simulate --topology 2x-h200-nvlink --gpus 2 "$@" "${args[@]}" --emit-plan "$OUT/$name" \
    > "$OUT/$name/simulate.txt"
}
gen hunyuan-sta --model hunyuanvideo-sta --pattern sta --block 384 --tile 6,8,8 --window 3,3,3
gen hunyuan-radial --model hunyuanvideo-720p --pattern radial --block 384
gen wan14b-sta --model wan2.1-14b-720p --pattern sta --block 384 --tile 6,8,8 --window 3,3,3
gen wan14b-radial --model wan2.1-14b-720p --pattern radial --block 384
