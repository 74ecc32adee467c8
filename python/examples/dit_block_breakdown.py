"""Time the parts of one Wan2.1-14B DiT block at 720p on this GPU (random weights, bf16, forward).

    PYTHONPATH=python python3 python/examples/dit_block_breakdown.py [tokens] [repeats]

Shapes from the Wan2.1-14B config (Wan-Video/Wan2.1 wan/configs/wan_t2v_14B.py): dim 5120,
40 heads x 128, FFN 13824 (GELU tanh), 512 text tokens (umT5) for the cross-attention, RMSNorm on
q and k, 3D RoPE, AdaLN modulation (6 x dim per block). Each part is timed alone with CUDA events
(median of `repeats` after 3 warm-up calls), so launch gaps between parts are not counted. The
output says how much of the block is outside the self-attention and the GEMMs: the work the
compute model does not count yet (issue 14)."""
import sys

import torch
import torch.nn.functional as F

from sparsp_torch.measure import time_cuda

N = int(sys.argv[1]) if len(sys.argv) > 1 else 75600
REP = int(sys.argv[2]) if len(sys.argv) > 2 else 10
D, H, HD, FF, T = 5120, 40, 128, 13824, 512
dev, bf = "cuda", torch.bfloat16
torch.manual_seed(0)
x = torch.randn(1, N, D, device=dev, dtype=bf)
ctx = torch.randn(1, T, D, device=dev, dtype=bf)
W = {k: torch.randn(D, D, device=dev, dtype=bf) * 0.01 for k in
     ("q", "k", "v", "o", "cq", "ck", "cv", "co")}
W1 = torch.randn(D, FF, device=dev, dtype=bf) * 0.01
W2 = torch.randn(FF, D, device=dev, dtype=bf) * 0.01
mod = torch.randn(1, 6, D, device=dev, dtype=bf)
g = torch.ones(D, device=dev, dtype=bf)
freqs = torch.randn(N, HD // 2, device=dev, dtype=torch.float32)
cis = torch.polar(torch.ones_like(freqs), freqs)


def timed(fn):
    return time_cuda(torch, fn, 3, REP) * 1e3  # ms


q = (x @ W["q"]).view(1, N, H, HD)
k = (x @ W["k"]).view(1, N, H, HD)
v = (x @ W["v"]).view(1, N, H, HD)


def rope(t):
    tc = torch.view_as_complex(t.float().reshape(1, N, H, HD // 2, 2))
    return torch.view_as_real(tc * cis[None, :, None, :]).flatten(3).to(bf)


def modulate():
    h = F.layer_norm(x, (D,))
    return h * (1 + mod[:, 1]) + mod[:, 0]


parts = {
    "gemm: self-attn q,k,v,o projections": (lambda: [x @ W[n] for n in "qkvo"], 4 * 2 * N * D * D),
    "gemm: cross-attn q,o (+ k,v on 512 text tokens)": (
        lambda: [x @ W["cq"], x @ W["co"], ctx @ W["ck"], ctx @ W["cv"]], 2 * 2 * N * D * D + 2 * 2 * T * D * D),
    "gemm: FFN up + down": (lambda: (x @ W1) @ W2, 2 * 2 * N * D * FF),
    "self-attention (SDPA, cuDNN backend)": (None, 4 * N * N * HD * H),
    "cross-attention (SDPA, 512 keys)": (None, 4 * N * T * HD * H),
    "RMSNorm q and k": (lambda: [F.rms_norm(t, (HD,)) for t in (q, k)], 0),
    "3D RoPE on q and k": (lambda: [rope(q), rope(k)], 0),
    "LayerNorm + modulation (x3) and gated residuals (x2)": (
        lambda: [modulate() for _ in range(3)] + [x + mod[:, 2] * x for _ in range(2)], 0),
    "GELU (tanh) on the FFN hidden": (None, 0),
}
from torch.nn.attention import sdpa_kernel, SDPBackend
qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
cq = qt
ck = torch.randn(1, H, T, HD, device=dev, dtype=bf)
hid = torch.randn(1, N, FF, device=dev, dtype=bf)


def sdpa_self():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(qt, kt, vt)


def sdpa_cross():
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(cq, ck, ck)


fns = {"self-attention (SDPA, cuDNN backend)": sdpa_self, "cross-attention (SDPA, 512 keys)": sdpa_cross,
       "GELU (tanh) on the FFN hidden": lambda: F.gelu(hid, approximate="tanh")}
total = 0.0
rows = []
for name, (fn, flops) in parts.items():
    ms = timed(fns.get(name, fn))
    total += ms
    rows.append((name, ms, flops))
print(f"Wan2.1-14B block, {N} tokens, bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}")
for name, ms, flops in rows:
    rate = f"{flops / ms / 1e9:7.1f} TFLOP/s" if flops else ""
    print(f"{name:55s} {ms:9.3f} ms {100 * ms / total:5.1f}%  {rate}")
gemm = sum(ms for n, ms, _ in rows if n.startswith("gemm"))
attn = sum(ms for n, ms, _ in rows if n.startswith("self-attention"))
print(f"{'sum of parts':55s} {total:9.3f} ms")
print(f"outside self-attention and GEMMs: {total - gemm - attn:.3f} ms = "
      f"{100 * (total - gemm - attn) / total:.1f}% of the block "
      f"({100 * (total - gemm - attn) / (gemm + attn):.1f}% on top of GEMMs + self-attention)")
