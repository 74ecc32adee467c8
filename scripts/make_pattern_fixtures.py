#!/usr/bin/python3
"""Writes the tiny NumPy fixtures of tests/patterns into tests/data/patterns/ (Debian python3-numpy).

Model: tests/data/patterns/tiny_model.json, latent 1x2x4 (8 video tokens), no text, 2 heads,
head_dim 4, 3 layers, 2 steps; with block 2 that is 4 blocks. Run from the repo root:
    /usr/bin/python3 scripts/make_pattern_fixtures.py   (Debian python3-numpy)
"""
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "patterns")
os.makedirs(OUT, exist_ok=True)


def path(name):
    return os.path.join(OUT, name)


json.dump({"schema_version": 1, "name": "tiny", "latent": [1, 2, 4], "text_tokens": 0,
           "text_position": "none", "heads": 2, "head_dim": 4, "layers": 3, "hidden": 8,
           "dtype_bytes": 2, "steps": 2,
           "source": {"all": "test fixture"}},
          open(path("tiny_model.json"), "w"), indent=1)

# [H=2, Qb=4, Kb=4]: head 0 identity, head 1 lower triangle (q >= k).
eye = np.eye(4, dtype=bool)
tril = np.tril(np.ones((4, 4), dtype=bool))
mask_h = np.stack([eye, tril])
np.save(path("mask_h.npy"), mask_h)

# [L=3, H=2, 4, 4] uint8: layer l head h = identity rolled by (l + h) columns.
mask_lh = np.zeros((3, 2, 4, 4), dtype=np.uint8)
for l in range(3):
    for h in range(2):
        mask_lh[l, h] = np.roll(np.eye(4, dtype=np.uint8), l + h, axis=1)
np.save(path("mask_lh.npy"), mask_lh)

# [S=2, L=3, H=2, 4, 4] bool in a compressed .npz under the key 'mask': step s adds column s.
mask_slh = np.zeros((2, 3, 2, 4, 4), dtype=bool)
for s in range(2):
    mask_slh[s] = mask_lh.astype(bool)
    mask_slh[s, :, :, :, s] = True
np.savez_compressed(path("mask_slh.npz"), mask=mask_slh)
# Two arrays, neither named 'mask': rejected.
np.savez(path("mask_two.npz"), a=mask_h, b=mask_h)

# Rejected / bad inputs.
np.save(path("mask_fortran.npy"), np.asfortranarray(mask_lh))       # Fortran order
np.save(path("mask_f32.npy"), mask_h.astype(np.float32))             # wrong dtype
np.save(path("mask_badshape.npy"), np.zeros((2, 5, 5), dtype=bool))  # 5 blocks, layout has 4
bad = np.array(mask_lh)
bad[1, 0, 2, 3] = 2
np.save(path("mask_value2.npy"), bad)                                # not 0/1
data = open(path("mask_h.npy"), "rb").read()
open(path("mask_truncated.npy"), "wb").write(data[:-5])              # 5 data bytes missing
open(path("mask_badheader.npy"), "wb").write(data.replace(b"'shape'", b"'shapf'", 1))

# Q/K dumps [H=2, tokens=8, head_dim=4]. Block b (tokens 2b, 2b+1) of head h has mean
# e_{(b + h) % 4}; tokens are mean +- 0.5 * e_3 - (so pooling cancels the perturbation).
q = np.zeros((2, 8, 4), dtype=np.float32)
for h in range(2):
    for b in range(4):
        for t in range(2):
            q[h, 2 * b + t, (b + h) % 4] = 1.0
            q[h, 2 * b + t, 3] += 0.5 if t == 0 else -0.5
k = q.copy()
np.save(path("q_f32.npy"), q)
np.save(path("k_f32.npy"), k)
np.save(path("q_f16.npy"), q.astype(np.float16))
np.save(path("k_f16.npy"), k.astype(np.float16))
np.save(path("q_f32_be.npy"), q.astype(">f4"))                       # big-endian: handled
# bfloat16 as uint16: the high 16 bits of the float32 (exact for these values).
np.save(path("q_bf16.npy"), (q.view(np.uint32) >> 16).astype(np.uint16))
qn = q.copy()
qn[1, 5, 2] = np.nan
np.save(path("q_nan.npy"), qn)
np.save(path("q_badshape.npy"), q[:, :6, :])
np.save(path("q_fortran.npy"), np.asfortranarray(q))
print("wrote fixtures to", os.path.normpath(OUT))
