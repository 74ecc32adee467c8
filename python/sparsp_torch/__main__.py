"""Command line: ``python3 -m sparsp_torch record|measure --help``.

Conventions as sparsp's: one-line errors on stderr (``sparsp_torch: ...``), exit 2 on bad input,
exit 1 when a GPU is needed and absent (as ``sparsp calibrate``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import InputError, NoDeviceError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


def _layout_args(p):
    p.add_argument("--model", required=True, help="model preset name or JSON path (configs/models)")
    p.add_argument("--block", type=int, default=128, help="block size in tokens (default 128)")
    p.add_argument("--order", choices=["raster", "tile"], default="raster",
                   help="token order of the sequence the pipeline runs (default raster)")
    p.add_argument("--tile", default=None, help="tile t,h,w for tile order (default 4,4,4)")


def main(argv=None) -> int:
    ap = _Parser(prog="python3 -m sparsp_torch", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    r = sub.add_parser("record", help="record the block masks of a pipeline's attention calls")
    r.add_argument("--run", help="module:function to call (no arguments) that runs the pipeline")
    r.add_argument("--q", help="Q dump .npy [H, tokens, D] instead of --run (one call)")
    r.add_argument("--k", help="K dump .npy [H, tokens, D] (with --q)")
    _layout_args(r)
    r.add_argument("--kind", choices=["topk", "cdf"], default="topk")
    r.add_argument("--topk", type=int, default=0, help="KV blocks kept per query block (0: density)")
    r.add_argument("--density", type=float, default=0.1)
    r.add_argument("--threshold", type=float, default=0.9)
    r.add_argument("--layers-per-step", type=int, default=0,
                   help="attention calls per denoising step (default: the model's layers)")
    r.add_argument("--write-pooled", action="store_true", help="also store the pooled Q/K")
    r.add_argument("-o", "--output", required=True, help="recording .npz (sidecar: .npz.json)")
    m = sub.add_parser("measure", help="time attention kernels and GEMMs; add measured_compute")
    m.add_argument("--topology", required=True, help="topology JSON to extend")
    m.add_argument("-o", "--output", required=True, help="topology JSON to write")
    _layout_args(m)
    m.add_argument("--kernels", default="fa2,cudnn,mem_efficient,flex",
                   help="comma list: fa2, cudnn, mem_efficient, flex, or module:function")
    m.add_argument("--kernel-name", help="kernel name recorded for a module:function")
    m.add_argument("--pattern", help="sparsp pattern (.spm/.npy/recording) for flex's block mask")
    m.add_argument("--gpu-model", help="GPU model name to record (default: the device's name)")
    m.add_argument("--tokens", type=int, default=0, help="sequence length (default: the model's)")
    m.add_argument("--repeats", type=int, default=10)
    m.add_argument("--warmup", type=int, default=3)
    try:
        a = ap.parse_args(argv)
        tile = tuple(int(v) for v in a.tile.split(",")) if a.tile else None
        if tile is not None and len(tile) != 3:
            raise InputError(f"--tile: expected t,h,w, got '{a.tile}'")
        if a.cmd == "record":
            return _record(a, tile)
        from .measure import measure
        if a.repeats < 1 or a.warmup < 0:
            raise InputError("--repeats must be >= 1 and --warmup >= 0")
        measure(a.topology, a.output, a.model, [k for k in a.kernels.split(",") if k], a.pattern,
                a.gpu_model, a.block, a.order, tile, a.tokens, a.warmup, a.repeats, a.kernel_name,
                log=lambda s: print(s, file=sys.stderr))
        print(f"wrote {a.output}")
        return 0
    except InputError as e:
        print(f"sparsp_torch: {e}", file=sys.stderr)
        return 2
    except NoDeviceError as e:
        print(f"sparsp_torch: {e}", file=sys.stderr)
        return 1
    except (ValueError, OverflowError) as e:
        print(f"sparsp_torch: {e}", file=sys.stderr)
        return 2


def _record(a, tile) -> int:
    import numpy as np
    from .record import record
    from .measure import resolve_callable
    out = Path(a.output).resolve()
    inputs = [p for p in (a.q, a.k) if p]
    if a.run:
        mod = a.run.partition(":")[0]
        spec = __import__("importlib.util").util.find_spec(mod) if mod else None
        if spec is not None and spec.origin:
            inputs.append(spec.origin)
    if any(Path(p).resolve() == out or Path(p).resolve() == Path(str(out) + ".json")
           for p in inputs):
        raise InputError(f"{a.output}: the output would overwrite an input")
    if bool(a.run) == bool(a.q or a.k) or (a.q is None) != (a.k is None):
        raise InputError("record needs either --run module:function or both --q and --k")
    with record(a.output, model=a.model, block_tokens=a.block, order=a.order, tile=tile,
                kind=a.kind, topk=a.topk, density=a.density, threshold=a.threshold,
                layers_per_step=a.layers_per_step or None, description="sparsp_torch record") as rec:
        if a.run:
            resolve_callable(a.run)()
        else:
            def load(p):
                try:
                    return np.load(p, allow_pickle=False)
                except (OSError, ValueError) as e:
                    raise InputError(f"{p}: {e}") from None
            rec.layers_per_step = 1
            q, k = load(a.q), load(a.k)
            if not rec.observe(q, k):
                # The dumps are at fault, not the output: name the one that does not fit.
                n = rec.layout.tokens
                for path, x, what in ((a.q, q, "Q"), (a.k, k, "K")):
                    if x.ndim not in (3, 4) or x.shape[-2] != n:
                        raise InputError(f"{path}: {what} dump of shape {list(x.shape)} does not "
                                         f"fit the layout: expected [H, {n}, D] "
                                         f"({n} tokens of model {a.model})")
                raise InputError(f"{a.q}: the Q/K dumps do not fit the layout of {n} tokens")
    s = rec.sidecar
    print(f"wrote {a.output}: {s['steps']} steps x {s['layers']} layers x {s['heads']} heads, "
          f"{s['blocks']} blocks ({rec.skipped} calls skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
