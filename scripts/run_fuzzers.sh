#!/usr/bin/env bash
# Builds the `fuzz` preset (clang + libFuzzer + ASan/UBSan) and runs every fuzz_* target for
# the given number of seconds (default 60) on its seed corpus in fuzz/corpus/<target>/.
# Exits non-zero on any crash, leak or sanitizer report.
set -euo pipefail
seconds=${1:-60}
cd "$(dirname "$0")/.."
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
shopt -s nullglob
status=0
for src in fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  work=$(mktemp -d)
  seeds=fuzz/corpus/$name
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  echo "fuzz: $name for ${seconds}s"
  if ! build/fuzz/fuzz/$name -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -print_final_stats=0 "$work" > "build/fuzz/$name.log" 2>&1; then
    echo "fuzz: $name FAILED; last lines of build/fuzz/$name.log:"; tail -40 "build/fuzz/$name.log"
    status=1
  else
    echo "fuzz: $name ok ($(grep -c '' "build/fuzz/$name.log") log lines)"
  fi
  rm -rf "$work"
done
exit $status
