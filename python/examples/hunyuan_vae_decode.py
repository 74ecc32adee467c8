#!/usr/bin/env python3
"""Times the HunyuanVideo causal 3D VAE decoder on one GPU with random weights (issue 14, hyvae14).

The module tree is rebuilt here in plain PyTorch from the structure listed in
sim/tools/pipeline_flops.py (Tencent/HunyuanVideo fa14b00 hyvideo/vae: causal conv3d k3 with
replicate padding in front, GroupNorm(32) + SiLU resnets, a mid-block single-head attention over
the tile's latent tokens with a frame-causal float mask, nearest upsampling then a causal conv3d,
no conv cache). Nothing is downloaded; the weights are random (the work does not depend on their
values). fp16 (hyvideo/config.py --vae-precision fp16), NCDHW, cudnn.benchmark left at PyTorch's
default (off) as the official sample leaves it.

The official sample builds the mid-block mask row by row in a Python loop
(unet_causal_3d_blocks.prepare_causal_attention_mask); diffusers builds it with one meshgrid.
Both are rebuilt (`loop` / `grid`), since the loop is part of what the official decode costs.

Usage: python3 python/examples/hunyuan_vae_decode.py [--out results.json] [--quick]
Prints, per case, the decode time (median of the timed runs after a warm-up), the FLOPs of
sim/tools/pipeline_flops.py and the TFLOP/s; first a torch.utils.flop_counter cross-check of the
closed form on small tiles.
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
from pipeline_flops import (HY_TILING, hy_decoder_flops, hy_tiled_decode_flops,  # noqa: E402
                            strided_sizes)

ZC = 16


class CausalConv(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.pad = (k // 2, k // 2, k // 2, k // 2, k - 1, 0)
        self.conv = nn.Conv3d(cin, cout, k)

    def forward(self, x):
        return self.conv(F.pad(x, self.pad, mode="replicate") if self.pad[4] else x)


class Resnet(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.n1, self.n2 = nn.GroupNorm(32, cin, eps=1e-6), nn.GroupNorm(32, cout, eps=1e-6)
        self.c1, self.c2 = CausalConv(cin, cout, 3), CausalConv(cout, cout, 3)
        self.sc = CausalConv(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return h + (self.sc(x) if self.sc is not None else x)


def causal_mask(frames, hw, dtype, device, how):
    n = frames * hw
    if how == "grid":
        f = torch.arange(n, device=device) // hw
        return torch.where(f[None, :] <= f[:, None], 0.0, float("-inf")).to(dtype)
    m = torch.full((n, n), float("-inf"), dtype=dtype, device=device)
    for i in range(n):  # one row per token, as the official sample does
        m[i, : (i // hw + 1) * hw] = 0
    return m


class MidAttention(nn.Module):
    def __init__(self, c, mask):
        super().__init__()
        self.mask = mask
        self.norm = nn.GroupNorm(32, c, eps=1e-6)
        self.q, self.k, self.v, self.o = (nn.Linear(c, c) for _ in range(4))

    def forward(self, x):
        b, c, t, h, w = x.shape
        m = causal_mask(t, h * w, x.dtype, x.device, self.mask)
        s = self.norm(x).flatten(2).transpose(1, 2)  # b, t h w, c
        y = F.scaled_dot_product_attention(self.q(s)[:, None], self.k(s)[:, None],
                                           self.v(s)[:, None], attn_mask=m[None, None])
        y = self.o(y[:, 0]).transpose(1, 2).reshape(b, c, t, h, w)
        return x + y


class Upsample(nn.Module):
    def __init__(self, c, time):
        super().__init__()
        self.time = time
        self.conv = CausalConv(c, c, 3)

    def forward(self, x):
        t = x.shape[2]
        first = F.interpolate(x[:, :, 0], scale_factor=2.0, mode="nearest")[:, :, None]
        if t > 1:
            rest = F.interpolate(x[:, :, 1:], scale_factor=(2.0 if self.time else 1.0, 2.0, 2.0),
                                 mode="nearest")
            x = torch.cat([first, rest], 2)
        else:
            x = first
        return self.conv(x)


class Decoder(nn.Module):
    def __init__(self, mask="loop"):
        super().__init__()
        ch = [512, 512, 512, 256, 128]  # the mid block's 512, then reversed block_out_channels
        self.pq = nn.Conv3d(ZC, ZC, 1)
        self.cin = CausalConv(ZC, 512, 3)
        self.mid = nn.ModuleList([Resnet(512, 512), MidAttention(512, mask), Resnet(512, 512)])
        self.blocks = nn.ModuleList()
        for i in range(4):
            a, b = ch[i], ch[i + 1]
            layers = [Resnet(a if r == 0 else b, b) for r in range(3)]
            if i < 3:
                layers.append(Upsample(b, i >= 1))
            self.blocks.append(nn.Sequential(*layers))
        self.nout = nn.GroupNorm(32, 128, eps=1e-6)
        self.cout = CausalConv(128, 3, 3)

    def forward(self, z):
        h = self.cin(self.pq(z))
        for m in self.mid:
            h = m(h)
        for blk in self.blocks:
            h = blk(h)
        return self.cout(F.silu(self.nout(h)))


def blend(a, b, extent, dim):
    """Linear cross-fade of the last `extent` slices of a into the first of b along dim."""
    extent = min(a.shape[dim], b.shape[dim], extent)
    for i in range(extent):
        wgt = i / extent
        b.select(dim, i).mul_(wgt).add_(a.select(dim, a.shape[dim] - extent + i), alpha=1 - wgt)
    return b


@torch.no_grad()
def tiled_decode(dec, z, tiling):
    """Decode as the official sample (or diffusers) tiles: time first, then space."""
    tt, st, ts, ss = HY_TILING[tiling]
    frames, h, w = z.shape[2:]
    sample_tile, sample_step = 8 * ts, 8 * ss

    def spatial(zt):
        if h <= ts and w <= ts:
            return dec(zt)
        rows = [[dec(zt[:, :, :, i:i + ts, j:j + ts]) for j in range(0, w, ss)]
                for i in range(0, h, ss)]
        out = []
        for i, row in enumerate(rows):
            parts = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = blend(rows[i - 1][j], tile, sample_tile - sample_step, 3)
                if j > 0:
                    tile = blend(row[j - 1], tile, sample_tile - sample_step, 4)
                parts.append(tile[:, :, :, :sample_step, :sample_step])
            out.append(torch.cat(parts, 4))
        return torch.cat(out, 3)

    if frames <= tt - 1:
        return spatial(z)
    sample_t, sample_t_step = 4 * (tt - 1), 4 * st
    tiles = []
    for i in range(0, frames, st):
        y = spatial(z[:, :, i:i + tt])
        tiles.append(y[:, :, 1:] if i > 0 else y)
    out = []
    for i, tile in enumerate(tiles):
        if i > 0:
            tile = blend(tiles[i - 1], tile, sample_t - sample_t_step, 2)
            out.append(tile[:, :, :sample_t_step])
        else:
            out.append(tile[:, :, :sample_t_step + 1])
    return torch.cat(out, 2)


def time_it(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        y = fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), ts, tuple(y.shape)


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    quick = "--quick" in sys.argv
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if dev == "cuda" else torch.float32
    peak = 989e12  # H200 SXM datasheet BF16/FP16 dense (configs/gpus/models.json)
    rows = []
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    print(torch.__version__, name, "cudnn", torch.backends.cudnn.version(), flush=True)
    from torch.utils.flop_counter import FlopCounterMode
    dec = Decoder("grid").to(dev, dtype).eval()
    for shape in ((5, 4, 6), (3, 2, 2)):
        z = torch.randn(1, ZC, *shape, device=dev, dtype=dtype)
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            y = dec(z)
        r = {"flop_counter": fc.get_total_flops(), "closed_form": hy_decoder_flops(*shape)[0],
             "latent": shape, "output": tuple(y.shape)}
        rows.append(r)
        print(json.dumps(r), flush=True)
    if dev != "cuda" or quick:
        return
    cases = [
        ("official tile 17x32x32 (loop mask)", "loop", (17, 32, 32), None, 3),
        ("diffusers tile 5x32x32 (grid mask)", "grid", (5, 32, 32), None, 3),
        ("official tile 17x32x32 (grid mask)", "grid", (17, 32, 32), None, 3),
        ("official whole 720p decode 33x45x80", "loop", (33, 45, 80), "official", 1),
        ("diffusers whole 720p decode 33x45x80", "grid", (33, 45, 80), "diffusers", 1),
    ]
    decs = {"loop": Decoder("loop").to(dev, dtype).eval(), "grid": dec}
    for label, mask, shape, tiling, reps in cases:
        z = torch.randn(1, ZC, *shape, device=dev, dtype=dtype)
        d = decs[mask]
        if tiling is None:
            fn = lambda: d(z)  # noqa: E731
            flops = hy_decoder_flops(*shape)[0]
        else:
            fn = lambda: tiled_decode(d, z, tiling)  # noqa: E731
            flops = hy_tiled_decode_flops(*shape, tiling)
        with torch.no_grad():
            s, ts, yshape = time_it(fn, reps)
        r = {"case": label, "latent": shape, "tiling": tiling, "mask": mask, "time_s": s,
             "times_s": ts, "flops": flops, "TFLOPs": flops / s / 1e12,
             "fraction_of_peak": flops / s / peak, "output": yshape,
             "peak_mem_GiB": torch.cuda.max_memory_allocated() / 2**30}
        rows.append(r)
        print(json.dumps(r), flush=True)
        torch.cuda.empty_cache()
    if out:
        with open(out, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "dtype": "float16",
                       "peak_fp16_dense_TFLOPs": 989,
                       "tiles_official_720p": [strided_sizes(33, 17, 12), strided_sizes(45, 32, 24),
                                               strided_sizes(80, 32, 24)],
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
