"""Block layout of a video DiT sequence, exactly as sparsp's ``make_layout`` builds it.

A layout cuts the token sequence (video tokens in raster or tile order, text tokens before or
after them) into blocks. ``tokens_in_block[b]`` is the token count of block ``b`` in sequence
order; blocks are consecutive in the sequence. Source of the rules: ``patterns/core.cpp``
(``make_layout``) and ``patterns/README.md`` ("Block layout"); a test checks the block counts
against ``sparsp pattern stats``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import InputError

_PKG_MODELS = Path(__file__).resolve().parent / "models"
_REPO_MODELS = Path(__file__).resolve().parent.parent.parent / "configs" / "models"


def model_dirs() -> list[Path]:
    """Directories searched for a model preset by name, in order: ``$SPARSP_MODELS_DIR``, the
    copy installed with the package, and the repository's ``configs/models`` (uninstalled use)."""
    dirs = []
    if os.environ.get("SPARSP_MODELS_DIR"):
        dirs.append(Path(os.environ["SPARSP_MODELS_DIR"]))
    dirs += [_PKG_MODELS, _REPO_MODELS]
    return dirs


def load_model(name_or_path: str) -> dict:
    """A model preset (sparsp's ``configs/models`` schema) by name or JSON path.

    Raises InputError naming the file (or the searched folders) when it is missing or malformed.
    """
    p = Path(name_or_path)
    candidates = [p] if p.suffix == ".json" or p.exists() else [d / f"{name_or_path}.json" for d in model_dirs()]
    for c in candidates:
        if c.is_file():
            try:
                m = json.loads(c.read_text())
            except (OSError, ValueError) as e:
                raise InputError(f"{c}: not a model JSON file: {e}") from None
            for key in ("latent", "text_tokens", "text_position", "heads", "head_dim"):
                if key not in m:
                    raise InputError(f"{c}:/{key}: missing required field")
            m.setdefault("name", c.stem)
            return m
    where = ", ".join(str(d) for d in model_dirs())
    raise InputError(f"unknown model '{name_or_path}' (not a file, not a preset in {where})")


@dataclass
class Layout:
    """Blocks of one sequence. ``latent`` is [T, H, W] in latent tokens; ``order`` is ``raster``
    or ``tile``; ``tile`` is [t, h, w] (tile order only); text tokens form their own blocks at
    ``text_position`` (``start``, ``end`` or ``none``)."""

    latent: tuple[int, int, int]
    text_tokens: int
    text_position: str
    block_tokens: int = 128
    order: str = "raster"
    tile: tuple[int, int, int] = (1, 1, 1)
    model_name: str | None = None
    tokens_in_block: np.ndarray = field(init=False)

    def __post_init__(self):
        B = int(self.block_tokens)
        if B < 1:
            raise InputError(f"block size must be >= 1, got {B}")
        if self.order not in ("raster", "tile"):
            raise InputError(f"order must be 'raster' or 'tile', got '{self.order}'")
        if self.text_position not in ("start", "end", "none"):
            raise InputError(f"text_position must be start, end or none, got '{self.text_position}'")
        T, H, W = (int(v) for v in self.latent)
        if min(T, H, W) < 1:
            raise InputError("empty latent grid")
        video: list[int] = []
        if self.order == "raster":
            V = T * H * W
            video = [min(B, V - s) for s in range(0, V, B)]
        else:
            tt, th, tw = (int(v) for v in self.tile)
            if min(tt, th, tw) < 1:
                raise InputError("tile dimensions must be >= 1")
            if (tt * th * tw) % B:
                raise InputError(f"block size {B} does not divide the tile volume "
                                 f"{tt}x{th}x{tw} = {tt * th * tw}")
            for it in range(-(-T // tt)):
                for ih in range(-(-H // th)):
                    for iw in range(-(-W // tw)):
                        n = (min(tt, T - it * tt) * min(th, H - ih * th) * min(tw, W - iw * tw))
                        video += [min(B, n - s) for s in range(0, n, B)]
        text = [min(B, self.text_tokens - s) for s in range(0, int(self.text_tokens), B)]
        self.num_video_blocks = len(video)
        seq = text + video if self.text_position == "start" else video + text
        self.tokens_in_block = np.asarray(seq, dtype=np.int64)

    @classmethod
    def from_model(cls, model: dict | str, block_tokens: int = 128, order: str = "raster",
                   tile=None) -> "Layout":
        """The layout of a model preset (dict or name/path), with sparsp's tile defaults
        (4x4x4 as in VSA when ``order`` is ``tile`` and no tile is given)."""
        m = load_model(model) if isinstance(model, str) else model
        if tile is None:
            tile = (4, 4, 4) if order == "tile" else (1, 1, 1)
        return cls(tuple(m["latent"]), int(m["text_tokens"]), m["text_position"],
                   int(block_tokens), order, tuple(tile), m.get("name"))

    @property
    def num_blocks(self) -> int:
        return int(self.tokens_in_block.size)

    @property
    def tokens(self) -> int:
        return int(self.tokens_in_block.sum())

    def sidecar(self) -> dict:
        """The layout fields of a recording's JSON sidecar."""
        return {"block_tokens": int(self.block_tokens), "order": self.order,
                "tile": [int(v) for v in self.tile], "tokens": self.tokens,
                "text_tokens": int(self.text_tokens), "text_position": self.text_position,
                "latent": [int(v) for v in self.latent], "model": self.model_name}
