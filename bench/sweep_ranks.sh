#!/usr/bin/env bash
# Sweep throughput over processes (issue 20, item 4): points per second of bench/sweep-1000.json
# (the 1,000-point sweep of bench_sweep without the METIS placements: 4 eight-GPU presets x 10
# policies x 25 STA windows, HunyuanVideo 720p, all steps and layers) in one process, on 1 and 2
# MPI ranks, and as 2 shards run side by side + merge. Each output is byte-compared with the
# one-process output. Usage: bench/sweep_ranks.sh [build/release/sparsp]. Needs mpirun.
set -euo pipefail
S=${1:-build/release/sparsp}
C=$(dirname "$0")/sweep-1000.json
D=$(mktemp -d "${TMPDIR:-/tmp}/sparsp_sweep_bench.XXXXXX")
trap 'rm -rf "$D"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TIMEFORMAT='%R %U %S'
measure() {  # name, command...: wall s, CPU s (user + sys of the children), points/s
  local name=$1
  shift
  local t
  t=$( { time "$@" > /dev/null 2>&1; } 2>&1 | tail -1)
  read -r wall user sys <<< "$t"
  awk -v n="$name" -v w="$wall" -v u="$user" -v s="$sys" \
    'BEGIN { printf "%-44s wall %6.2f s  cpu %6.2f s  %6.1f points/s\n", n, w, u + s, 1000 / w }'
}
shards() {
  "$S" sweep -c "$C" --shard 1/2 -o "$D/part_1.csv" -j 1 --progress off &
  "$S" sweep -c "$C" --shard 2/2 -o "$D/part_2.csv" -j 1 --progress off
  wait
  "$S" sweep merge "$D/part_1.csv" "$D/part_2.csv" -o "$D/shards.csv"
}
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
measure "one process, -j 1" "$S" sweep -c "$C" -o "$D/one1.csv" -j 1 --progress off
measure "one process, -j 2" "$S" sweep -c "$C" -o "$D/one.csv" -j 2 --progress off
measure "mpirun -n 1, -j 2" mpirun -n 1 "$S" sweep -c "$C" -o "$D/mpi1.csv" -j 2 --progress off
measure "mpirun --oversubscribe -n 2, -j 1 per rank" mpirun --oversubscribe -n 2 "$S" sweep -c "$C" \
  -o "$D/mpi2.csv" -j 1 --progress off
measure "--shard 1/2 + 2/2 side by side, -j 1, merge" shards
for f in one1 mpi1 mpi2 shards; do cmp "$D/$f.csv" "$D/one.csv"; done
echo "outputs byte-identical to one process"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
