#!/usr/bin/env python3
"""Times the copies xDiT runs around attention at Ulysses degree 1, with the torch ops as it runs them.

xDiT's xFuserLongContextAttention calls yunchang's SeqAllToAll4D on q, k, v and on the output
whatever the Ulysses degree P. At P = 1, all_to_all_4D (yunchang/comm/all_to_all.py) skips the
all-to-all but keeps its reshapes, transposes and .contiguous() calls:
- q/k/v path (scatter 2, gather 1): [B, S, H, D] -> view [B, S, 1, H, D] -> transpose(0, 2) ->
  .contiguous() (copy 1); view [S, B, H, D] -> transpose(0, 1) -> .contiguous() (copy 2);
- output path (scatter 1, gather 2): [B, S, H, D] -> view [B, 1, S, H, D] -> transpose(0, 3) ->
  transpose(0, 1) -> .contiguous() (copy 1); view [H, S, B, D] -> transpose(0, 2) ->
  .contiguous() (copy 2).
And xDiT runs Ulysses' attention through its ring function with one step: the partial output is
cast to float32 (`block_out.to(torch.float32)`) and back (`out.to(q.dtype)`).
The op sequences above are written here from that reading (not copied).

For each op the script prints whether it copies (a fresh buffer), the bytes it moves (read +
written), the median time, GB/s, and sparsp's copy task for the same bytes: bytes / memory
bandwidth + launch overhead (ComputeModel::copy_time_s; H200: 4800 GB/s datasheet, 5 us).

Usage: python3 xdit_copies.py [--tokens 8888] [--heads 48] [--head-dim 64] [--json OUT]
(defaults: CogVideoX-5b on 2 GPUs, half of its 17,776 tokens per rank.) Needs PyTorch with CUDA;
exits 1 without a GPU.
"""
import argparse
import json
import sys

SPARSP_BANDWIDTH_BPS = 4800e9  # configs/gpus/models.json "NVIDIA H200" memory_bandwidth_GBps
SPARSP_LAUNCH_S = 5e-6  # ComputeModel::launch_overhead_s


def median_ms(fn, iters=20, reps=7, warmup=3):
    """Median over `reps` runs of the mean time of `iters` calls, in ms (CUDA events)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    times.sort()
    return times[len(times) // 2]


def qkv_copy1(x):
    b, s, h, d = x.shape
    return x.reshape(b, s, 1, h, d).transpose(0, 2).contiguous()


def qkv_copy2(y, b, s, h, d):
    return y.reshape(s, b, h, d).transpose(0, 1).contiguous()


def out_copy1(x):
    b, s, h, d = x.shape
    return x.reshape(b, 1, s, h, d).transpose(0, 3).transpose(0, 1).contiguous()


def out_copy2(y, b, s, h, d):
    return y.reshape(h, s, b, d).transpose(0, 2).contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=8888, help="tokens per rank")
    ap.add_argument("--heads", type=int, default=48)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("xdit_copies: PyTorch is not installed", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("xdit_copies: no CUDA GPU", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    dev = torch.device("cuda")
    s, h, d = a.tokens, a.heads, a.head_dim
    rows = []

    def record(name, batch, fn, bytes_moved, copies):
        ms = median_ms(fn)
        pred_s = bytes_moved / SPARSP_BANDWIDTH_BPS + SPARSP_LAUNCH_S if copies else 0.0
        rows.append({
            "op": name, "batch": batch, "copies": copies, "bytes": bytes_moved,
            "time_ms": ms, "GBps": bytes_moved / (ms * 1e-3) / 1e9 if copies and ms > 0 else 0.0,
            "sparsp_time_ms": pred_s * 1e3,
        })

    # A large device-to-device copy: the copy ceiling (bytes read + written).
    big = torch.randn(1 << 28, device=dev, dtype=torch.bfloat16)  # 512 MiB
    record("d2d_copy_512MiB", 1, lambda: big.clone(), 2 * big.numel() * 2, True)
    del big

    for batch in (2, 1):
        n = batch * s * h * d
        x = torch.randn(batch, s, h, d, device=dev, dtype=torch.bfloat16)
        # As xDiT's CogVideoX processor passes k and v: [B, H, S', D] sliced and transposed.
        xt = torch.randn(batch, h, s, d, device=dev, dtype=torch.bfloat16).transpose(1, 2)
        y1 = qkv_copy1(x)
        c1 = y1.data_ptr() != x.data_ptr()
        c2 = qkv_copy2(y1, batch, s, h, d).data_ptr() != y1.data_ptr()
        record("qkv_copy1", batch, lambda: qkv_copy1(x), 2 * n * 2 if c1 else 0, c1)
        record("qkv_copy2", batch, lambda: qkv_copy2(y1, batch, s, h, d), 2 * n * 2 if c2 else 0,
               c2)
        c1t = qkv_copy1(xt).data_ptr() != xt.data_ptr()
        record("qkv_copy1_transposed_input", batch, lambda: qkv_copy1(xt), 2 * n * 2 if c1t else 0,
               c1t)
        z1 = out_copy1(x)
        o1 = z1.data_ptr() != x.data_ptr()
        o2 = out_copy2(z1, batch, s, h, d).data_ptr() != z1.data_ptr()
        record("out_copy1", batch, lambda: out_copy1(x), 2 * n * 2 if o1 else 0, o1)
        record("out_copy2", batch, lambda: out_copy2(z1, batch, s, h, d), 2 * n * 2 if o2 else 0,
               o2)
        f = x.to(torch.float32)
        record("cast_bf16_to_fp32", batch, lambda: x.to(torch.float32), n * 6, True)
        record("cast_fp32_to_bf16", batch, lambda: f.to(torch.bfloat16), n * 6, True)
        # Check the copies' values: the layout changes, the data does not.
        assert torch.equal(qkv_copy2(qkv_copy1(x), batch, s, h, d), x)
        assert torch.equal(out_copy2(out_copy1(x), batch, s, h, d), x)
        del x, xt, y1, z1, f
        torch.cuda.empty_cache()

    out = {
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "shape": {"tokens_per_rank": s, "heads": h, "head_dim": d, "dtype": "bf16"},
        "sparsp_copy_model": {"memory_bandwidth_GBps": SPARSP_BANDWIDTH_BPS / 1e9,
                              "launch_overhead_us": SPARSP_LAUNCH_S * 1e6},
        "rows": rows,
    }
    print(f"{'op':30s} {'B':>2s} {'copies':>6s} {'MB':>9s} {'ms':>8s} {'GB/s':>7s} {'sparsp ms':>9s}")
    for r in rows:
        print(f"{r['op']:30s} {r['batch']:2d} {str(r['copies']):>6s} {r['bytes'] / 1e6:9.1f} "
              f"{r['time_ms']:8.4f} {r['GBps']:7.0f} {r['sparsp_time_ms']:9.4f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
