"""Recording files: block masks streamed to a ``.npz``, step by step, with a JSON sidecar.

Format (schema_version 1; documented in ``patterns/README.md``, read by ``sparsp pattern stats``
and ``sparsp simulate --pattern``):

- ``<file>.npz``: one entry per denoising step, ``step_00000.npy`` ..., each a uint8 array
  ``[L, H, Qb, ceil(Kb / 8)]``: the step's masks, bit ``k % 8`` of byte ``k // 8`` of a row is
  KV block ``k`` (NumPy ``packbits(..., bitorder="little")``), padding bits zero. Together the
  entries are sparsp's ``[S, L, H, Qb, Kb]``. Optional ``pooled_q/step_S_layer_L.npy`` and
  ``pooled_k/...`` (float64 ``[H, Qb, D]``) hold the pooled Q/K the masks came from.
- ``<file>.npz.json``: ``format`` ("sparsp-recording"), ``schema_version`` 1, ``steps``,
  ``layers``, ``heads``, ``blocks``, ``head_dim``, ``packing`` ("bits-little"), the layout
  (``block_tokens``, ``order``, ``tile``, ``tokens``, ``text_tokens``, ``text_position``,
  ``latent``, ``model``), ``selection`` (how masks were obtained) and ``description``.

Memory: one step's packed masks are held at a time (``L * H * Qb * ceil(Kb / 8)`` bytes).
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from .errors import InputError
from .layout import Layout
from .qk import pack_bits

FORMAT = "sparsp-recording"
SCHEMA_VERSION = 1


def sidecar_path(path: str | os.PathLike) -> Path:
    return Path(str(path) + ".json")


class RecordingWriter:
    """Streams masks to ``path`` (a ``.npz``) through ``path + ".tmp"``, renamed by ``close``.

    ``add(step, layer, mask)`` takes a bool ``[H, Qb, Kb]`` mask; steps must arrive in order
    0, 1, ... and layers in order within a step. ``abort`` removes the partial file.
    """

    def __init__(self, path: str | os.PathLike, layout: Layout, heads: int, head_dim: int,
                 selection: dict, description: str = "", compresslevel: int = 6):
        self.path = Path(path)
        if self.path.suffix != ".npz":
            raise InputError(f"{self.path}: a recording must be a .npz file")
        self.layout, self.heads, self.head_dim = layout, int(heads), int(head_dim)
        self.selection, self.description = selection, description
        self._tmp = Path(str(self.path) + ".tmp")
        self._zip = zipfile.ZipFile(self._tmp, "w", zipfile.ZIP_DEFLATED,
                                    compresslevel=compresslevel, allowZip64=True)
        self._step = -1
        self._layers: list[np.ndarray] = []
        self.layers_per_step: int | None = None
        self.steps = 0

    def _flush(self):
        if self._step < 0:
            return
        n = len(self._layers)
        if self.layers_per_step is None:
            self.layers_per_step = n
        elif n != self.layers_per_step:
            raise InputError(f"step {self._step} made {n} attention calls, step 0 made "
                             f"{self.layers_per_step}: give the step boundaries (record.step())"
                             f" or layers_per_step")
        arr = np.ascontiguousarray(np.stack(self._layers))
        with self._zip.open(f"step_{self._step:05d}.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, arr, allow_pickle=False)
        self.steps = self._step + 1
        self._layers = []

    def add(self, step: int, layer: int, mask: np.ndarray):
        nb = self.layout.num_blocks
        if mask.shape != (self.heads, nb, nb):
            raise InputError(f"mask of step {step} layer {layer}: shape {list(mask.shape)}, "
                             f"expected [{self.heads}, {nb}, {nb}]")
        if step != self._step:
            if step != self._step + 1:
                raise InputError(f"steps must arrive in order: got {step} after {self._step}")
            self._flush()
            self._step = step
        if layer != len(self._layers):
            raise InputError(f"step {step}: layer {layer} arrived after {len(self._layers)} layers")
        self._layers.append(pack_bits(mask))

    def add_pooled(self, step: int, layer: int, q: np.ndarray, k: np.ndarray):
        for name, a in (("pooled_q", q), ("pooled_k", k)):
            with self._zip.open(f"{name}/step_{step:05d}_layer_{layer:03d}.npy", "w",
                                force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(a), allow_pickle=False)

    def close(self) -> dict:
        """Writes the last step and the sidecar, renames into place; returns the sidecar."""
        self._flush()
        self._zip.close()
        if self.steps == 0:
            self.abort()
            raise InputError("no attention calls were recorded")
        side = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "steps": self.steps,
                "layers": self.layers_per_step, "heads": self.heads,
                "blocks": self.layout.num_blocks, "head_dim": self.head_dim,
                "packing": "bits-little", **self.layout.sidecar(), "selection": self.selection,
                "description": self.description}
        sc = sidecar_path(self.path)
        tmp_sc = Path(str(sc) + ".tmp")
        tmp_sc.write_text(json.dumps(side, indent=1) + "\n")
        os.replace(self._tmp, self.path)
        os.replace(tmp_sc, sc)
        return side

    def abort(self):
        try:
            self._zip.close()
        except Exception:  # noqa: BLE001 - best effort on the error path
            pass
        for p in (self._tmp, Path(str(sidecar_path(self.path)) + ".tmp")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass


def read_recording(path: str | os.PathLike):
    """(sidecar dict, iterator of bool ``[L, H, Qb, Kb]`` per step), for tests and tools."""
    from .qk import unpack_bits
    side = json.loads(sidecar_path(path).read_text())
    if side.get("format") != FORMAT:
        raise InputError(f"{sidecar_path(path)}:/format: not a sparsp recording")

    def steps():
        with zipfile.ZipFile(path) as z:
            for s in range(side["steps"]):
                with z.open(f"step_{s:05d}.npy") as f:
                    yield unpack_bits(np.lib.format.read_array(f), side["blocks"])
    return side, steps()
