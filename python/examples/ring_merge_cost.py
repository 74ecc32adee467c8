#!/usr/bin/env python3
"""Times the merge of ring-attention partial outputs on a GPU, as ring implementations run it.

Ring attention (ring-flash-attention, yunchang, hence xDiT) merges each step's partial output
into a float32 accumulator with log-sum-exp weights:

    out <- out - sigmoid(block_lse - lse) * (out - block_out)
    lse <- lse - logsigmoid(lse - block_lse)

out: float32 [B, S, H, D]; block_out: bf16 [B, S, H, D]; lse, block_lse: float32 [B, S, H, 1].
The formula is the standard LSE merge, written here from its mathematics (not copied). The
implementations wrap it in torch.jit.script, which fuses the elementwise chain on the GPU.

The script reports, per shape, the time of one merge in eager PyTorch and under torch.jit.script,
and the equivalent bytes per output element: time x (the GPU's measured copy bandwidth) / (B S H D),
the figure a compute model charges per ring step (issue 14: "ring merge not counted").

Usage: python3 ring_merge_cost.py [--tokens 115200] [--heads 24] [--head-dim 128] [--json OUT]
Needs PyTorch with CUDA; exits 1 without a GPU.
"""
import argparse
import json
import sys


def time_ms(fn, iters, warmup=3):
    """Median over 5 runs of the mean time of `iters` calls of fn, in ms (CUDA events)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=115200, help="sequence length (all ranks)")
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ranks", default="2,4,8", help="ring degrees: S = tokens / P per rank")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("ring_merge_cost: PyTorch is not installed", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("ring_merge_cost: no CUDA GPU", file=sys.stderr)
        return 1
    dev = torch.device("cuda")

    def merge(out, lse, block_out, block_lse):
        out = out - torch.sigmoid(block_lse - lse) * (out - block_out.to(torch.float32))
        lse = lse - torch.nn.functional.logsigmoid(lse - block_lse)
        return out, lse

    merge_jit = torch.jit.script(merge)

    rows = []
    for p in [int(x) for x in a.ranks.split(",")]:
        s = a.tokens // p
        n = s * a.heads * a.head_dim
        out = torch.randn(1, s, a.heads, a.head_dim, device=dev, dtype=torch.float32)
        block_out = torch.randn(1, s, a.heads, a.head_dim, device=dev, dtype=torch.bfloat16)
        lse = torch.randn(1, s, a.heads, 1, device=dev, dtype=torch.float32)
        block_lse = torch.randn(1, s, a.heads, 1, device=dev, dtype=torch.float32)
        # Copy bandwidth: a float32 device-to-device copy of out reads and writes 8 B per element.
        dst = torch.empty_like(out)
        copy_ms = time_ms(lambda: dst.copy_(out), a.iters)
        copy_Bps = 8.0 * n / (copy_ms * 1e-3)
        eager_ms = time_ms(lambda: merge(out, lse, block_out, block_lse), a.iters)
        jit_ms = time_ms(lambda: merge_jit(out, lse, block_out, block_lse), a.iters)
        row = {
            "ring_degree": p, "tokens_per_rank": s, "elements": n,
            "copy_GBps": copy_Bps / 1e9,
            "eager_ms": eager_ms, "jit_ms": jit_ms,
            "eager_bytes_per_element": eager_ms * 1e-3 * copy_Bps / n,
            "jit_bytes_per_element": jit_ms * 1e-3 * copy_Bps / n,
        }
        rows.append(row)
        print(f"P={p} S={s}: copy {row['copy_GBps']:.0f} GB/s; merge eager {eager_ms:.3f} ms "
              f"({row['eager_bytes_per_element']:.1f} B/element), jit {jit_ms:.3f} ms "
              f"({row['jit_bytes_per_element']:.1f} B/element)")
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "heads": a.heads, "head_dim": a.head_dim, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
