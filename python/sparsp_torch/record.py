"""``record``: capture the block masks every attention call of a PyTorch pipeline sees.

    with sparsp_torch.record("run.npz", model="hunyuanvideo-720p", kind="topk", density=0.1) as rec:
        pipe(prompt, callback_on_step_end=rec.diffusers_callback)   # or rec.step() per step

While active, ``torch.nn.functional.scaled_dot_product_attention`` and
``torch.nn.attention.flex_attention.flex_attention`` are replaced by wrappers that record, then
call the original; both are restored on exit, also on error. Code that imported those functions
by name before the ``with`` (``from torch.nn.functional import scaled_dot_product_attention``)
is not seen: patch before importing the pipeline, or call ``rec.observe(q, k, mask)`` yourself.

Per call, with ``q``/``k`` of shape ``[B, H, N, D]`` (or ``[H, N, D]``), batch element
``batch_index``:
- a call whose query or key length is not the layout's token count (cross-attention to text,
  other resolutions) is skipped and counted in ``rec.skipped``;
- a FlexAttention ``BlockMask`` or a boolean ``attn_mask`` is recorded as it is: a layout block
  pair is active when any token pair inside it is (the mask's blocks are mapped onto the
  layout's, which may differ in size);
- otherwise the mask is derived from Q and K exactly as ``sparsp pattern gen --q --k`` does
  (``kind`` ``topk`` or ``cdf``; see ``qk.py``), bit-identical to it.

Steps: ``rec.step()`` (or ``rec.diffusers_callback``) ends a step; without it, a step is
``layers_per_step`` calls (default: the model preset's ``layers``). Layers are numbered in call
order within a step. Masks go to disk step by step (``recording.py``).
"""
from __future__ import annotations

import numpy as np

from .errors import InputError
from .layout import Layout, load_model
from .qk import qk_block_mask, pool_blocks, block_scores, select_topk, select_cdf
from .recording import RecordingWriter
import math


def _overlap(sizes_a: np.ndarray, sizes_b: np.ndarray) -> np.ndarray:
    """Bool [len(a), len(b)]: block i of partition a overlaps block j of partition b (same
    tokens, different cuts)."""
    ea, eb = np.cumsum(sizes_a), np.cumsum(sizes_b)
    sa, sb = ea - sizes_a, eb - sizes_b
    return (sa[:, None] < eb[None, :]) & (sb[None, :] < ea[:, None])


class Recorder:
    """The object ``record`` yields. See the module docstring."""

    def __init__(self, path, model=None, block_tokens=128, order="raster", tile=None,
                 layout: Layout | None = None, kind="topk", topk=0, density=0.1,
                 threshold=0.9, layers_per_step=None, batch_index=0, write_pooled=False,
                 description=""):
        if kind not in ("topk", "cdf"):
            raise InputError(f"unknown selection '{kind}' (valid: topk, cdf)")
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 0:
            raise InputError(f"topk must be an integer >= 0 (0: from density), got {topk!r}")
        if not (isinstance(density, (int, float)) and math.isfinite(density) and 0 <= density <= 1):
            raise InputError(f"density must be in [0, 1], got {density!r}")
        if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and
                0 < threshold <= 1):
            raise InputError(f"threshold must be in (0, 1], got {threshold!r}")
        m = load_model(model) if isinstance(model, str) else model
        if layout is None:
            if m is None:
                raise InputError("record needs a model preset or a Layout")
            layout = Layout.from_model(m, block_tokens, order, tile)
            # Only a preset name goes in the sidecar: sparsp resolves names, not this machine's
            # paths. Otherwise the sidecar's own fields (latent, text, heads, ...) describe it.
            is_preset = isinstance(model, str) and "/" not in model and \
                not model.endswith(".json")
            if not is_preset:
                layout.model_name = None
        self.layout, self.model = layout, m
        self.kind, self.topk, self.density, self.threshold = kind, topk, density, threshold
        self.layers_per_step = layers_per_step or (m or {}).get("layers")
        self.batch_index, self.write_pooled = batch_index, write_pooled
        self.path, self.description = path, description
        self.calls, self.skipped, self.step_index, self.layer_index = 0, 0, 0, 0
        self._explicit_steps = False
        self._writer: RecordingWriter | None = None
        self._saved = []

    # --- step boundaries -----------------------------------------------------------------
    def step(self):
        """Ends the current denoising step (call once per step, after its layers)."""
        self._explicit_steps = True
        if self.layer_index > 0:
            self.step_index += 1
            self.layer_index = 0

    def diffusers_callback(self, pipe, step, timestep, callback_kwargs):
        """``callback_on_step_end`` for diffusers pipelines."""
        self.step()
        return callback_kwargs

    # --- recording -----------------------------------------------------------------------
    def _selection(self) -> dict:
        if self.kind == "topk":
            return {"kind": "topk", "topk": int(self.topk), "density": float(self.density)}
        return {"kind": "cdf", "threshold": float(self.threshold)}

    def _writer_for(self, heads: int, head_dim: int) -> RecordingWriter:
        if self._writer is None:
            self._writer = RecordingWriter(self.path, self.layout, heads, head_dim,
                                           self._selection(), self.description)
        return self._writer

    def _place(self):
        if not self._explicit_steps and self.layers_per_step and \
                self.layer_index == self.layers_per_step:
            self.step_index += 1
            self.layer_index = 0
        s, l = self.step_index, self.layer_index
        self.layer_index += 1
        return s, l

    def observe(self, q, k, block_mask=None, bool_mask=None) -> bool:
        """Records one attention call (torch tensors or NumPy arrays). Returns False when the
        call was skipped (not self-attention over the layout's tokens)."""
        to_np = _to_numpy
        if q.ndim == 4:
            q, k = q[self.batch_index], k[self.batch_index]
        N = self.layout.tokens
        if q.ndim != 3 or q.shape[-2] != N or k.shape[-2] != N:
            self.skipped += 1
            return False
        H, D = int(q.shape[0]), int(q.shape[-1])
        if k.shape[0] != H:  # grouped-query attention: repeat KV heads as SDPA's enable_gqa does
            k = _repeat_heads(k, H // int(k.shape[0]))
        sizes = self.layout.tokens_in_block
        if block_mask is not None:
            mask = self._from_flex(block_mask, H)
        elif bool_mask is not None:
            mask = self._from_bool(bool_mask, H)
        else:
            qn, kn = to_np(q), to_np(k)
            if self.write_pooled:
                qp, kp = pool_blocks(qn, sizes, "Q"), pool_blocks(kn, sizes, "K")
                mask = self._select(block_scores(qp, kp))
            else:
                mask = qk_block_mask(qn, kn, sizes, self.kind, self.topk, self.density,
                                     self.threshold)
        s, l = self._place()
        w = self._writer_for(H, D)
        w.add(s, l, mask)
        if self.write_pooled and block_mask is None and bool_mask is None:
            w.add_pooled(s, l, qp, kp)
        self.calls += 1
        return True

    def _select(self, scores):
        nb = scores.shape[-1]
        if self.kind == "cdf":
            return select_cdf(scores, self.threshold)
        kk = self.topk if self.topk > 0 else int(math.ceil(self.density * nb - 1e-9))
        return select_topk(scores, kk)

    def _from_flex(self, bm, H):
        dense = _to_numpy(bm.to_dense()).astype(bool)  # [B, H|1, Qf, Kf]
        dense = dense[min(self.batch_index, dense.shape[0] - 1)]
        bq, bk = (bm.BLOCK_SIZE if isinstance(bm.BLOCK_SIZE, tuple) else (bm.BLOCK_SIZE,) * 2)
        N = self.layout.tokens
        fq = np.array([min(bq, N - s) for s in range(0, N, bq)])
        fk = np.array([min(bk, N - s) for s in range(0, N, bk)])
        dense = dense[:, :fq.size, :fk.size]
        return self._map_blocks(dense, fq, fk, H)

    def _from_bool(self, m, H):
        m = _to_numpy(m).astype(bool)
        while m.ndim < 4:
            m = m[None]
        m = m[min(self.batch_index, m.shape[0] - 1)]
        ones = np.ones(self.layout.tokens, dtype=np.int64)
        return self._map_blocks(m, ones, ones, H)

    def _map_blocks(self, m, rows, cols, H):
        sizes = self.layout.tokens_in_block
        oq = _overlap(sizes, rows).astype(np.float32)
        ok = _overlap(sizes, cols).astype(np.float32)
        heads = np.broadcast_to(m, (H,) + m.shape[1:])
        return np.stack([(oq @ h.astype(np.float32) @ ok.T) > 0 for h in heads])

    # --- patching ------------------------------------------------------------------------
    def __enter__(self):
        try:
            import torch  # noqa: F401
            import torch.nn.functional as F
        except ImportError:
            return self  # NumPy-only use: call observe() directly
        orig_sdpa = F.scaled_dot_product_attention
        rec = self

        def sdpa(query, key, value, attn_mask=None, *args, **kwargs):
            bool_mask = attn_mask if attn_mask is not None and attn_mask.dtype == torch.bool else None
            rec.observe(query, key, bool_mask=bool_mask)
            return orig_sdpa(query, key, value, attn_mask, *args, **kwargs)

        self._saved.append((F, "scaled_dot_product_attention", orig_sdpa))
        F.scaled_dot_product_attention = sdpa
        try:
            import torch.nn.attention.flex_attention as fa
            orig_flex = fa.flex_attention

            def flex(query, key, value, score_mod=None, block_mask=None, *args, **kwargs):
                rec.observe(query, key, block_mask=block_mask)
                return orig_flex(query, key, value, score_mod, block_mask, *args, **kwargs)

            self._saved.append((fa, "flex_attention", orig_flex))
            fa.flex_attention = flex
        except ImportError:
            pass
        return self

    def __exit__(self, exc_type, exc, tb):
        for mod, name, fn in reversed(self._saved):
            setattr(mod, name, fn)
        self._saved.clear()
        if exc_type is not None:
            if self._writer:
                self._writer.abort()
            return False
        if self._writer is None:
            raise InputError(f"{self.path}: the pipeline made no attention calls over "
                             f"{self.layout.tokens} tokens ({self.skipped} other calls skipped)")
        self.sidecar = self._writer.close()
        return False


def record(path, **kwargs) -> Recorder:
    """Context manager recording every attention call's block mask to ``path`` (``.npz``)."""
    return Recorder(path, **kwargs)


def _to_numpy(t):
    if isinstance(t, np.ndarray):
        return t
    import torch
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()  # exact: both widen to float32 without rounding
    return t.cpu().numpy()


def _repeat_heads(k, r):
    if isinstance(k, np.ndarray):
        return np.repeat(k, r, axis=0)
    return k.repeat_interleave(r, dim=0)
