#!/bin/bash
# Device run for issue 15: calibrate (with compute), fold, replay every plan with real compute, validate.
# usage: run.sh "sta2 radial2 ..."
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.carry/rc/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH NCCL_NVLS_ENABLE=0
S=$PWD/.carry/rc/sparsp
O=${OUT:-/tmp/out}
mkdir -p $O/compute
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $O/nvidia-smi.txt 2>&1
if [ ! -f $O/h200.machine.json ] && [ "$CAL" = 1 ]; then
  /usr/bin/time -f "calibrate %e s" $S calibrate --devices 0 --no-nccl --iterations 3 --concurrency-copies 0 -o $O/h200.machine.json --topology-out $O/h200.topology.json > $O/calibrate.log 2>&1
fi
MJ=${MJ:-$O/h200.machine.json}
for k in 2 4; do $S calibrate --from $MJ --virtual-ranks $k --topology-out $O/h200-folded$k.topology.json >> $O/calibrate.log 2>&1; done
for set in $1; do
  g=${set: -1}
  devs=$(python3 -c "print(','.join(['0']*$g))")
  for p in .carry/rc/plans/$set/*.plan.json; do
    n=$(basename $p .plan.json); n=${n#4x-h200-pcie-replay__}; n=${set}_$n
    start=$(date +%s.%N)
    $S replay --plan $p --backend cuda --devices $devs --warmup 1 --iterations 5 --compute real --timeout-s 60 --json -o $O/compute/$n.trace.json > $O/compute/$n.replay.json 2> $O/compute/$n.replay.err
    echo "$n replay rc=$? $(python3 -c "import time;print(round(time.time()-$start,1))") s" >> $O/progress.txt
    $S validate --plan $p --trace $O/compute/$n.trace.json --topology $O/h200-folded$g.topology.json --json > $O/compute/$n.validate.json 2> $O/compute/$n.validate.err
    echo "$n validate rc=$?" >> $O/progress.txt
    gzip -f $O/compute/$n.trace.json
  done
done
cd $O && tar czf /tmp/results.tgz compute progress.txt calibrate.log nvidia-smi.txt h200-folded2.topology.json h200-folded4.topology.json $( [ -f h200.machine.json ] && echo h200.machine.json h200.topology.json ) && rm -rf $O/* && mv /tmp/results.tgz $O/
