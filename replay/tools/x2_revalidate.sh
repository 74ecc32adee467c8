#!/bin/bash
# Validates every two-GPU trace (replay/results/x2/traces) against the committed calibrated
# topology, writing replay/results/x2/x2-<name>.validate.json. Run from the repository root after
# `cmake --workflow --preset release`. Names: <config>.<plan>[.nop2p] (NCCL_P2P_DISABLE=1),
# <config>.comm.<kind> (--no-compute: communication alone), <config>.nccl-smoke (first NCCL plan).
B=${B:-build/release/sparsp}; T=${T:-configs/topologies/2x-h200-nvlink-calibrated.json}
R=${R:-replay/results/x2}; P=${P:-$R/plans}
rc=0
for tr in "$R"/traces/*.trace.json; do
  n=$(basename "$tr" .trace.json); cfg=${n%%.*}; rest=${n#*.}
  flags=()
  case $rest in
    nccl-smoke | comm.nccl_p2p | comm.nccl_nop2p) plan=dependency_aware_demand_alltoall_sync ;;
    comm.ce_p2p) plan=dependency_aware_demand_direct_sync ;;
    comm.ce_staged) plan=dependency_aware_demand_direct_sync_host_staged-1 ;;
    *.nop2p) plan=${rest%.nop2p} ;;
    *) plan=$rest ;;
  esac
  # The first run's traces predate the trace fields compute_emulated / nccl_p2p_disable.
  case $rest in comm.*) flags+=(--no-compute) ;; esac
  case $rest in *nop2p) flags+=(--nccl-p2p-disable) ;; esac
  "$B" validate --plan "$P/$cfg/2x-h200-nvlink__$plan.plan.json" --trace "$tr" --topology "$T" \
    --json "${flags[@]}" > "$R/x2-$n.validate.json" || { echo "FAIL $n"; rc=1; }
done
exit $rc
