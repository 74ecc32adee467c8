#!/usr/bin/env python3
"""Times the Wan2.1 VAE decoder on one GPU with random weights (issue 14, branch vae14).

The module tree is rebuilt in plain PyTorch from the structure listed in
sim/tools/pipeline_flops.py wan_decode_flops (Wan-Video/Wan2.1 wan/modules/vae.py): causal
conv3d k3 with a 2-frame cache (zeros before the first frame), RMS_norm (F.normalize x scale x
gamma), SiLU, single-head spatial attention in the middle, upsample3d (time_conv k(3,1,1) to 2C
channels split into 2 frames, skipped on the first latent frame) and upsample2d (nearest-exact x2
in float then conv2d 3x3 to C/2), one latent frame per decoder call. float32 as WanVAE runs it
(its default dtype torch.float; autocast to float32 is a no-op on CUDA), cuDNN's default TF32 for
convolutions left on, as in Wan's own run. Nothing downloaded; weights random.

Usage: python3 python/examples/wan_vae_decode.py [--out results.json]
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sim", "tools"))
from pipeline_flops import wan_decode_flops  # noqa: E402


class CConv(nn.Module):
    def __init__(self, a, b, k):
        super().__init__()
        self.kt = k if isinstance(k, int) else k[0]
        ks = (k, k, k) if isinstance(k, int) else k
        self.conv = nn.Conv3d(a, b, ks, padding=(0, ks[1] // 2, ks[2] // 2))

    def forward(self, x, cache, key):
        if self.kt > 1:
            prev = cache.get(key)
            inp = x if prev is None else torch.cat([prev, x], 2)
            cache[key] = inp[:, :, -2:].clone()
            need = self.kt - 1 + x.shape[2] - inp.shape[2]
            if need > 0:
                inp = F.pad(inp, (0, 0, 0, 0, need, 0))
            x = inp
        return self.conv(x)


class RMS(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.g = nn.Parameter(torch.ones(c, 1, 1, 1))
        self.s = c ** 0.5

    def forward(self, x):
        return F.normalize(x, dim=1) * self.s * self.g


class Res(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.n1, self.n2 = RMS(a), RMS(b)
        self.c1, self.c2 = CConv(a, b, 3), CConv(b, b, 3)
        self.sc = nn.Conv3d(a, b, 1) if a != b else None

    def forward(self, x, cache, key):
        h = self.sc(x) if self.sc is not None else x
        y = self.c1(F.silu(self.n1(x)), cache, key + "1")
        y = self.c2(F.silu(self.n2(y)), cache, key + "2")
        return y + h


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n = RMS(c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.proj = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, t, h, w = x.shape
        y = self.n(x).transpose(1, 2).reshape(b * t, c, h, w)
        q, k, v = self.qkv(y).reshape(b * t, 1, 3 * c, h * w).permute(0, 1, 3, 2).contiguous().chunk(3, -1)
        o = F.scaled_dot_product_attention(q, k, v).squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w)
        return x + self.proj(o).reshape(b, t, c, h, w).transpose(1, 2)


class Up(nn.Module):
    def __init__(self, c, time):
        super().__init__()
        self.time = CConv(c, 2 * c, (3, 1, 1)) if time else None
        self.conv = nn.Conv2d(c, c // 2, 3, padding=1)

    def forward(self, x, cache, key, first):
        b, c, t, h, w = x.shape
        if self.time is not None and not first:
            x = self.time(x, cache, key).reshape(b, 2, c, t, h, w)
            x = torch.stack((x[:, 0], x[:, 1]), 3).reshape(b, c, 2 * t, h, w)
        t = x.shape[2]
        y = x.transpose(1, 2).reshape(b * t, c, h, w)
        y = F.interpolate(y.float(), scale_factor=2.0, mode="nearest-exact").type_as(y)
        y = self.conv(y)
        return y.reshape(b, t, c // 2, 2 * h, 2 * w).transpose(1, 2)


class Decoder(nn.Module):
    def __init__(self, dim=96, z=16):
        super().__init__()
        c = [4 * dim, 4 * dim, 4 * dim, 2 * dim, dim]
        self.conv2 = nn.Conv3d(z, z, 1)
        self.conv1 = CConv(z, c[0], 3)
        self.m1, self.att, self.m2 = Res(c[0], c[0]), Attn(c[0]), Res(c[0], c[0])
        self.blocks = nn.ModuleList()
        self.ups = nn.ModuleList()
        for i in range(4):
            a = c[i] // 2 if i in (1, 2, 3) else c[i]
            self.blocks.append(nn.ModuleList([Res(a if r == 0 else c[i + 1], c[i + 1]) for r in range(3)]))
            self.ups.append(Up(c[i + 1], i < 2) if i < 3 else None)
        self.hn = RMS(dim)
        self.head = CConv(dim, 3, 3)

    def frame(self, x, cache, first):
        h = self.conv1(x, cache, "in")
        h = self.m2(self.att(self.m1(h, cache, "m1")), cache, "m2")
        for i, blk in enumerate(self.blocks):
            for j, r in enumerate(blk):
                h = r(h, cache, f"b{i}{j}")
            if self.ups[i] is not None:
                h = self.ups[i](h, cache, f"u{i}", first)
        return self.head(F.silu(self.hn(h)), cache, "out")


@torch.no_grad()
def decode(dec, z):
    x = dec.conv2(z)
    cache = {}
    return torch.cat([dec.frame(x[:, :, i:i + 1], cache, i == 0) for i in range(z.shape[2])], 2)


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    print(torch.__version__, torch.cuda.get_device_name(), "cudnn.allow_tf32",
          torch.backends.cudnn.allow_tf32)
    dec = Decoder().cuda().eval()
    rows = []
    from torch.utils.flop_counter import FlopCounterMode
    z = torch.randn(1, 16, 3, 6, 10, device="cuda")
    with FlopCounterMode(display=False) as fc:
        decode(dec, z)
    rows.append({"flop_counter": fc.get_total_flops(), "closed_form": wan_decode_flops(3, 6, 10)})
    print(json.dumps(rows[-1]))
    decode(dec, torch.randn(1, 16, 2, 90, 160, device="cuda"))
    for name, shape in (("720P 81 frames", (21, 90, 160)), ("480P 81 frames", (21, 60, 104))):
        z = torch.randn(1, 16, *shape, device="cuda")
        ts = []
        for _ in range(2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            y = decode(dec, z)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        f = wan_decode_flops(*shape)
        s = min(ts)
        rows.append({"shape": name, "latent": shape, "times_s": ts, "flops": f,
                     "TFLOPs": f / s / 1e12, "fraction_of_bf16_peak": f / s / 989e12,
                     "output": tuple(y.shape)})
        print(json.dumps(rows[-1]))
    if out:
        with open(out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "peak_bf16_dense_TFLOPs": 989, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
