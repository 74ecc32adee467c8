#!/usr/bin/env python3
"""Times the CogVideoX 3D causal VAE decoder on one GPU with random weights (issue 14, vae14).

The module tree is rebuilt here in plain PyTorch from the structure listed in
sim/tools/pipeline_flops.py (diffusers AutoencoderKLCogVideoX decoder: causal conv3d k3 with a
2-frame cache, SpatialNorm3D = GroupNorm(32) x conv1x1(zq) + conv1x1(zq), SiLU, upsample
nearest x2 then a per-frame conv2d 3x3, chunks of 2 latent frames). Nothing is downloaded; the
weights are random (the work does not depend on their values). bf16, NCDHW as diffusers runs it,
cudnn.benchmark left at PyTorch's default (off) as diffusers leaves it.

Usage: python3 python/examples/cogvideox_vae_decode.py [--out results.json]
Prints, per shape, the decode time (median of 3 after a warm-up), the FLOPs of
sim/tools/pipeline_flops.py and the TFLOP/s; and the same with the norms replaced by identity
(the conv stack alone).
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sim", "tools"))
from pipeline_flops import cog_decode_flops  # noqa: E402

ZC = 16


class CausalConv(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.k = k
        self.conv = nn.Conv3d(cin, cout, k, padding=(0, k // 2, k // 2))

    def forward(self, x, cache, key):
        if self.k > 1:
            prev = cache.get(key)
            if prev is None:
                prev = x[:, :, :1].expand(-1, -1, self.k - 1, -1, -1)
            x = torch.cat([prev, x], 2)
            cache[key] = x[:, :, -(self.k - 1):].clone()
        return self.conv(x)


class SpatialNorm(nn.Module):
    def __init__(self, c, norms):
        super().__init__()
        self.norms = norms
        self.gn = nn.GroupNorm(32, c, eps=1e-6)
        self.y = nn.Conv3d(ZC, c, 1)
        self.b = nn.Conv3d(ZC, c, 1)

    def forward(self, f, zq):
        if not self.norms:
            return f
        z = F.interpolate(zq, size=f.shape[-3:])
        return self.gn(f) * self.y(z) + self.b(z)


class Resnet(nn.Module):
    def __init__(self, cin, cout, norms):
        super().__init__()
        self.n1, self.n2 = SpatialNorm(cin, norms), SpatialNorm(cout, norms)
        self.c1, self.c2 = CausalConv(cin, cout, 3), CausalConv(cout, cout, 3)
        self.sc = nn.Conv3d(cin, cout, 1) if cin != cout else None

    def forward(self, x, zq, cache, key):
        h = self.c1(F.silu(self.n1(x, zq)), cache, key + "c1")
        h = self.c2(F.silu(self.n2(h, zq)), cache, key + "c2")
        return h + (self.sc(x) if self.sc is not None else x)


class Upsample(nn.Module):
    def __init__(self, c, time):
        super().__init__()
        self.time = time
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        b, c, t, h, w = x.shape
        if self.time and t > 1 and t % 2 == 1:
            first = F.interpolate(x[:, :, 0], scale_factor=2.0)[:, :, None]
            rest = F.interpolate(x[:, :, 1:], scale_factor=2.0)
            x = torch.cat([first, rest], 2)
        elif self.time and t > 1:
            x = F.interpolate(x, scale_factor=2.0)
        else:
            x = F.interpolate(x.squeeze(2) if t == 1 else x.transpose(1, 2).reshape(b * t, c, h, w),
                              scale_factor=2.0)
            x = x[:, :, None] if t == 1 else x.reshape(b, t, c, 2 * h, 2 * w).transpose(1, 2)
        b, c, t, h, w = x.shape
        y = self.conv(x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w))
        return y.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4)


class Decoder(nn.Module):
    def __init__(self, norms=True):
        super().__init__()
        ch = [512, 512, 256, 256, 128]  # reversed block_out_channels, with the mid block's 512 first
        self.cin = CausalConv(ZC, 512, 3)
        self.mid = nn.ModuleList([Resnet(512, 512, norms) for _ in range(2)])
        self.blocks = nn.ModuleList()
        self.ups = nn.ModuleList()
        for i in range(4):
            a, b = ch[i], ch[i + 1]
            self.blocks.append(nn.ModuleList([Resnet(a if r == 0 else b, b, norms) for r in range(4)]))
            self.ups.append(Upsample(b, i < 2) if i < 3 else nn.Identity())
        self.nout = SpatialNorm(128, norms)
        self.cout = CausalConv(128, 3, 3)

    def forward(self, z, cache):
        h = self.cin(z, cache, "in")
        for i, r in enumerate(self.mid):
            h = r(h, z, cache, f"m{i}")
        for i, blk in enumerate(self.blocks):
            for j, r in enumerate(blk):
                h = r(h, z, cache, f"b{i}r{j}")
            h = self.ups[i](h)
        return self.cout(F.silu(self.nout(h, z)), cache, "out")


@torch.no_grad()
def decode(dec, z):
    frames = z.shape[2]
    n = max(frames // 2, 1)
    rem = frames % 2
    cache, out = {}, []
    for k in range(n):
        a = 2 * k + (0 if k == 0 else rem)
        b = 2 * (k + 1) + rem
        out.append(dec(z[:, :, a:b], cache))
    return torch.cat(out, 2)


def time_it(dec, shape, reps=3):
    z = torch.randn(1, ZC, *shape, device="cuda", dtype=torch.bfloat16)
    decode(dec, z)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        y = decode(dec, z)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), tuple(y.shape)


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    peak = 989e12  # H200 SXM datasheet BF16 dense (configs/gpus/models.json)
    rows = []
    print(torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
    shapes = [("5b tile (xDiT --enable_tiling)", (13, 30, 45)),
              ("5b untiled 480x720", (13, 60, 90)),
              ("1.5 tile, 161 frames", (41, 30, 45))]
    # cross-check of the closed form: PyTorch's own FLOP counter over the same decode
    from torch.utils.flop_counter import FlopCounterMode
    dec = Decoder(True).cuda().to(torch.bfloat16).eval()
    for shape in ((13, 30, 45), (41, 6, 10)):
        z = torch.randn(1, ZC, *shape, device="cuda", dtype=torch.bfloat16)
        with FlopCounterMode(display=False) as fc:
            decode(dec, z)
        r = {"flop_counter": fc.get_total_flops(), "closed_form": cog_decode_flops(*shape)[0],
             "latent": shape}
        rows.append(r)
        print(json.dumps(r))
    del dec
    for norms in (True, False):
        dec = Decoder(norms).cuda().to(torch.bfloat16).eval()
        for name, shape in shapes:
            s, yshape = time_it(dec, shape)
            flops = cog_decode_flops(*shape)[0]
            r = {"shape": name, "latent": shape, "norms": norms, "time_s": s, "flops": flops,
                 "TFLOPs": flops / s / 1e12, "fraction_of_peak": flops / s / peak,
                 "output": yshape}
            rows.append(r)
            print(json.dumps(r))
        del dec
        torch.cuda.empty_cache()
    if out:
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "peak_bf16_dense_TFLOPs": 989, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
