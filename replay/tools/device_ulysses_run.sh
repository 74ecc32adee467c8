#!/bin/bash
# Device run for issue 15 (Ulysses / USP real compute): a CUDA smoke test of the output check on
# tiny plans (pass, corrupted KV, corrupted Q), then every HunyuanVideo plan replayed with real
# compute on one H200, ranks folded (--devices 0,0 / 0,0,0,0). Validation runs off the device
# (calibrate --from + validate need no GPU).
# Layout of the carried folder (D, default .carry/u15): sparsp, lib/ (libzip, libpugixml,
# libmetis), plans/<set>/*.plan.json (set = sta2, sta4, radial2, radial4), tiny/*.plan.json.
cd "$(dirname "$0")"
D=$PWD
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH NCCL_NVLS_ENABLE=0
S=$D/sparsp
O=${OUT:-/tmp/out}
mkdir -p $O/compute
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $O/nvidia-smi.txt 2>&1
for p in $D/tiny/*.plan.json; do
  n=$(basename $p .plan.json)
  for extra in "--check-all" "--corrupt-block 5" "--corrupt-block 5 --corrupt-query"; do
    timeout 120 $S replay --plan $p --backend cuda --devices 0,0,0,0 --iterations 2 --compute real --timeout-s 60 $extra --json > /tmp/t.json 2> /tmp/t.err
    echo "tiny $n [$extra] rc=$? $(head -c 300 /tmp/t.err) $(python3 -c "import json;print(json.load(open('/tmp/t.json'))['output_check'])" 2>/dev/null)" >> $O/progress.txt
  done
done
for set in ${1:-sta2 sta4 radial2 radial4}; do
  g=${set: -1}
  devs=$(python3 -c "print(','.join(['0']*$g))")
  for p in $D/plans/$set/*.plan.json; do
    n=$(basename $p .plan.json); n=${n#4x-h200-pcie-replay__}; n=${set}_$n
    start=$(date +%s.%N)
    timeout 200 $S replay --plan $p --backend cuda --devices $devs --warmup 1 --iterations 5 --compute real --timeout-s 60 --json -o $O/compute/$n.trace.json > $O/compute/$n.replay.json 2> $O/compute/$n.replay.err
    echo "$n replay rc=$? $(python3 -c "import time;print(round(time.time()-$start,1))") s $(head -c 300 $O/compute/$n.replay.err)" >> $O/progress.txt
  done
done
cd $O && tar czf /tmp/results.tgz compute progress.txt nvidia-smi.txt && rm -rf $O/* && mv /tmp/results.tgz $O/
