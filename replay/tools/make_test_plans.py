#!/usr/bin/env python3
"""Hand-made replay plans (schema policy/PLAN.md v1) for the first hardware run: host staging one
way and both ways at once (duplex), device-local copies, an all-to-all of 4 ranks through host
staging, and compute emulation after / beside transfers. Usage: make_test_plans.py OUTDIR"""
import json, os, sys

MiB = 1024 * 1024

def plan(name, gpus, blocks_per_rank, block_bytes, layers, scheme="custom", runtime="sync"):
    return {
        "schema_version": 1, "model": "handmade", "pattern": name, "gpus": gpus,
        "block_tokens": 0, "heads": 24, "head_dim": 0, "dtype_bytes": 2,
        "num_blocks": gpus * blocks_per_rank, "kv_block_bytes": block_bytes,
        "policy": {"placement": "contiguous", "scheme": scheme, "runtime": runtime, "params": {}},
        "topology": None,
        "block_owner": [r for r in range(gpus) for _ in range(blocks_per_rank)],
        "layers": layers,
    }

def tr(id, s, d, blocks, block_bytes, route="host_staged", after=(), stream="", chunk=0):
    t = {"id": id, "src": f"gpu{s}", "dst": f"gpu{d}", "bytes": len(blocks) * block_bytes,
         "after": list(after), "engine": "ce", "stream": stream, "route": route, "kv_blocks": blocks}
    if chunk: t["chunk_bytes"] = chunk
    return t

def comp(id, g, dur, after=(), stream=""):
    return {"id": id, "gpu": f"gpu{g}", "duration_s": dur, "after": list(after), "stream": stream}

def owned(r, n):
    return list(range(r * n, (r + 1) * n))

def main(out):
    os.makedirs(out, exist_ok=True)
    B = 16 * MiB
    n = 32  # 512 MiB per rank
    plans = {}
    plans["staged_uni"] = plan("staged_uni", 2, n, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": [tr("t01", 0, 1, owned(0, n), B)], "compute": []}])
    plans["staged_duplex"] = plan("staged_duplex", 2, n, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": [tr("t01", 0, 1, owned(0, n), B), tr("t10", 1, 0, owned(1, n), B)], "compute": []}])
    plans["staged_chunk1m"] = plan("staged_chunk1m", 2, n, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": [tr("t01", 0, 1, owned(0, n), B, chunk=1 * MiB), tr("t10", 1, 0, owned(1, n), B, chunk=1 * MiB)],
        "compute": []}])
    plans["local_p2p"] = plan("local_p2p", 2, n, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": [tr("t01", 0, 1, owned(0, n), B, route="p2p"), tr("t10", 1, 0, owned(1, n), B, route="p2p")],
        "compute": []}])
    n4 = 8  # 128 MiB per rank, all-to-all of 4 ranks: 12 transfers of 128 MiB
    a2a = [tr(f"t{s}{d}", s, d, owned(s, n4), B) for s in range(4) for d in range(4) if s != d]
    plans["staged_a2a4"] = plan("staged_a2a4", 4, n4, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": a2a, "compute": []}])
    # sync: compute after all receives; decoupled: compute on local blocks beside the transfers,
    # then the remote part after them.
    ts = [tr("t01", 0, 1, owned(0, n), B), tr("t10", 1, 0, owned(1, n), B)]
    plans["compute_sync"] = plan("compute_sync", 2, n, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": ts, "compute": [comp("c0", 0, 4e-3, ["t10"]), comp("c1", 1, 4e-3, ["t01"])]}], runtime="sync")
    plans["compute_decoupled"] = plan("compute_decoupled", 2, n, B, [{"step": 0, "layer": 0, "repeat": 1,
        "transfers": ts, "compute": [comp("l0", 0, 6e-3, [], "g0"), comp("l1", 1, 6e-3, [], "g1"),
                                     comp("r0", 0, 4e-3, ["t10"], "g0"), comp("r1", 1, 4e-3, ["t01"], "g1")]}],
        runtime="ce_decoupled")
    for k, p in plans.items():
        with open(os.path.join(out, k + ".json"), "w") as f:
            json.dump(p, f)
    print(" ".join(sorted(plans)))

if __name__ == "__main__":
    main(sys.argv[1])
