#!/bin/bash
# Device run (issues 14 and 15): `sparsp calibrate` with compute on one H200, which also times
# attention beside copy-engine copies and beside an SM copy kernel (measured_compute
# "contention") and cuBLAS GEMMs (gemm_TFLOPs); then a second, compute-only calibrate to show the
# spread of those figures; then the folded topologies for validating `--devices 0,0[,0,0]` traces.
# Results: one tarball under $OUT (replay/RESULTS.md, "Attention beside copies").
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.carry/rc/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER
S=$PWD/.carry/rc/sparsp
O=${OUT:-/tmp/out}
mkdir -p $O/r
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $O/r/nvidia-smi.txt 2>&1
/usr/bin/time -f "calibrate %e s" $S calibrate --devices 0 --no-nccl --iterations 3 \
  -o $O/r/h200.machine.json --topology-out $O/r/h200.topology.json > $O/r/calibrate.log 2>&1
echo "calibrate rc=$?" >> $O/r/calibrate.log
/usr/bin/time -f "calibrate-repeat %e s" $S calibrate --devices 0 --no-nccl --iterations 3 \
  --max-bytes 65536 --concurrency-copies 0 -o $O/r/h200-repeat.machine.json \
  --topology-out $O/r/h200-repeat.topology.json >> $O/r/calibrate.log 2>&1
echo "calibrate-repeat rc=$?" >> $O/r/calibrate.log
for k in 2 4; do
  $S calibrate --from $O/r/h200.machine.json --virtual-ranks $k \
    --topology-out $O/r/h200-folded$k.topology.json >> $O/r/calibrate.log 2>&1
done
python3 - $O/r <<'PY'
import json, sys
for f in ("h200.machine.json", "h200-repeat.machine.json"):
    try:
        m = json.load(open(f"{sys.argv[1]}/{f}"))
    except Exception as e:
        print(f, "unreadable:", e); continue
    for e in m.get("measured_compute", []):
        print(f, e["head_dim"], e["attention_TFLOPs"], e.get("gemm_TFLOPs"), e.get("contention"))
    for p in m.get("compute_points", []):
        if "beside" in p or "gemm" in p: print(f, p)
PY
cd $O && tar czf /tmp/results.tgz r && rm -rf $O/r && mv /tmp/results.tgz $O/
