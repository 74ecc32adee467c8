#!/usr/bin/env python3
"""One layer's attention, timed on this GPU at the published models' shapes, whole and as one
rank of a Ulysses split (heads / P): the measurements that check `attention_time_s`.

Why: issue 14 asks that `sparsp simulate ... --kernel K` predict the `attention_time_s` of one
layer on an H200. The registry's figures come from published tables (FlashAttention's README,
cuDNN and STA tables) and from one H200 sweep of CTAs at 8192 keys (attention_waves.py, which
set fa2's `single_cta_wave_time`). This script times other shapes: the models sparsp ships,
with all their heads and with the heads one rank holds under Ulysses-P (where wave
quantization matters most), so that the prediction can be checked, not fitted.

For each case it writes a model JSON (the preset with `heads` and `hidden` cut to heads / P;
text tokens kept) and runs `sparsp_torch measure` on it (SDPA flash = FlashAttention-2 and SDPA
cuDNN; bf16, forward, non-causal, median of 10 calls after 3 warm-ups; CUDA events). The model
files and the measured entries come back under OUT; sim/tools/attention_layers_check.py then
runs the predictions and prints the table.

Usage: OUT=DIR PYTHONPATH=python python3 python/examples/attention_layers.py   (repository root)
"""
import json
import os
import sys
from pathlib import Path

from sparsp_torch.measure import measure

ROOT = Path(__file__).resolve().parents[2]
# (model preset or file, Ulysses degrees whose per-rank heads are timed)
CASES = [
    ("configs/models/cogvideox-2b.json", [1, 2, 6]),
    ("configs/models/cogvideox-5b.json", [1, 2, 4, 8]),
    ("sim/results/cogvideox1.5-5b-161f.json", [1, 4]),
    ("configs/models/wan2.1-1.3b-480p.json", [1, 4]),
    ("configs/models/wan2.1-14b-720p.json", [1, 8]),
    ("configs/models/hunyuanvideo-720p.json", [1, 8]),
]


def main():
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    topo = ROOT / "python/examples/h200.topology.json"
    rows = []
    for path, degrees in CASES:
        m = json.loads((ROOT / path).read_text())
        for p in degrees:
            if m["heads"] % p:
                sys.exit(f"attention_layers: {path}: {m['heads']} heads do not split by {p}")
            v = dict(m)
            v["heads"] = m["heads"] // p
            v["hidden"] = v["heads"] * m["head_dim"]
            v["name"] = f"{m['name']}-heads{v['heads']}"
            v.pop("kv_heads", None)
            mfile = out / f"{v['name']}.json"
            mfile.write_text(json.dumps(v, indent=1) + "\n")
            entries = measure(str(topo), str(out / f"{v['name']}.topology.json"), str(mfile),
                              ["fa2", "cudnn"], warmup=3, repeats=10)
            for e in entries:
                rows.append({"model_file": mfile.name, "preset": path, "ulysses_degree": p,
                             "kernel": e["kernel"],
                             "attention_TFLOPs": e["attention_TFLOPs"]["128"],
                             "conditions": e["conditions"]})
    (out / "attention-layers.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
