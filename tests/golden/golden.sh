#!/usr/bin/env bash
# Golden-file test of the CLI: runs every case of tests/golden/cases.txt plus `topo show`,
# `topo show --json`, `topo matrix` and `topo dot` of every built-in preset (and of one topology
# file), and compares stdout, stderr, the exit code and every file each case wrote
# with tests/golden/expected/ byte for byte (files over 16 KiB through their SHA-256).
#
#   golden.sh SPARSP            check (exit 1 and a diff on any difference)
#   golden.sh SPARSP --update   rewrite tests/golden/expected/ from this build
#
# A change that alters outputs on purpose updates expected/ in the same commit and says so.
set -uo pipefail
sparsp=$(realpath "${1:?usage: golden.sh SPARSP [--update]}")
mode=${2:-check}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
expected=$here/expected
work=$(mktemp -d "${TMPDIR:-/tmp}/sparsp-golden.XXXXXX")
trap 'rm -rf "$work"' EXIT
actual=$work/actual
mkdir -p "$actual"

# run_case NAME ARGS... : outputs under $actual/NAME/
run_case() {
  local name=$1; shift
  local dir=$actual/$name out=$work/out/$name
  mkdir -p "$dir" "$out"
  local args=() a
  for a in "$@"; do a=${a//@OUT@/$out}; args+=("${a//@SRC@/$src}"); done
  echo "$*" > "$dir/args"
  (cd "$work" && "$sparsp" "${args[@]}" > "$dir/stdout" 2> "$dir/stderr" < /dev/null)
  echo $? > "$dir/rc"
  # Put the placeholders back so the record does not depend on where it ran.
  # Wall-clock times ("... -> out.csv in 0.14 s") are the one thing allowed to vary.
  sed -i -e "s|$out|@OUT@|g" -e "s|$src|@SRC@|g" \
      -E -e 's/( -> .*) in [0-9]+(\.[0-9]+)? s$/\1 in <wall> s/' "$dir/stdout" "$dir/stderr"
  if [ -n "$(ls -A "$out")" ]; then
    cp -r "$out" "$dir/files"
    find "$dir/files" -type f -exec sed -i -e "s|$out|@OUT@|g" -e "s|$src|@SRC@|g" {} +
  fi
  # Files over 16 KiB (plans, traces) are kept as their SHA-256 and size: still byte for byte.
  local f
  while IFS= read -r -d '' f; do
    printf '%s %s bytes\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" > "$f.sha256"
    rm "$f"
  done < <(find "$dir" -type f -size +16k -print0)
}

while read -r name rest; do
  case $name in '' | '#'*) continue ;; esac
  eval "words=($rest)"  # shell words: quotes group, nothing is expanded but @OUT@/@SRC@
  run_case "$name" "${words[@]}"
done < "$here/cases.txt"

topologies=$("$sparsp" topo presets --json | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)))')
topologies+=$'\n'"@SRC@/configs/studies/topologies/4x-h200-pcie-replay.json"
while read -r t; do
  [ -n "$t" ] || continue
  n=$(basename "$t" .json)
  case $t in @SRC@*) n=file-$n ;; esac
  run_case "topo-show-$n" topo show "$t"
  run_case "topo-show-json-$n" topo show --json "$t"
  run_case "topo-matrix-$n" topo matrix "$t"
  run_case "topo-dot-$n" topo dot "$t"
done <<< "$topologies"

if [ "$mode" = --update ]; then
  rm -rf "$expected"
  cp -r "$actual" "$expected"
  echo "golden: wrote $(ls "$expected" | wc -l) cases to $expected"
  exit 0
fi
if diff -r -u "$expected" "$actual" > "$work/diff"; then
  echo "golden: $(ls "$actual" | wc -l) cases byte-identical"
  exit 0
fi
head -c 20000 "$work/diff"
echo
echo "golden: outputs differ from tests/golden/expected/ (cases: $(grep -c '^diff\|^Only in' "$work/diff"))"
exit 1
