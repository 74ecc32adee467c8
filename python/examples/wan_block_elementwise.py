"""Time the elementwise and norm work of one Wan2.1 DiT block as Wan2.1's own (eager) code runs it.

    PYTHONPATH=python python3 python/examples/wan_block_elementwise.py [tokens dim ffn heads] [repeats]

Defaults: Wan2.1-14B at 720p (75,600 tokens, dim 5120, FFN 13824, 40 heads). The operations follow
Wan-Video/Wan2.1 wan/modules/model.py (WanAttentionBlock.forward, WanRMSNorm, WanLayerNorm,
rope_apply) and wan/modules/attention.py (flash_attention's dtype casts) under
`amp.autocast(dtype=bfloat16)` as wan/text2video.py runs the DiT: the residual stream x is float32
(`x + y * e` runs in float32), the Linear outputs are bf16, WanRMSNorm upcasts to float32,
WanLayerNorm runs in float32, rope_apply runs in float64. They are written out here (not imported),
one group per row, each timed alone (CUDA events, median of `repeats` after 3 warm-ups).

Each row also prints the bytes the compute model charges for it (policy/compute_model.cpp,
ComputeModel::elementwise_bytes_per_element; bytes per element of the tokens x dim activation)
and that many bytes divided by the GPU's memory bandwidth (argument --bandwidth-GBps, default the
H200's 4800 GB/s), so the model's figure is checked, not fitted, against the measured time."""
import argparse

import torch
import torch.nn.functional as F

from sparsp_torch.measure import time_cuda

ap = argparse.ArgumentParser()
ap.add_argument("shape", nargs="*", type=int, default=[75600, 5120, 13824, 40])
ap.add_argument("--repeats", type=int, default=10)
ap.add_argument("--bandwidth-GBps", type=float, default=4800.0)
a = ap.parse_args()
N, D, FF, H = a.shape
HD = D // H
dev, bf, f32 = "cuda", torch.bfloat16, torch.float32
torch.manual_seed(0)
x32 = torch.randn(1, N, D, device=dev, dtype=f32)      # residual stream (float32)
y16 = torch.randn(1, N, D, device=dev, dtype=bf)       # a Linear output (bf16)
e = torch.randn(1, 6, D, device=dev, dtype=f32)        # modulation (float32)
w16 = torch.ones(D, device=dev, dtype=bf)              # RMSNorm weight (cast to bf16 by Wan)
lnw = torch.ones(D, device=dev, dtype=f32)
lnb = torch.zeros(D, device=dev, dtype=f32)
hid = torch.randn(1, N, FF, device=dev, dtype=bf)
c = HD // 2
freqs = torch.polar(torch.ones(N, c, device=dev, dtype=torch.float64),
                    torch.randn(N, c, device=dev, dtype=torch.float64))  # complex128, as rope_params


def rms(t):  # WanRMSNorm.forward: self._norm(x.float()).type_as(x) * self.weight
    u = t.float()
    return (u * torch.rsqrt(u.pow(2).mean(dim=-1, keepdim=True) + 1e-6)).type_as(t) * w16


def ln(t, affine=False):  # WanLayerNorm.forward: super().forward(x.float()).type_as(x)
    return F.layer_norm(t.float(), (D,), lnw if affine else None, lnb if affine else None,
                        1e-6).type_as(t)


def rope(t):  # rope_apply: float64 complex multiply, cat, stack, .float()
    xi = torch.view_as_complex(t[0].to(torch.float64).reshape(N, H, -1, 2))
    xi = torch.view_as_real(xi * freqs.view(N, 1, c)).flatten(2)
    xi = torch.cat([xi, t[0, N:]])
    return torch.stack([xi]).float()


def modulate(i_scale, i_shift):  # norm(x).float() * (1 + e[s]) + e[t]
    return ln(x32).float() * (1 + e[:, i_scale]) + e[:, i_shift]


# (name, fn, bytes per element of N x D charged by the model: reads + writes, derivation)
rows = [
    ("norm1 LayerNorm fp32 + scale + shift", lambda: modulate(1, 0), 24, "LN r4w4, *(1+e) r4w4, +e r4w4"),
    ("autocast casts of the q,k,v input", lambda: [x32.to(bf) for _ in range(3)], 18, "3 x (r4 w2)"),
    ("WanRMSNorm q and k", lambda: [rms(y16), rms(y16)], 72,
     "2 x (float r2w4, pow r4w4, mean r4, *rsqrt r4w4, type_as r4w2, *w r2w2)"),
    ("rope_apply q and k (float64)", lambda: [rope(y16.view(1, N, H, HD)) for _ in range(2)], 140,
     "2 x (to f64 r2w8, complex mul r8w8, cat r8w8, stack r8w8, float r8w4)"),
    ("attention dtype casts (q,k in; out; o input)",
     lambda: [x32.to(bf), x32.to(bf), y16.float().to(bf)], 24, "q,k r4w2 each, out r2w4, o input r4w2"),
    ("gated residuals x + y * e (x2)", lambda: [x32 + y16 * e[:, 2] for _ in range(2)], 36,
     "2 x (y*e r2w4, x+ r4r4w4)"),
    ("cross-attn: norm3 LN, q cast, RMSNorm q, residual",
     lambda: [ln(x32, True), x32.to(bf), rms(y16), x32 + y16], 60, "LN r4w4, cast r4w2, RMSNorm 36, add r4r2w4"),
    ("norm2 LayerNorm + scale + shift + cast", lambda: modulate(4, 3).to(bf), 30, "24 + cast r4w2"),
    ("GELU (tanh) on the FFN hidden", lambda: F.gelu(hid, approximate="tanh"), 4.0 * FF / D, "r2w2 on N x FFN"),
]
bw = a.bandwidth_GBps * 1e9
print(f"Wan2.1 block elementwise work, {N} tokens, dim {D}, FFN {FF}, {torch.cuda.get_device_name()}, "
      f"torch {torch.__version__}; model: bytes / {a.bandwidth_GBps:.0f} GB/s")
print(f"{'group':52s} {'measured ms':>11s} {'model ms':>9s} {'B/elem':>7s}  derivation")
tm = tp = 0.0
for name, fn, bpe, how in rows:
    ms = time_cuda(torch, fn, 3, a.repeats) * 1e3
    pred = bpe * N * D / bw * 1e3
    tm += ms
    tp += pred
    print(f"{name:52s} {ms:11.3f} {pred:9.3f} {bpe:7.2f}  {how}")
print(f"{'total':52s} {tm:11.3f} {tp:9.3f}   model / measured - 1 = {100 * (tp / tm - 1):+.1f}%")
