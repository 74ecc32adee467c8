#!/usr/bin/env python3
"""Hand-made plans (scheme custom) of gemm and copy tasks for the device: HunyuanVideo's
per-rank DiT-block GEMMs (hidden 3072, MLP 12288; 118,800 tokens / SP ranks) and Ulysses-style
transposes (copy tasks), with the durations the simulator's compute model gives them:
  gemm: count x 2 m n k / (peak x gemm_efficiency) is what a study would use; validate re-times
        gemm tasks at the topology's measured cuBLAS rate, so duration_s here is a placeholder;
  copy: bytes / memory bandwidth + launch overhead (ComputeModel::copy_time_s, H200 datasheet
        4.8 TB/s, launch 4.5 us as calibrated), which validate keeps: the check of that model.
usage: make_kinds_plans.py OUTDIR"""
import json, os, sys

HBM_Bps, LAUNCH_s = 4.8e12, 4.5e-6
TOKENS, HIDDEN, MLP = 118800, 3072, 12288

def plan(ranks, name):
    m = TOKENS // ranks
    shapes = [("qkv", m, 3 * HIDDEN, HIDDEN), ("proj", m, HIDDEN, HIDDEN),
              ("mlp_up", m, MLP, HIDDEN), ("mlp_down", m, HIDDEN, MLP)]
    compute = []
    for r in range(ranks):
        prev = None
        for tag, M, N, K in shapes:
            c = {"id": f"g{r}_{tag}", "gpu": f"gpu{r}", "kind": "gemm", "m": M, "n": N, "k": K,
                 "count": 1, "duration_s": 2.0 * M * N * K / (989e12 * 0.7) + LAUNCH_s,
                 "stream": f"s{r}"}
            compute.append(c)
        # Ulysses' transposes of Q, K, V (3 x tokens x hidden bf16, read + written), then of O.
        for tag, nbytes in (("a2a_pre_qkv", 2 * 3 * m * HIDDEN * 2), ("a2a_post_out", 2 * m * HIDDEN * 2)):
            compute.append({"id": f"c{r}_{tag}", "gpu": f"gpu{r}", "kind": "copy", "bytes": nbytes,
                            "duration_s": nbytes / HBM_Bps + LAUNCH_s, "stream": f"s{r}"})
    return {"schema_version": 2, "model": "hunyuanvideo-720p", "pattern": name, "gpus": ranks,
            "block_tokens": 0, "heads": 24, "head_dim": 128, "dtype_bytes": 2, "num_blocks": 0,
            "kv_block_bytes": 0,
            "policy": {"placement": "contiguous", "scheme": "custom", "runtime": "sync", "params": {}},
            "block_owner": [],
            "layers": [{"step": 0, "layer": 0, "repeat": 1, "transfers": [], "compute": compute}]}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for ranks in (1, 2):
    with open(os.path.join(out, f"kinds{ranks}.plan.json"), "w") as f:
        json.dump(plan(ranks, f"gemm_copy_{ranks}"), f, indent=1)
