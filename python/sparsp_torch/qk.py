"""Block masks from Q and K, bit-identical to ``sparsp pattern gen --kind topk|cdf --q --k``.

Shapes: ``q`` and ``k`` are ``[H, tokens, head_dim]`` in the layout's sequence order. The
arithmetic follows ``patterns/io.cpp`` (``pool_blocks``, ``qk_pattern``) and
``patterns/dynamic.cpp`` (``select_topk``, ``select_cdf``) operation by operation, so that the
rounding is the same:

1. every value is converted to float32 first (float64 inputs are rounded to float32; bfloat16
   given as uint16 is the high half of a float32);
2. pooled block means accumulate in float64 in token order, then divide by the block's token
   count;
3. ``score = float32((sum_d q_d * k_d, sequential in d, in float64) / sqrt(head_dim))``;
4. ``topk``: the k highest scores per query block, ties to the lower KV block;
5. ``cdf``: ``p = exp(float64(float32(s - max s)))``, ``z`` summed in KV order, KV blocks taken
   in descending score (ties to the lower block) until the mass ``sum p / z`` reaches
   ``threshold - 1e-12``.

NumPy's vectorised ``exp`` may differ from the C library's by an ulp, so rows whose stopping
point lies within 1e-9 of the threshold are recomputed with ``math.exp`` (the C library's).
"""
from __future__ import annotations

import math

import numpy as np

from .errors import InputError


def to_float32(x: np.ndarray, bf16_as_uint16: bool = True) -> np.ndarray:
    """Values as float32, as sparsp converts them (float16/32/64; bfloat16 stored as uint16)."""
    x = np.asarray(x)
    if x.dtype == np.uint16 and bf16_as_uint16:
        return (x.astype(np.uint32) << 16).view(np.float32)
    if x.dtype.kind != "f":
        raise InputError(f"Q/K dtype must be float16, float32, float64 or bfloat16 stored as "
                         f"uint16, got '{x.dtype}'")
    return x.astype(np.float32)


def pool_blocks(x: np.ndarray, tokens_in_block: np.ndarray, name: str = "Q") -> np.ndarray:
    """Mean of each block's token vectors per head: ``[H, tokens, D]`` -> float64 ``[H, nb, D]``.

    Sums run in token order (one float64 add per token), as ``patterns/io.cpp`` does. Raises
    InputError on a token count that does not match the layout or on non-finite means.
    """
    x = to_float32(x)
    if x.ndim != 3:
        raise InputError(f"{name}: expected shape [heads, tokens, head_dim], got {list(x.shape)}")
    sizes = np.asarray(tokens_in_block, dtype=np.int64)
    if x.shape[1] != int(sizes.sum()):
        raise InputError(f"{name}: {x.shape[1]} tokens, the layout has {int(sizes.sum())}")
    H, _, D = x.shape
    nb = sizes.size
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    acc = np.zeros((H, nb, D), dtype=np.float64)
    for j in range(int(sizes.max()) if nb else 0):
        sel = np.nonzero(sizes > j)[0]
        acc[:, sel, :] += x[:, starts[sel] + j, :].astype(np.float64)
    acc /= sizes[None, :, None].astype(np.float64)
    bad = ~np.isfinite(acc)
    if bad.any():
        h, b, _ = np.argwhere(bad)[0]
        raise InputError(f"{name}:[H={h},block={b}]: NaN or infinite values in the pooled block")
    return acc


def block_scores(qp: np.ndarray, kp: np.ndarray) -> np.ndarray:
    """``float32(q.k / sqrt(D))`` for every (query block, KV block) of every head: float64
    ``[H, nb, D]`` twice -> float32 ``[H, nb, nb]``. The dot product runs sequentially over D."""
    H, nb, D = qp.shape
    scale = 1.0 / math.sqrt(float(D))
    out = np.empty((H, nb, nb), dtype=np.float32)
    s = np.empty((nb, nb), dtype=np.float64)
    t = np.empty((nb, nb), dtype=np.float64)
    for h in range(H):
        s.fill(0.0)
        for d in range(D):
            np.multiply.outer(qp[h, :, d], kp[h, :, d], out=t)
            s += t
        s *= scale
        if not np.isfinite(s).all() or (np.abs(s) > 3e38).any():
            a, b = np.argwhere(~np.isfinite(s) | (np.abs(s) > 3e38))[0]
            raise InputError(f"Q:[H={h},Qb={a},Kb={b}]: score is NaN or infinite")
        out[h] = s.astype(np.float32)
    return out


def _descending(scores: np.ndarray) -> np.ndarray:
    # Stable sort of the negated scores: descending, ties to the lower column (-0 == +0).
    return np.argsort(-scores, axis=-1, kind="stable")


def select_topk(scores: np.ndarray, k: int) -> np.ndarray:
    """Top-k KV blocks per query block: float32 ``[..., Qb, Kb]`` -> bool mask, same shape."""
    k = max(0, min(int(k), scores.shape[-1]))
    order = _descending(scores)[..., :k]
    mask = np.zeros(scores.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


def _cdf_row(s: np.ndarray, threshold: float, exact_exp: bool) -> np.ndarray:
    mx = s.max()
    diff = (s - mx).astype(np.float32).astype(np.float64)
    p = np.array([math.exp(v) for v in diff]) if exact_exp else np.exp(diff)
    z = np.cumsum(p)[-1]
    order = _descending(s)
    mass = np.cumsum(p[order] / z)
    target = threshold - 1e-12
    hit = np.nonzero(mass >= target)[0]
    n = int(hit[0]) + 1 if hit.size else s.size
    near = abs(mass[n - 1] - target) < 1e-9 or (n >= 2 and abs(mass[n - 2] - target) < 1e-9)
    if near and not exact_exp:
        return _cdf_row(s, threshold, True)
    row = np.zeros(s.size, dtype=bool)
    row[order[:n]] = True
    return row


def select_cdf(scores: np.ndarray, threshold: float) -> np.ndarray:
    """Smallest set of highest-softmax KV blocks per query block reaching ``threshold`` of the
    mass: float32 ``[..., Qb, Kb]`` -> bool mask, same shape."""
    if not (0.0 < threshold <= 1.0):
        raise InputError(f"cdf threshold must be in (0, 1], got {threshold}")
    flat = scores.reshape(-1, scores.shape[-1])
    out = np.stack([_cdf_row(r, threshold, False) for r in flat]) if flat.size else flat.astype(bool)
    return out.reshape(scores.shape)


def qk_block_mask(q: np.ndarray, k: np.ndarray, tokens_in_block: np.ndarray, kind: str = "topk",
                  topk: int = 0, density: float = 0.1, threshold: float = 0.9) -> np.ndarray:
    """The block mask sparsp derives from Q/K: ``[H, tokens, D]`` twice -> bool ``[H, nb, nb]``.

    ``kind`` is ``topk`` (``topk`` blocks per row, or ``ceil(density * nb - 1e-9)`` when 0) or
    ``cdf`` (``threshold`` of the softmax mass).
    """
    qp = pool_blocks(q, tokens_in_block, "Q")
    kp = pool_blocks(k, tokens_in_block, "K")
    if qp.shape != kp.shape:
        raise InputError(f"Q and K shapes differ: {list(qp.shape)} vs {list(kp.shape)}")
    nb = qp.shape[1]
    scores = block_scores(qp, kp)
    if kind == "cdf":
        return select_cdf(scores, threshold)
    if kind != "topk":
        raise InputError(f"unknown selection '{kind}' (valid: topk, cdf)")
    kk = topk if topk > 0 else int(math.ceil(density * nb - 1e-9))
    if kk > nb:
        raise InputError(f"topk {kk} exceeds the {nb} blocks")
    return select_topk(scores, kk)


def pack_bits(mask: np.ndarray) -> np.ndarray:
    """Bool ``[..., Kb]`` -> uint8 ``[..., ceil(Kb / 8)]``, bit ``k % 8`` of byte ``k // 8`` is
    KV block ``k`` (little bit order; padding bits zero)."""
    return np.packbits(np.asarray(mask, dtype=bool), axis=-1, bitorder="little")


def unpack_bits(packed: np.ndarray, kv_blocks: int) -> np.ndarray:
    """Inverse of ``pack_bits``."""
    return np.unpackbits(packed, axis=-1, count=kv_blocks, bitorder="little").astype(bool)
