#!/usr/bin/env python3
"""Checks `attention_time_s` of one layer against the H200 timings of
python/examples/attention_layers.py (nothing here is fitted).

Usage: /usr/bin/python3 sim/tools/attention_layers_check.py [RESULTS [path/to/sparsp]]
  (repository root; RESULTS defaults to sim/results/attention-layers-h200.json, that script's
  attention-layers.json). For each row it writes the same model variant as the script did (the
  preset with heads and hidden cut to heads / ulysses_degree) to a temporary folder, runs
  `sparsp simulate --topology 1x-h200-pcie --gpus 1 --model VARIANT --pattern dense
  --policy contiguous/ring/sync --kernel K --steps 1 --layers 1 --json`, takes attention_time_s,
and prints predicted vs measured time (measured time = 4 x head_dim x tokens^2 x heads / the
measured TFLOP/s, the count the measurement used). Exit 2 with one line on a failed command.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def variant(preset, degree, folder):
    """The model file python/examples/attention_layers.py timed: heads / degree, hidden to match."""
    m = json.loads(Path(preset).read_text())
    v = dict(m)
    v["heads"] = m["heads"] // degree
    v["hidden"] = v["heads"] * m["head_dim"]
    v["name"] = f"{m['name']}-heads{v['heads']}"
    v.pop("kv_heads", None)
    f = Path(folder) / f"{v['name']}.json"
    f.write_text(json.dumps(v, indent=1) + "\n")
    return f, v


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "sim/results/attention-layers-h200.json"
    sparsp = sys.argv[2] if len(sys.argv) > 2 else "build/release/sparsp"
    try:
        rows = json.loads(Path(results).read_text())
    except (OSError, ValueError) as e:
        print(f"attention_layers_check: {results}: {e}", file=sys.stderr)
        return 2
    if not isinstance(rows, list) or not rows or not all(
            isinstance(r, dict) and {"preset", "ulysses_degree", "kernel", "attention_TFLOPs",
                                     "conditions"} <= r.keys() for r in rows):
        print(f"attention_layers_check: {results}: expected a non-empty list of rows with preset, "
              "ulysses_degree, kernel, attention_TFLOPs and conditions (attention_layers.py's "
              "output)", file=sys.stderr)
        return 2
    for i, r in enumerate(rows):
        v = r["attention_TFLOPs"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e6:
            print(f"attention_layers_check: {results}: row {i}: attention_TFLOPs must be a "
                  f"positive number, got {v!r}", file=sys.stderr)
            return 2
    tmp = tempfile.TemporaryDirectory()
    print("| model (heads per rank) | U | kernel | predicted ms | measured ms | error | compute source |")
    print("|---|---:|---|---:|---:|---:|---|")
    errs = {}
    for r in rows:
        cmd = [sparsp, "simulate", "--topology", "1x-h200-pcie", "--gpus", "1", "--model",
               "VARIANT", "--pattern", "dense", "--policy", "contiguous/ring/sync", "--kernel",
               r["kernel"], "--steps", "1", "--layers", "1", "--json"]
        try:
            mfile, m = variant(r["preset"], r["ulysses_degree"], tmp.name)
            cmd[cmd.index("VARIANT")] = str(mfile)
            n_from_cond = int(r["conditions"].split(", ")[1].split()[0])
            p = subprocess.run(cmd, capture_output=True, text=True)
        except (OSError, ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
            print(f"attention_layers_check: {results}: row {rows.index(r)}: {e}", file=sys.stderr)
            return 2
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"attention_layers_check: {' '.join(cmd[1:])}: exit {p.returncode}: {last}",
                  file=sys.stderr)
            return 2
        pol = json.loads(p.stdout)["policies"][0]
        pred = pol["attention_time_s"]
        meas = 4.0 * m["head_dim"] * n_from_cond ** 2 * m["heads"] / (r["attention_TFLOPs"] * 1e12)
        err = pred / meas - 1
        errs.setdefault(r["kernel"], []).append(err)
        print(f"| {m['name']} | {r['ulysses_degree']} | {r['kernel']} | {pred * 1e3:.2f} | "
              f"{meas * 1e3:.2f} | {err * 100:+.1f}% | {pol.get('compute_source', '')} |")
    print()
    for k, e in errs.items():
        a = sorted(abs(x) for x in e)
        med = a[len(a) // 2] if len(a) % 2 else (a[len(a) // 2 - 1] + a[len(a) // 2]) / 2
        print(f"{k}: {len(a)} rows, median |error| {med * 100:.1f}%, max {a[-1] * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
