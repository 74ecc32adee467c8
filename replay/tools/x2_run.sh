#!/bin/bash
# Two-GPU hardware validation run (issue 8) on nvidia-h200-x2. Expects, in DIR (default: this
# script's folder): sparsp, lib/ (shared libraries the device lacks), plans/<config>/*.plan.json
# from replay/tools/x2_plans.sh. Writes $OUT/x2.tgz (refreshed after each configuration) (log, machine and topology JSON, traces,
# summaries, validate outputs).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
D=$(cd "${1:-$(dirname "$0")}" && pwd)
N=$(dirname "$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 2>/dev/null ||
  find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$D/lib:$N:$LD_LIBRARY_PATH
B=$D/sparsp; R=/tmp/x2; rm -rf "$R"; mkdir -p "$R"
save() { tar czf "$OUT/x2.tgz" -C /tmp x2; }  # after every configuration: a timeout keeps what ran
el() { awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $1}"; }
exec > >(tee "$R/log.txt") 2>&1
date; nvidia-smi --query-gpu=name,pci.bus_id,driver_version --format=csv,noheader; nvidia-smi topo -m
ldd "$B" | grep -E "nccl|cudart"
t0=$(date +%s.%N)
timeout 200 "$B" calibrate --devices 0,1 -o "$R/machine.json" --topology-out "$R/x2.topology.json"
echo "calibrate rc=$? $(el $t0) s"; save
T=$R/x2.topology.json; [ -s "$T" ] || T=2x-h200-nvlink
# replay NAME PLAN [env...] -- [replay args...]
one() {
  local name=$1 plan=$2; shift 2
  local envs=() ; while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local s; s=$(date +%s.%N)
  env "${envs[@]}" timeout 90 "$B" replay --plan "$plan" --backend cuda --devices 0,1 --warmup 2 \
    --iterations 7 --timeout-s 45 -o "$R/$name.trace.json" --json "$@" > "$R/$name.summary.json"
  local rc=$?
  echo "$name replay rc=$rc $(el $s) s"
  if [ $rc = 0 ]; then
    timeout 60 "$B" validate --plan "$plan" --trace "$R/$name.trace.json" --topology "$T" --json \
      > "$R/x2-$name.validate.json"
    echo "$name validate rc=$?"
  fi
  return $rc
}
NCCL_OK=1
smoke=$D/plans/hunyuan-sta/2x-h200-nvlink__dependency_aware_demand_alltoall_sync.plan.json
one hunyuan-sta.nccl-smoke "$smoke" NCCL_DEBUG=INFO -- > "$R/nccl-smoke.txt" 2>&1 || NCCL_OK=0
tail -5 "$R/nccl-smoke.txt"; echo "NCCL_OK=$NCCL_OK"
for cfg in hunyuan-sta hunyuan-radial wan14b-sta wan14b-radial; do
  for p in "$D"/plans/$cfg/*.plan.json; do
    n=$cfg.$(basename "$p" .plan.json | sed 's/^2x-h200-nvlink__//')
    case $n in
      *allgather_sync|*ulysses_sync|*demand_alltoall_sync)
        if [ $NCCL_OK = 1 ]; then
          one "$n" "$p" A=1 --
          one "$n.nop2p" "$p" NCCL_P2P_DISABLE=1 --
        else
          one "$n.sm" "$p" A=1 -- --no-nccl
        fi ;;
      *) one "$n" "$p" A=1 -- ;;
    esac
  done
  # Communication alone (no compute): demand_direct with copy engines (NVLink, host-staged) vs the
  # NCCL all-to-all of the same needed bytes (NCCL P2P on and off).
  P=$D/plans/$cfg/2x-h200-nvlink__dependency_aware
  one "$cfg.comm.ce_p2p" "${P}_demand_direct_sync.plan.json" A=1 -- --no-compute
  one "$cfg.comm.ce_staged" "${P}_demand_direct_sync_host_staged-1.plan.json" A=1 -- --no-compute
  if [ $NCCL_OK = 1 ]; then
    one "$cfg.comm.nccl_p2p" "${P}_demand_alltoall_sync.plan.json" A=1 -- --no-compute
    one "$cfg.comm.nccl_nop2p" "${P}_demand_alltoall_sync.plan.json" NCCL_P2P_DISABLE=1 -- --no-compute
  fi
  save
done
date; save
