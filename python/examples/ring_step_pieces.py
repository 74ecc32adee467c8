#!/usr/bin/env python3
"""Times the pieces of one ring-flash-attention forward step on a GPU at its README benchmark shape.

Shape: batch 1, 8192 tokens per rank, 5 heads x 128 (benchmark_qkvpacked_func.py when the README
table was published), and 32 heads for comparison. Pieces: the FlashAttention-2 forward through
PyTorch's flash SDPA backend (torch.ops.aten._scaled_dot_product_flash_attention, which also returns
the LSE; flash-attn itself is not installed on the device) on a full 8192 x 8192 block, the causal
local block, zigzag's half pieces (4096 queries x 8192 keys; 8192 x 4096); the torch.jit.script LSE
merge (written from its mathematics, as ring_merge_cost.py), the first-step cast to float32, the
final cast to bf16, zigzag's merge of a slice with its write-back (out[slice] = ...), and the
qkvpacked entry's k/v .contiguous(). Bytes per element: time x the measured float32 copy
bandwidth / elements (as ring_merge_cost.py). Median of 5 x 50 calls.

Usage: OUT=DIR python3 ring_step_pieces.py   (writes DIR/ring-step-pieces-h200.json)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_merge_cost import time_ms  # noqa: E402

F = torch.ops.aten._scaled_dot_product_flash_attention
d = 'cuda'
H = 5
D = 128
b = torch.bfloat16
f32 = torch.float32


def t(f, n=50):
    # ring_merge_cost.time_ms with 5 warm-up calls, as the run of 2026-12-03 did.
    return time_ms(f, n, warmup=5)


@torch.jit.script
def m(o, l, bo, bl):
    bo = bo.to(torch.float32)
    o = o - torch.sigmoid(bl - l) * (o - bo)
    l = l - torch.nn.functional.logsigmoid(l - bl)
    return o, l


def main():
    R = {'gpu': torch.cuda.get_device_name(0), 'torch': torch.__version__,
         'sms': torch.cuda.get_device_properties(0).multi_processor_count}
    for h in (5, 32):
        for nm, sq, sk, c in [('full', 8192, 8192, 0), ('causal', 8192, 8192, 1),
                              ('q_half', 4096, 8192, 0), ('kv_half', 8192, 4096, 0)]:
            q = torch.randn(1, h, sq, D, device=d, dtype=b)
            k = torch.randn(1, h, sk, D, device=d, dtype=b)
            v = torch.randn_like(k)
            ms = t(lambda: F(q, k, v, 0.0, bool(c)))
            R[f'h{h}_{nm}'] = dict(ms=ms, TFLOPs=4 * sq * sk * D * h * (0.5 if c else 1) / ms / 1e9)
    S = 8192
    o = torch.randn(1, S, H, D, device=d, dtype=f32)
    bo = torch.randn(1, S, H, D, device=d, dtype=b)
    l = torch.randn(1, S, H, 1, device=d, dtype=f32)
    bl = torch.randn_like(l)
    n = S * H * D
    cp = torch.empty_like(o)
    bw = 8 * n / t(lambda: cp.copy_(o)) / 1e-3  # a float32 copy reads and writes 8 B/element
    R['copy_GBps'] = bw / 1e9

    def sl():
        so, sl_ = m(o[:, S // 2:], l[:, S // 2:], bo[:, S // 2:], bl[:, S // 2:])
        o[:, S // 2:] = so
        l[:, S // 2:] = sl_

    for nm, f, el in [('merge', lambda: m(o, l, bo, bl), n), ('cast_in', lambda: bo.to(f32), n),
                      ('cast_out', lambda: o.to(b), n), ('zigzag_slice_merge', sl, n // 2)]:
        ms = t(f)
        R[nm] = dict(ms=ms, bytes_per_element=ms * 1e-3 * bw / el)
    qkv = torch.randn(1, S, 3, H, D, device=d, dtype=b)
    R['kv_contiguous'] = dict(ms=t(lambda: (qkv[:, :, 1].contiguous(), qkv[:, :, 2].contiguous())))
    print(json.dumps(R, indent=1))
    with open(os.path.join(os.environ.get('OUT', '.'), 'ring-step-pieces-h200.json'), 'w') as f:
        json.dump(R, f, indent=1)


if __name__ == '__main__':
    main()
