"""Reads sparsp pattern files into NumPy: ``.spm`` (native), ``.npy`` masks and recordings.

Only what ``measure`` needs: the bool masks ``[H, Qb, Kb]`` of one (step, layer) and the
layout fields. Formats: ``patterns/README.md`` ("Files").
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from .errors import InputError
from .recording import read_recording, sidecar_path


def read_masks(path: str, step: int = 0, layer: int = 0):
    """(bool ``[H, Qb, Kb]``, header dict with ``block_tokens``/``order``/``tile``/``model``).

    Raises InputError naming the file on anything malformed or out of range."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: cannot open file")
    if p.suffix == ".spm":
        return _read_spm(p, step, layer)
    if p.suffix == ".npz" and sidecar_path(p).is_file():
        side, steps = read_recording(p)
        for s, arr in enumerate(steps):
            if s == step:
                if layer >= arr.shape[0]:
                    raise InputError(f"{path}: layer {layer} out of range ({arr.shape[0]} layers)")
                return arr[layer], side
        raise InputError(f"{path}: step {step} out of range ({side['steps']} steps)")
    if p.suffix == ".npy":
        a = np.load(p, allow_pickle=False)
        if a.dtype not in (np.bool_, np.uint8) or a.ndim < 3 or a.ndim > 5:
            raise InputError(f"{path}:header: expected bool/uint8 masks [H,Qb,Kb], [L,H,Qb,Kb] "
                             f"or [S,L,H,Qb,Kb], got {a.dtype} {list(a.shape)}")
        while a.ndim > 3:
            a = a[step] if a.ndim == 5 else a[layer]
        return a.astype(bool), {}
    raise InputError(f"{path}: unknown pattern file type (expected .spm, .npy or a recording)")


def _read_spm(p: Path, step: int, layer: int):
    data = p.read_bytes()
    if data[:8] != b"SPARSPM1" or len(data) < 16:
        raise InputError(f"{p}: not a sparsp .spm file")
    (hlen,) = struct.unpack_from("<Q", data, 8)
    try:
        h = json.loads(data[16:16 + hlen])
    except ValueError as e:
        raise InputError(f"{p}:header: {e}") from None
    nb, words, heads, layers = h["blocks"], h["words_per_row"], h["heads"], h["layers"]
    start = 16 + hlen
    start += (-start) % 8
    per_mask = nb * words * 8
    s = step if h.get("per_step") else 0
    if step >= h["steps"] or layer >= layers:
        raise InputError(f"{p}: step {step} / layer {layer} out of range")
    out = np.zeros((heads, nb, nb), dtype=bool)
    for hh in range(heads):
        mid = h["index"][(s * layers + layer) * heads + hh]
        off = start + mid * per_mask
        w = np.frombuffer(data, dtype="<u8", count=nb * words, offset=off).reshape(nb, words)
        bits = np.unpackbits(w.view(np.uint8), axis=1, bitorder="little")[:, :nb]
        out[hh] = bits.astype(bool)
    return out, {**h.get("layout", {}), "model": h.get("model")}
