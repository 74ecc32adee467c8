#!/usr/bin/env python3
"""Attention throughput against the number of thread blocks (CTAs) a call launches, on one GPU.

Why: the kernel registry's wave-quantization term (configs/kernels/kernels.json `tile_q_tokens`,
`ctas_per_sm`; sim/RESULTS.md "Wave quantization of named kernels") multiplies a kernel's
efficiency by waves / ceil(waves). On the H200 it was checked at 160 and 320 CTAs only (+3.4% and
-18%). This script measures the whole curve: for a fixed query tile of 128 rows, CTAs = batch x
heads x ceil(query_tokens / 128), swept from under one wave to many, so that the partial-wave
speed-up (a CTA alone on an SM running faster than one of two sharing it) can be read off.

Kernels: PyTorch's flash SDPA backend (FlashAttention-2 kernels; flash-attn itself is not
installed on the device) through torch.ops.aten._scaled_dot_product_flash_attention, and the
cuDNN SDPA backend where PyTorch offers it. bf16, head_dim 128, non-causal, keys 8192, random
inputs; one correctness check against float32 math at a small shape first. TFLOP/s counts
4 x q x k x d x heads per call (the FlashAttention paper's count). Median of 5 x `iters` calls
(ring_merge_cost.time_ms, CUDA events).

Usage: OUT=DIR python3 attention_waves.py   (writes DIR/attention-waves-<gpu>.json; prints a table)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_merge_cost import time_ms  # noqa: E402

D = 128
KEYS = 8192
TILE_Q = 128


def check(fn, name):
    """Relative error of fn against float32 math on fresh random inputs; raises above 1e-2."""
    q, k, v = (torch.randn(1, 4, 512, D, device='cuda', dtype=torch.bfloat16) for _ in range(3))
    out = fn(q, k, v)
    ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) / D ** 0.5, -1) @ v.float()
    err = ((out.float() - ref).norm() / ref.norm()).item()
    if not err < 1e-2:
        raise SystemExit(f'attention_waves: {name} differs from the reference: {err:.3g}')
    return err


def main():
    props = torch.cuda.get_device_properties(0)
    R = {'gpu': torch.cuda.get_device_name(0), 'torch': torch.__version__,
         'sms': props.multi_processor_count, 'head_dim': D, 'keys': KEYS, 'tile_q': TILE_Q,
         'rows': []}
    flash = torch.ops.aten._scaled_dot_product_flash_attention
    kernels = {'flash': lambda q, k, v: flash(q, k, v, 0.0, False)[0]}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def cudnn(q, k, v):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        cudnn(*(torch.randn(1, 1, 256, D, device='cuda', dtype=torch.bfloat16) for _ in range(3)))
        kernels['cudnn'] = cudnn
    except Exception as e:  # noqa: BLE001 (the backend is optional)
        R['cudnn_unavailable'] = str(e).splitlines()[0][:200]
    R['check_rel_err'] = {n: check(f, n) for n, f in kernels.items()}
    # (heads, query tokens): CTAs from 8 to 6144 at 128-row tiles.
    shapes = [(h, 1024) for h in (1, 2, 4, 8, 16, 17, 24, 32, 33, 48, 64, 66, 96, 128, 132, 192)]
    shapes += [(h, 8192) for h in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48)]
    for name, fn in kernels.items():
        for h, sq in shapes:
            q = torch.randn(1, h, sq, D, device='cuda', dtype=torch.bfloat16)
            k = torch.randn(1, h, KEYS, D, device='cuda', dtype=torch.bfloat16)
            v = torch.randn_like(k)
            ms = time_ms(lambda: fn(q, k, v), 20, warmup=3)
            ctas = h * -(-sq // TILE_Q)
            R['rows'].append(dict(kernel=name, heads=h, query_tokens=sq, ctas=ctas, ms=ms,
                                  TFLOPs=4 * sq * KEYS * D * h / ms / 1e9))
    out = os.environ.get('OUT', '.')
    tag = R['gpu'].split()[-1].lower()
    with open(os.path.join(out, f'attention-waves-{tag}.json'), 'w') as f:
        json.dump(R, f, indent=1)
    print(f"{R['gpu']}, {R['sms']} SMs, check {R['check_rel_err']}")
    print('kernel  heads  q_tokens  CTAs  CTAs/SM     ms   TFLOP/s')
    for r in R['rows']:
        print(f"{r['kernel']:6} {r['heads']:6} {r['query_tokens']:9} {r['ctas']:5} "
              f"{r['ctas'] / R['sms']:8.2f} {r['ms']:7.3f} {r['TFLOPs']:8.1f}")


if __name__ == '__main__':
    main()
