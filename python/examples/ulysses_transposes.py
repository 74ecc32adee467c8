#!/usr/bin/env python3
"""Times the layout copies around Ulysses' all-to-alls at Ulysses degree P > 1 (checks the copy rates).

yunchang's all_to_all_4D (feifeibear/long-context-attention, yunchang/comm/all_to_all.py; xDiT
calls it through SeqAllToAll4D) copies around each all_to_all_single. The op sequences below are
written from that reading (not copied); the all-to-all itself is left out (one GPU):
- q/k/v in (scatter 2, gather 1): [B, S/P, H, D] -> reshape [B, S/P, P, H/P, D] -> transpose(0, 2)
  -> .contiguous() (pre); after the exchange [P, S/P, B, H/P, D] -> reshape [S, B, H/P, D] ->
  transpose(0, 1) -> .contiguous() (post; a view at B = 1);
- output (scatter 1, gather 2): [B, S, H/P, D] -> reshape [B, P, S/P, H/P, D] -> transpose(0, 3)
  -> transpose(0, 1) -> .contiguous() (pre); after the exchange [H, S/P, B, D] -> transpose(0, 2)
  -> .contiguous() (post).
sparsp charges these as `copy` tasks at the transpose rate that branch xcopy19 set from the
degree-1 measurement (python/examples/xdit_copies.py); this script checks that rate on the
degree > 1 shapes, against a plain copy of the same bytes timed in the same run.

Usage: python3 ulysses_transposes.py [--json OUT]. Needs PyTorch with CUDA; exits 1 without a GPU.
"""
import argparse
import json
import sys


def median_ms(fn, iters=10, reps=5, warmup=2):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / iters)
    ts.sort()
    return ts[len(ts) // 2]


def ops(B, S, H, D, P):
    """(name, input tensor builder, op) for the four copies of one Ulysses layer (per rank)."""
    s, h = S // P, H // P
    return [
        ("qkv_pre", (B, s, H, D), lambda x: x.reshape(B, s, P, h, D).transpose(0, 2).contiguous()),
        ("qkv_post", (P, s, B, h, D),
         lambda x: x.reshape(S, B, h, D).transpose(0, 1).contiguous()),
        ("out_pre", (B, S, h, D),
         lambda x: x.reshape(B, P, s, h, D).transpose(0, 3).transpose(0, 1).contiguous()),
        ("out_post", (H, s, B, D), lambda x: x.transpose(0, 2).contiguous()),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 1
    cases = [  # (model, tokens S (divisible by P), heads, head_dim, P, batch)
        ("CogVideoX-5b", 17760, 48, 64, 2, 2), ("CogVideoX-5b", 17760, 48, 64, 3, 2),
        ("CogVideoX-5b", 17760, 48, 64, 4, 2), ("CogVideoX-5b", 17760, 48, 64, 2, 1),
        ("HunyuanVideo 720p", 119040, 24, 128, 2, 1), ("HunyuanVideo 720p", 119040, 24, 128, 4, 1),
        ("HunyuanVideo 720p", 119040, 24, 128, 8, 1), ("Wan2.1-14B 720p", 75600, 40, 128, 4, 1),
        ("Wan2.1-14B 720p", 75600, 40, 128, 8, 1),
    ]
    rows = []
    for model, S, H, D, P, B in cases:
        for name, shape, op in ops(B, S, H, D, P):
            x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
            y = op(x)
            is_copy = y.data_ptr() != x.data_ptr()
            nbytes = 2 * x.numel() * x.element_size()  # read + written
            row = {"model": model, "tokens": S, "heads": H, "head_dim": D, "P": P, "batch": B,
                   "op": name, "copies": is_copy, "bytes_read_written": nbytes}
            if is_copy:
                ms = median_ms(lambda: op(x))
                plain = median_ms(lambda: x.clone())
                row.update(ms=ms, GBps=nbytes / ms / 1e6, plain_copy_GBps=nbytes / plain / 1e6,
                           fraction_of_plain=plain / ms)
            rows.append(row)
            print(json.dumps(row), flush=True)
            del x, y
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "command": "python3 python/examples/ulysses_transposes.py", "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
