#!/usr/bin/env bash
# Sweeps over machines (issue 20, item 4), through the real binary, against one process:
#   shard: `--shard K/3` for K = 1..3 + `sparsp sweep merge` is byte-identical;
#   mpi:   `mpirun --oversubscribe -n 2 sparsp sweep` is byte-identical, and
#          after rank 1 or rank 0 is killed (SIGKILL) mid-run, rerunning the same command resumes
#          the .partial to the byte-identical file.
# Usage: sweep_ranks.sh shard|mpi SPARSP SWEEP_JSON HAVE_MPI(ON|OFF). `mpi` exits 77 (CTest skip)
# when the build has no MPI or mpirun is missing.
set -euo pipefail
MODE=$1 S=$2 SWEEP=$3 HAVE_MPI=$4
D=$(mktemp -d "${TMPDIR:-/tmp}/sparsp_sweep_ranks.XXXXXX")
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Root in CI containers: Open MPI refuses root unless both are set.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe -n 2)

if [ "$MODE" = mpi ] && { [ "$HAVE_MPI" != "ON" ] || ! command -v mpirun > /dev/null; }; then
  echo "skip: no MPI in this build or no mpirun"
  exit 77
fi
"$S" sweep -c "$SWEEP" -o "$D/ref.csv" -j 2 --progress off > /dev/null

if [ "$MODE" = shard ]; then
  # The shards run as job-array tasks would, and are given to merge out of order.
  for k in 1 2 3; do
    "$S" sweep -c "$SWEEP" --shard "$k/3" -o "$D/part_$k.csv" -j 1 --progress off > /dev/null
  done
  "$S" sweep merge "$D/part_3.csv" "$D/part_1.csv" "$D/part_2.csv" -o "$D/merged.csv" > /dev/null
  cmp "$D/merged.csv" "$D/ref.csv" || fail "--shard 1..3/3 + merge differs from one process"
  echo "ok: --shard K/3 + merge byte-identical"
  exit 0
fi

# (JSON Lines over ranks: tests/study/sweep_shard_test.cpp, in-process ranks.)
"${MPIRUN[@]}" "$S" sweep -c "$SWEEP" -o "$D/mpi.csv" -j 1 --progress off > /dev/null
cmp "$D/mpi.csv" "$D/ref.csv" || fail "mpirun -n 2 differs from one process"
echo "ok: mpirun -n 2 byte-identical"

# Kill one rank once rank 0 has written a few points (shard line-less CSV: header + >= 4 rows).
for victim in 1 0; do
  out="$D/killed$victim.csv"
  "${MPIRUN[@]}" "$S" sweep -c "$SWEEP" -o "$out" -j 1 --progress off > /dev/null 2>&1 &
  launcher=$!
  pid=""
  for _ in $(seq 1 3000); do
    if [ -f "$out.partial" ] && [ "$(wc -l < "$out.partial")" -ge 5 ]; then
      for child in $(pgrep -P "$launcher"); do
        if tr '\0' '\n' < "/proc/$child/environ" 2> /dev/null |
          grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then pid=$child; fi
      done
      break
    fi
    sleep 0.02
  done
  [ -n "$pid" ] || fail "rank $victim not found running with rows on disk"
  kill -9 "$pid"
  if wait "$launcher"; then fail "mpirun exited 0 after rank $victim was killed"; fi
  [ ! -e "$out" ] || fail "a killed run left $out as if whole"
  # What is on disk is a prefix of the whole output (cut at most inside the last point).
  kept=$(wc -c < "$out.partial")
  cmp -n "$kept" "$out.partial" "$D/ref.csv" || fail "the .partial is not a prefix of the output"
  "${MPIRUN[@]}" "$S" sweep -c "$SWEEP" -o "$out" -j 1 --progress off > "$D/resume.txt"
  grep -q " 0 resumed" "$D/resume.txt" && fail "nothing was resumed after rank $victim died"
  cmp "$out" "$D/ref.csv" || fail "resumed after rank $victim died: differs from one process"
  echo "ok: rank $victim killed mid-run, resumed byte-identical ($(cat "$D/resume.txt"))"
done
