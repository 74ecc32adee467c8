#!/usr/bin/env python3
"""FLOPs of the stages around the denoising loop, from the architectures (issue 14, branch vae14).

Usage: /usr/bin/python3 sim/tools/pipeline_flops.py            (prints the preset figures)
       /usr/bin/python3 sim/tools/pipeline_flops.py --self-test (hand-worked checks; exit 1 on a miss)

CogVideoX 3D causal VAE decoder (huggingface/diffusers AutoencoderKLCogVideoX, read at 0.31-0.32,
the versions xDiT required in Nov-Dec 2024; config of THUDM/CogVideoX-2b/-5b vae: latent_channels
16, block_out_channels (128, 256, 256, 512), layers_per_block 3, temporal_compression_ratio 4,
norm_num_groups 32, no post_quant_conv):
- conv_in: causal conv3d k3, 16 -> 512 at the latent resolution;
- mid block: 2 resnets at 512;
- up blocks i = 0..3, channels 512->512, 512->256, 256->256, 256->128, each of 4 resnets
  (layers_per_block + 1); blocks 0-2 end in an upsampler: nearest x2 in H and W (and in time for
  blocks 0 and 1, "compress_time": T -> 2T, or 1 + 2(T - 1) when T is odd and > 1) then a 2D 3x3
  conv, out -> out channels, on every frame;
- a resnet: SpatialNorm3D (GroupNorm, two 1x1x1 convs from the 16-channel latent to C), SiLU,
  causal conv3d k3 in -> out, SpatialNorm3D, SiLU, conv3d k3 out -> out, and a 1x1x1 shortcut
  conv when in != out;
- norm_out SpatialNorm3D at 128, conv_out causal conv3d k3 128 -> 3.
- decode runs in chunks of 2 latent frames (the first takes 3 when the count is odd) with a conv
  cache, so each causal conv computes exactly its chunk's output frames: FLOPs do not depend on
  the chunking, only on the frame counts after each temporal upsample.
A conv of k taps from Cin to Cout over V output voxels is 2 k Cin Cout V FLOPs (multiply + add).
GroupNorm, SiLU, interpolation and the adds are memory-bound and not counted as FLOPs; the
efficiency measured on the H200 (python/examples/cogvideox_vae_decode.py) covers them.

With `vae.enable_tiling()` (xDiT's examples/run_cogvideo.sh at d2fa062 sets --enable_tiling) the
latent is cut into overlapping tiles of sample_height/16 x sample_width/16 latent pixels (30 x 45
for the 480x720 config), stepped by int(30 x 5/6) = 25 and int(45 x 4/5) = 36, each decoded
whole; tiles at the edge are cut short. The FLOPs are the sum over tiles.

T5 v1.1 XXL encoder (google/t5-v1_1-xxl config: d_model 4096, 24 layers, 64 heads x d_kv 64,
d_ff 10240, gated-GELU): per token per layer 2 (4 d^2 + 3 d d_ff) for the q,k,v,o and wi_0, wi_1,
wo GEMMs, plus 4 n d for QK^T and PV over n tokens. CogVideoX encodes 226 tokens per prompt and,
with CFG, the negative prompt too (2 sequences).

HunyuanVideo causal 3D VAE decoder (Tencent/HunyuanVideo at fa14b00, hyvideo/vae/vae.py
DecoderCausal3D, unet_causal_3d_blocks.py, autoencoder_kl_causal_3d.py; checkpoint config
hunyuan-video-t2v-720p/vae/config.json as diffusers' AutoencoderKLHunyuanVideo defaults repeat it:
latent_channels 16, block_out_channels (128, 256, 512, 512), layers_per_block 2, norm_num_groups
32, mid_block_add_attention true, sample_size 256, sample_tsize 64, time/space compression 4/8):
- post_quant_conv 1x1x1 16 -> 16 (per tile); conv_in causal conv3d k3 16 -> 512;
- mid block: resnet(512), one single-head attention over all t h w latent tokens of the tile
  (GroupNorm, q, k, v, out linears 512 -> 512, SDPA with a frame-causal float mask, residual),
  resnet(512);
- up blocks, channels 512->512, 512->512, 512->256, 256->128, each of 3 resnets
  (layers_per_block + 1); blocks 0-2 end in UpsampleCausal3D: nearest x2 in H and W, and in time
  for blocks 1 and 2 (the first frame stays one frame: T -> 1 + 2 (T - 1)), then a causal conv3d
  k3 out -> out;
- a resnet: GroupNorm, SiLU, causal conv3d k3 in -> out, GroupNorm, SiLU, conv3d k3 out -> out,
  1x1x1 shortcut when in != out (no spatial norm, unlike CogVideoX);
- conv_norm_out GroupNorm(128), SiLU, conv_out causal conv3d k3 128 -> 3.
There is no conv cache: each tile is decoded whole with replicate padding in front.
The mid-block attention over N tokens of C = 512 channels is 8 N C^2 (the four linears) +
4 N^2 C (QK^T and PV; the mask hides nothing from the FLOPs of a dense SDPA kernel).

Tiling: the official sample (sample_video.py; hyvideo/config.py --vae-tiling defaults true,
pipeline decode_latents -> vae.enable_tiling()) cuts time first: tiles of 16 + 1 latent frames
stepped int(16 x 0.75) = 12 (temporal_tiled_decode), then each tile whose H or W exceeds 32
latent pixels into tiles of 32 x 32 stepped int(32 x 0.75) = 24 (spatial_tiled_decode).
diffusers' AutoencoderKLHunyuanVideo (xDiT's examples/hunyuan_video_usp_example.py, the L20 rows)
decodes frame-wise by default: tiles of 16/4 + 1 = 5 latent frames stepped 12/4 = 3, spatial tiles
256/8 = 32 stepped 192/8 = 24 with enable_tiling.

LLaMA-3-8B (the decoder of llava-llama-3-8b, HunyuanVideo's text_encoder "llm", loaded with
transformers AutoModel: no lm_head; d 4096, 32 layers, 32 heads, 8 kv heads of 128 (GQA: k, v
4096 -> 1024), d_ff 14336 SwiGLU): per token per layer 2 (2 d^2 + 2 d kv + 3 d d_ff) + 4 n d over
n tokens. HunyuanVideo pads to --text-len 256 + the video template's crop_start 95 = 351 tokens
(hyvideo/inference.py max_length, hyvideo/constants.py; padding="max_length"), and runs every
layer (hidden_state_skip_layer 2 reads hidden_states[-3] of a full forward).
CLIP ViT-L/14 text model (text_encoder_2 "clipL": d 768, 12 layers, d_ff 3072, 77 tokens):
per token per layer 2 (4 d^2 + 2 d d_ff) + 4 n d.
With --cfg-scale 1.0 (guidance-distilled) only the prompt is encoded, once.
"""
import sys

COG_VAE = {"latent_channels": 16, "block_out": (128, 256, 256, 512), "layers_per_block": 3,
           "temporal_levels": 2, "tile_latent": (30, 45), "tile_overlap": (1 / 6, 1 / 5)}


def conv_flops(taps, cin, cout, voxels):
    return 2 * taps * cin * cout * voxels


def up_t(t):
    """Frames after a compress_time upsample (diffusers CogVideoXUpsample3D; one frame stays one)."""
    if t == 1:
        return 1
    if t % 2 == 1:
        return 1 + 2 * (t - 1)
    return 2 * t


def resnet_flops(cin, cout, vox, zc):
    f = conv_flops(27, cin, cout, vox) + conv_flops(27, cout, cout, vox)
    f += 2 * conv_flops(1, zc, cin, vox) + 2 * conv_flops(1, zc, cout, vox)  # two SpatialNorm3D
    if cin != cout:
        f += conv_flops(1, cin, cout, vox)
    return f


def cog_decoder_chunk_flops(t, h, w, cfg=COG_VAE):
    """FLOPs of CogVideoXDecoder3D on one chunk of t latent frames of h x w latent pixels."""
    zc = cfg["latent_channels"]
    ch = list(reversed(cfg["block_out"]))
    vox = t * h * w
    f = conv_flops(27, zc, ch[0], vox)
    f += 2 * resnet_flops(ch[0], ch[0], vox, zc)
    cin = ch[0]
    for i, cout in enumerate(ch):
        for r in range(cfg["layers_per_block"] + 1):
            f += resnet_flops(cin if r == 0 else cout, cout, vox, zc)
        if i < len(ch) - 1:
            if i < cfg["temporal_levels"]:
                t = up_t(t)
            h, w = 2 * h, 2 * w
            vox = t * h * w
            f += conv_flops(9, cout, cout, vox)
        cin = cout
    f += 2 * conv_flops(1, zc, ch[-1], vox) + conv_flops(27, ch[-1], 3, vox)
    return f, t


def cog_decode_flops(frames, h, w, cfg=COG_VAE):
    """Whole decode of `frames` latent frames, in diffusers' chunks of 2 (first 3 if odd)."""
    chunks = [2] * (frames // 2)
    if frames % 2:
        chunks[0] += 1
    total, out_frames = 0, 0
    for t in chunks:
        f, tt = cog_decoder_chunk_flops(t, h, w, cfg)
        total += f
        out_frames += tt
    return total, out_frames


def tile_sizes(n, tile, overlap):
    step = int(tile * (1 - overlap))
    return [min(tile, n - i) for i in range(0, n, step)]


def cog_tiled_decode_flops(frames, h, w, cfg=COG_VAE):
    th, tw = cfg["tile_latent"]
    oh, ow = cfg["tile_overlap"]
    if h <= th and w <= tw:
        return cog_decode_flops(frames, h, w, cfg)[0]
    return sum(cog_decode_flops(frames, a, b, cfg)[0]
               for a in tile_sizes(h, th, oh) for b in tile_sizes(w, tw, ow))


def wan_decode_flops(frames, h, w, dim=96, zc=16):
    """Wan2.1 VAE decoder (Wan-Video/Wan2.1 wan/modules/vae.py, _video_vae: dim 96, z_dim 16,
    dim_mult [1, 2, 4, 4], num_res_blocks 2, no attn_scales, temperal_upsample [True, True,
    False]); decode() runs one latent frame at a time with a 2-frame conv cache.
    Channels [384, 384, 384, 192, 96]: conv1 causal k3 16 -> 384; middle Res(384), single-head
    spatial attention over h x w per frame (1x1 qkv 384 -> 1152 and proj 384 -> 384, SDPA
    4 (hw)^2 384), Res(384); up 0: 3 Res(384), upsample3d (time_conv k(3,1,1) 384 -> 768 on every
    latent frame but the first, which stays one frame; the others become 2; then nearest x2 and a
    conv2d 3x3 384 -> 192); up 1: Res(192 -> 384, 1x1 shortcut), 2 Res(384), upsample3d as
    before; up 2: 3 Res(192), upsample2d (conv2d 192 -> 96); up 3: 3 Res(96); head causal k3
    96 -> 3. A Res is RMS_norm, SiLU, conv k3 in -> out, RMS_norm, SiLU, conv k3 out -> out."""
    c = [4 * dim, 4 * dim, 4 * dim, 2 * dim, dim]

    def res(a, b, vox):
        return conv_flops(27, a, b, vox) + conv_flops(27, b, b, vox) + (
            conv_flops(1, a, b, vox) if a != b else 0)

    total = conv_flops(1, zc, zc, frames * h * w)  # conv2, 1x1 on the latent
    for i in range(frames):
        t = 1
        hh, ww = h, w
        v = hh * ww
        f = conv_flops(27, zc, c[0], v)
        f += 2 * res(c[0], c[0], v)
        f += conv_flops(1, c[0], 3 * c[0], v) + conv_flops(1, c[0], c[0], v) + 4 * v * v * c[0]
        # up 0
        f += 3 * res(c[0], c[1], t * v)
        if i > 0:
            f += conv_flops(3, c[1], 2 * c[1], t * v)
            t *= 2
        hh, ww = 2 * hh, 2 * ww
        f += conv_flops(9, c[1], c[1] // 2, t * hh * ww)
        # up 1
        v = t * hh * ww
        f += res(c[1] // 2, c[2], v) + 2 * res(c[2], c[2], v)
        if i > 0:
            f += conv_flops(3, c[2], 2 * c[2], v)
            t *= 2
        hh, ww = 2 * hh, 2 * ww
        f += conv_flops(9, c[2], c[2] // 2, t * hh * ww)
        # up 2
        v = t * hh * ww
        f += 3 * res(c[3], c[3], v)
        hh, ww = 2 * hh, 2 * ww
        f += conv_flops(9, c[3], c[3] // 2, t * hh * ww)
        # up 3 + head
        v = t * hh * ww
        f += 3 * res(c[4], c[4], v) + conv_flops(27, c[4], 3, v)
        total += f
    return total


def t5_xxl_flops(tokens, d=4096, layers=24, d_ff=10240):
    return layers * tokens * (2 * (4 * d * d + 3 * d * d_ff) + 4 * tokens * d)


HY_VAE = {"latent_channels": 16, "block_out": (128, 256, 512, 512), "layers_per_block": 2,
          "temporal_levels": 2, "spatial_levels": 3}
# (tile frames incl. the extra one, frame step, tile pixels, pixel step) in latent units
HY_TILING = {"official": (17, 12, 32, 24), "diffusers": (5, 3, 32, 24)}


def hy_resnet_flops(cin, cout, vox):
    f = conv_flops(27, cin, cout, vox) + conv_flops(27, cout, cout, vox)
    if cin != cout:
        f += conv_flops(1, cin, cout, vox)
    return f


def hy_attention_flops(n, c):
    """Single-head attention over n tokens of c channels: 4 linears + QK^T and PV."""
    return 4 * 2 * n * c * c + 4 * n * n * c


def hy_decoder_flops(t, h, w, cfg=HY_VAE):
    """FLOPs of post_quant_conv + DecoderCausal3D on one tile of t x h x w latent voxels.
    Returns (flops, output frames)."""
    zc = cfg["latent_channels"]
    ch = list(reversed(cfg["block_out"]))
    vox = t * h * w
    f = conv_flops(1, zc, zc, vox) + conv_flops(27, zc, ch[0], vox)
    f += 2 * hy_resnet_flops(ch[0], ch[0], vox) + hy_attention_flops(vox, ch[0])
    cin = ch[0]
    for i, cout in enumerate(ch):
        for r in range(cfg["layers_per_block"] + 1):
            f += hy_resnet_flops(cin if r == 0 else cout, cout, vox)
        if i < cfg["spatial_levels"]:
            if i >= len(ch) - 1 - cfg["temporal_levels"]:
                t = 1 + 2 * (t - 1)
            h, w = 2 * h, 2 * w
            vox = t * h * w
            f += conv_flops(27, cout, cout, vox)
        cin = cout
    f += conv_flops(27, ch[-1], 3, vox)
    return f, t


def strided_sizes(n, size, step):
    return [min(size, n - i) for i in range(0, n, step)]


def hy_tiled_decode_flops(frames, h, w, tiling="official", cfg=HY_VAE):
    """Whole decode of a frames x h x w latent as the official sample (or diffusers) tiles it."""
    tt, st, ts, ss = HY_TILING[tiling]
    t_tiles = strided_sizes(frames, tt, st) if frames > tt - 1 else [frames]
    total = 0
    for t in t_tiles:
        if h > ts or w > ts:
            total += sum(hy_decoder_flops(t, a, b, cfg)[0]
                         for a in strided_sizes(h, ts, ss) for b in strided_sizes(w, ts, ss))
        else:
            total += hy_decoder_flops(t, h, w, cfg)[0]
    return total


def llama3_8b_flops(tokens, d=4096, layers=32, kv=1024, d_ff=14336):
    return layers * tokens * (2 * (2 * d * d + 2 * d * kv + 3 * d * d_ff) + 4 * tokens * d)


def clip_l_text_flops(tokens=77, d=768, layers=12, d_ff=3072):
    return layers * tokens * (2 * (4 * d * d + 2 * d * d_ff) + 4 * tokens * d)


HY_TEXT_TOKENS = 256 + 95  # --text-len + crop_start of the dit-llm-encode-video template

HY_PRESETS = [
    ("hunyuanvideo-720p, 129 frames 720x1280", 33, 45, 80),
    ("xdit-hunyuanvideo 960x960, 129 frames", 33, 60, 60),
    ("hunyuanvideo-sta, 117 frames 768x1280", 30, 48, 80),
]


PRESETS = [
    ("cogvideox-2b / -5b, 49 frames 480x720", 13, 60, 90),
    ("cogvideox1.5-5b, 161 frames 1360x768", 41, 96, 170),
]


def report():
    for name, t, h, w in PRESETS:
        f, frames = cog_decode_flops(t, h, w)
        ft = cog_tiled_decode_flops(t, h, w)
        print(f"{name}: latent {t}x{h}x{w} -> {frames} frames; decode {f:.4g} FLOPs untiled, "
              f"{ft:.4g} tiled ({ft / f:.3f}x)")
    for name, t, h, w in (("Wan2.1/2.2-A14B 720P, 81 frames", 21, 90, 160),
                          ("Wan2.1/2.2-A14B 480P, 81 frames", 21, 60, 104)):
        print(f"{name}: Wan VAE decode {wan_decode_flops(t, h, w):.4g} FLOPs (runs in float32)")
    print(f"T5-XXL encoder, 226 tokens: {t5_xxl_flops(226):.4g} FLOPs per prompt, "
          f"{2 * t5_xxl_flops(226):.4g} with the negative prompt (CFG)")
    for name, t, h, w in HY_PRESETS:
        f, frames = hy_decoder_flops(t, h, w)
        fo = hy_tiled_decode_flops(t, h, w, "official")
        fd = hy_tiled_decode_flops(t, h, w, "diffusers")
        print(f"{name}: latent {t}x{h}x{w} -> {frames} frames; HunyuanVideo VAE decode {f:.4g} "
              f"untiled, {fo:.4g} official tiling ({fo / f:.3f}x), {fd:.4g} diffusers tiling "
              f"({fd / f:.3f}x)")
    te = llama3_8b_flops(HY_TEXT_TOKENS) + clip_l_text_flops()
    print(f"HunyuanVideo text encoders: LLaMA-3-8B on {HY_TEXT_TOKENS} tokens "
          f"{llama3_8b_flops(HY_TEXT_TOKENS):.4g} + CLIP-L on 77 {clip_l_text_flops():.4g} "
          f"= {te:.4g} FLOPs (one prompt, guidance-distilled)")


def self_test():
    ok = True

    def check(name, got, want, rel=1e-12):
        nonlocal ok
        if isinstance(want, list) and got != want or (
                not isinstance(want, list) and abs(got - want) > rel * abs(want)):
            print(f"FAIL {name}: {got} != {want}")
            ok = False

    # 13 latent frames -> chunks 3,2,2,2,2,2 -> 9 + 5 x 8 = 49 frames (diffusers' own comment);
    # 41 -> 3 + 19 x 2 -> 9 + 19 x 8 = 161.
    check("frames 13", cog_decode_flops(13, 2, 2)[1], 49)
    check("frames 41", cog_decode_flops(41, 2, 2)[1], 161)
    # conv3d k3 512 -> 512 over one voxel: 2 x 27 x 512 x 512 = 14,155,776
    check("conv", conv_flops(27, 512, 512, 1), 14155776)
    # one resnet 256 -> 128 with the 16-channel spatial norms, per voxel:
    # 2*27*256*128 + 2*27*128*128 + 2*(2*16*256) + 2*(2*16*128) + 2*256*128
    # = 1,769,472 + 884,736 + 16,384 + 8,192 + 65,536 = 2,744,320
    check("resnet", resnet_flops(256, 128, 1, 16), 2744320)
    # one chunk of 1 latent frame of 1x1 (one frame stays one frame; spatial 1 -> 8):
    # conv_in 2*27*16*512 = 442,368; mid 2 x (2 x 14,155,776 + 4 x 16,384) = 56,754,176;
    # block0 4 x 28,377,088 = 113,508,352 (28,377,088 = 2 x 14,155,776 + 4 x 2*16*512)
    #   + upsample conv2d 2*9*512*512 x 4 voxels = 18,874,368;
    # block1 at 4 voxels: resnet 0 (2*27*512*256 + 2*27*256*256 + 2*(2*16*512) + 2*(2*16*256)
    #   + 2*512*256) = 10,928,128, resnets 1-3 3 x (2 x 3,538,944 + 4 x 8,192) = 21,331,968
    #   -> 32,260,096 x 4 = 129,040,384; upsample 2*9*256*256 x 16 = 18,874,368;
    # block2 at 16: 4 x 7,110,656 x 16 = 455,081,984; upsample x 64 = 75,497,472;
    # block3 at 64: (2,744,320 + 3 x (2 x 884,736 + 4 x 4,096)) x 64
    #   = (2,744,320 + 3 x 1,785,856) x 64 = 8,101,888 x 64 = 518,520,832;
    # out: (2 x 4,096 + 2*27*128*3) x 64 = (8,192 + 20,736) x 64 = 1,851,392.
    want = (442368 + 56754176 + 113508352 + 18874368 + 129040384 + 18874368 + 455081984
            + 75497472 + 518520832 + 1851392)
    check("chunk 1x1x1", cog_decoder_chunk_flops(1, 1, 1)[0], want)
    # tiles: latent 60 rows in tiles of 30 stepped 25 -> 30, 30, 10; 90 in 45 stepped 36 -> 45, 45, 18
    check("tiles h", sum(tile_sizes(60, 30, 1 / 6)), 70)
    check("tiles w", sum(tile_sizes(90, 45, 1 / 5)), 108)
    # T5: 24 x 226 x (2 x (4 x 4096^2 + 3 x 4096 x 10240) + 4 x 226 x 4096)
    #   = 24 x 226 x (385,875,968 + 3,702,784) = 24 x 226 x 389,578,752 = 2.1130751e12
    check("t5", t5_xxl_flops(226), 24 * 226 * 389578752)
    # Wan decoder, 1 latent frame of 1 x 1 (the first frame: no time_conv, stays one frame):
    # conv2 2*16*16 = 512; conv1 2*27*16*384 = 331,776; middle 2 x 2 x 7,962,624 (2*27*384*384)
    # = 31,850,496 + attention 2*384*1152 + 2*384*384 + 4*1*384 = 884,736 + 294,912 + 1,536
    # = 1,181,184; up 0: 3 x 15,925,248 = 47,775,744, conv2d 2*9*384*192 = 1,327,104 x 4 voxels
    # = 5,308,416; up 1 at 4: Res(192 -> 384) 2*27*192*384 + 7,962,624 + 2*192*384 = 3,981,312
    # + 7,962,624 + 147,456 = 12,091,392 + 2 x 15,925,248 = 43,941,888 x 4 = 175,767,552,
    # conv2d 1,327,104 x 16 = 21,233,664; up 2 at 16: 3 x 2 x 1,990,656 = 11,943,936 x 16
    # = 191,102,976, conv2d 2*9*192*96 = 331,776 x 64 = 21,233,664; up 3 at 64: 3 x 2 x 497,664
    # = 2,985,984 + head 2*27*96*3 = 15,552 -> 3,001,536 x 64 = 192,098,304.
    want = (512 + 331776 + 31850496 + 1181184 + 47775744 + 5308416 + 175767552 + 21233664
            + 191102976 + 21233664 + 192098304)
    check("wan frame 1x1", wan_decode_flops(1, 1, 1), want)
    # A second latent frame adds time_conv (2*3*384*768 = 1,769,472 at 1 voxel, then at 2 x 4 = 8)
    # and doubles, then doubles again, the frames after each: checked against the loop's own
    # arithmetic by difference: frame 2 costs more than frame 1 by at least the two time_convs.
    check("wan frames grow", wan_decode_flops(2, 1, 1) - 2 * 512 - want > 1769472 * 9, True)
    # HunyuanVideo decoder, one tile of 1 x 1 x 1 (one frame stays one frame; 1 -> 8 x 8 pixels):
    # post_quant 2*16*16 = 512; conv_in 2*27*16*512 = 442,368; mid 2 resnets x 2 x 14,155,776
    # (2*27*512*512) = 56,623,104 + attention 8*512^2 + 4*1*512 = 2,099,200;
    # block0 at 1 voxel 3 x 28,311,552 = 84,934,656, upsample conv k3 at 4: 14,155,776 x 4
    # = 56,623,104; block1 at 4: 339,738,624, upsample at 16: 226,492,416;
    # block2 at 16: (2*27*512*256 + 2*27*256*256 + 2*512*256 = 10,878,976) + 2 x 7,077,888
    # = 25,034,752 x 16 = 400,556,032, upsample 2*27*256*256 = 3,538,944 x 64 = 226,492,416;
    # block3 at 64: (2*27*256*128 + 2*27*128*128 + 2*256*128 = 2,719,744) + 2 x 1,769,472
    # = 6,258,688 x 64 = 400,556,032; conv_out 2*27*128*3 = 20,736 x 64 = 1,327,104.
    want = (512 + 442368 + 56623104 + 2099200 + 84934656 + 56623104 + 339738624 + 226492416
            + 400556032 + 226492416 + 400556032 + 1327104)
    check("hy tile 1x1x1", hy_decoder_flops(1, 1, 1)[0], want)
    # 33 latent frames -> 1 + 2 x 32 = 65 -> 1 + 2 x 64 = 129 (HunyuanVideo's 129 frames)
    check("hy frames 33", hy_decoder_flops(33, 1, 1)[1], 129)
    # mid-block attention on 2 tokens minus twice that on 1: the linears (8 n c^2) cancel and the
    # quadratic term leaves 4 (2^2 - 2 x 1^2) 512 = 4,096
    check("hy attention", hy_attention_flops(2, 512) - 2 * hy_attention_flops(1, 512),
          4 * 4 * 512 - 2 * 4 * 512)
    # official tiles: 33 frames in 17 stepped 12 -> 17, 17, 9; 45 in 32 stepped 24 -> 32, 21;
    # 80 -> 32, 32, 32, 8; diffusers' frame tiles: 5 stepped 3 -> ten of 5 and one of 3 = 53
    check("hy t tiles", strided_sizes(33, 17, 12), [17, 17, 9], 0)
    check("hy h tiles", strided_sizes(45, 32, 24), [32, 21], 0)
    check("hy w tiles", strided_sizes(80, 32, 24), [32, 32, 32, 8], 0)
    check("hy diffusers t", sum(strided_sizes(33, 5, 3)), 53)
    # a latent that needs no tile decodes whole (official: <= 16 frames, <= 32 x 32)
    check("hy untiled", hy_tiled_decode_flops(16, 32, 32), hy_decoder_flops(16, 32, 32)[0])
    # LLaMA-3-8B on 351 tokens: 32 x 351 x (2 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336)
    #   + 4 x 351 x 4096) = 32 x 351 x (436,207,616 + 5,750,784) = 32 x 351 x 441,958,400
    check("llama3 8b", llama3_8b_flops(351), 32 * 351 * 441958400)
    # CLIP-L text: 12 x 77 x (2 x (4 x 768^2 + 2 x 768 x 3072) + 4 x 77 x 768)
    #   = 12 x 77 x (14,155,776 + 236,544) = 13,298,503,680
    check("clip-l", clip_l_text_flops(), 13298503680)
    print("self-test", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if "--self-test" in sys.argv[1:]:
        sys.exit(self_test())
    report()
