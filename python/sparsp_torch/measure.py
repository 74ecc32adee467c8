"""``measure``: time attention and GEMMs at a model's shapes on this GPU, and add the figures to
a topology as ``measured_compute`` entries (contract: ``configs/README.md``).

Per kernel, one entry ``{gpu_model, kernel, head_dim, attention_TFLOPs: {block: TFLOP/s},
gemm_TFLOPs, launch_overhead_us, conditions}``:
- attention TFLOP/s count ``4 * D`` FLOPs per active (query token, key token) pair per head
  (QK^T and PV, forward only, as FlashAttention's benchmarks count them), over the median of
  ``repeats`` timed calls (CUDA events) after ``warmup`` calls;
- ``gemm_TFLOPs``: a bf16 ``[tokens, hidden] x [hidden, 3 hidden]`` matmul (the QKV projection);
- ``launch_overhead_us``: the median time of the same kernel on one block of 128 tokens.

Kernels: ``fa2`` (SDPA's flash backend, FlashAttention-2), ``cudnn`` (SDPA's cuDNN backend),
``mem_efficient`` (SDPA's memory-efficient backend), ``flex`` (FlexAttention with a block mask
from a sparsp pattern file, else dense), or ``module:function`` (a callable
``f(q, k, v) -> out`` on ``[1, H, N, D]`` bf16 tensors; ``kernel`` named by ``--kernel-name``).
"""
from __future__ import annotations

import importlib
import json
import math
import os
from pathlib import Path

import numpy as np

from .errors import InputError, NoDeviceError
from .layout import Layout, load_model

SDPA_KERNELS = {"fa2": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                "mem_efficient": "EFFICIENT_ATTENTION"}
KERNELS = list(SDPA_KERNELS) + ["flex"]


def resolve_callable(spec: str):
    mod, _, fn = spec.partition(":")
    if not mod or not fn:
        raise InputError(f"unknown kernel '{spec}' (valid: {', '.join(KERNELS)}, or module:function)")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as e:
        raise InputError(f"cannot load '{spec}': {e}") from None


def time_cuda(torch, fn, warmup, repeats):
    """Median seconds of `fn()` over `repeats` CUDA-event timings after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return float(np.median(times))


def measure(topology_in: str, out: str, model: str, kernels: list[str], pattern: str | None = None,
            gpu_model: str | None = None, block_tokens: int = 128, order: str = "raster", tile=None,
            tokens: int = 0, warmup: int = 3, repeats: int = 10, kernel_name: str | None = None,
            log=print) -> list[dict]:
    """Measures ``kernels`` and writes ``topology_in`` plus the entries to ``out`` (atomically).
    Returns the entries. Errors: InputError (exit 2) on bad input, NoDeviceError (exit 1)."""
    if Path(out).resolve() == Path(topology_in).resolve() or \
            (pattern and Path(out).resolve() == Path(pattern).resolve()):
        raise InputError(f"{out}: the output would overwrite an input")
    try:
        topo = json.loads(Path(topology_in).read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{topology_in}: {e}") from None
    if not isinstance(topo, dict):
        raise InputError(f"{topology_in}: expected a JSON object")
    if "measured_compute" in topo and not isinstance(topo["measured_compute"], list):
        raise InputError(f"{topology_in}:/measured_compute: expected an array")
    m = load_model(model)
    fns = []
    for k in kernels:
        if k in KERNELS:
            fns.append((k, None))
        elif ":" in k:
            fns.append((kernel_name or k.split(":")[1], resolve_callable(k)))
        else:
            raise InputError(f"unknown kernel '{k}' (valid: {', '.join(KERNELS)}, or module:function)")
    masks = None
    if pattern:
        from .patternfile import read_masks
        masks, _ = read_masks(pattern)
    try:
        import torch
    except ImportError:
        raise NoDeviceError("measure needs PyTorch with a CUDA GPU (PyTorch is not installed)") from None
    if not torch.cuda.is_available():
        raise NoDeviceError("measure needs a CUDA GPU (torch.cuda.is_available() is False)")
    dev = torch.device("cuda")
    name = gpu_model or torch.cuda.get_device_name(dev)
    layout = Layout.from_model(m, block_tokens, order, tile)
    H, D = int(m["heads"]), int(m["head_dim"])
    N = tokens or layout.tokens
    if tokens and tokens != layout.tokens and masks is not None:
        raise InputError("--tokens cannot be combined with --pattern (the pattern fixes them)")
    q, k, v = (torch.randn(1, H, N, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    tiny = [t[:, :, :128].contiguous() for t in (q, k, v)]
    hidden = int(m.get("hidden", H * D))
    x = torch.randn(N, hidden, device=dev, dtype=torch.bfloat16)
    w = torch.randn(hidden, 3 * hidden, device=dev, dtype=torch.bfloat16)
    t_gemm = time_cuda(torch, lambda: x @ w, warmup, repeats)
    gemm_tflops = 2.0 * N * hidden * 3 * hidden / t_gemm / 1e12
    dense_pairs = float(N) * N * H
    entries = []
    for kname, fn in fns:
        pairs, run, run_tiny, cond = dense_pairs, None, None, "dense"
        if kname in SDPA_KERNELS:
            from torch.nn.attention import sdpa_kernel, SDPBackend
            be = getattr(SDPBackend, SDPA_KERNELS[kname])
            F = torch.nn.functional

            def run(be=be, F=F, a=(q, k, v)):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(*a)

            def run_tiny(be=be, F=F):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(*tiny)
        elif kname == "flex" and fn is None:
            from torch.nn.attention.flex_attention import flex_attention, create_block_mask
            flex = torch.compile(flex_attention)
            bm = None
            try:
                if masks is not None:
                    if masks.shape[1] != layout.num_blocks:
                        raise InputError(f"{pattern}: {masks.shape[1]} blocks, the layout of "
                                         f"{m['name']} at block {block_tokens} has {layout.num_blocks}")
                    mt = torch.as_tensor(masks, device=dev)
                    hsel = torch.arange(H, device=dev) % mt.shape[0]
                    sizes_t = layout.tokens_in_block
                    if (sizes_t[:-1] == block_tokens).all():
                        # Blocks are FlexAttention's own (uniform; the last may be partial): the
                        # pattern's blocks become full KV blocks directly, no token-level mask.
                        from torch.nn.attention.flex_attention import BlockMask
                        full = mt[hsel].unsqueeze(0)  # [1, H, Qb, Kb]
                        counts = full.sum(-1, dtype=torch.int32)
                        idx = torch.argsort((~full).to(torch.int8), dim=-1, stable=True).to(torch.int32)
                        bm = BlockMask.from_kv_blocks(
                            kv_num_blocks=torch.zeros_like(counts), kv_indices=idx,
                            full_kv_num_blocks=counts, full_kv_indices=idx,
                            BLOCK_SIZE=block_tokens, seq_lengths=(N, N))
                    else:
                        blk = torch.as_tensor(np.repeat(np.arange(layout.num_blocks), sizes_t),
                                              device=dev)

                        def mask_mod(b, h, qi, ki):
                            return mt[hsel[h], blk[qi], blk[ki]]
                        bm = create_block_mask(mask_mod, 1, H, N, N, device=dev, _compile=True)
                    sizes = layout.tokens_in_block.astype(np.float64)
                    pairs = float(sum((sizes @ masks[h].astype(np.float64) @ sizes)
                                      for h in hsel.tolist()))
                    cond = f"pattern {Path(pattern).name}, density {pairs / dense_pairs:.4f}"
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001 - an API that differs by version
                log(f"measure: flex: cannot build the block mask: {type(e).__name__}: {e}")
                continue

            def run(bm=bm):
                return flex(q, k, v, block_mask=bm)

            def run_tiny():
                return flex(*tiny)
        else:
            def run(fn=fn):
                return fn(q, k, v)

            def run_tiny(fn=fn):
                return fn(*tiny)
        try:
            t = time_cuda(torch, run, warmup, repeats)
            t0 = time_cuda(torch, run_tiny, warmup, repeats)
        except Exception as e:  # noqa: BLE001 - a backend missing for this GPU or shape
            log(f"measure: {kname}: not available on this GPU/shape: {str(e).splitlines()[0]}")
            continue
        tflops = 4.0 * D * pairs / t / 1e12
        entry = {"gpu_model": name, "kernel": kname, "head_dim": D,
                 "attention_TFLOPs": {str(block_tokens): round(tflops, 1)},
                 "gemm_TFLOPs": round(gemm_tflops, 1), "launch_overhead_us": round(t0 * 1e6, 1),
                 "conditions": f"sparsp_torch measure: {m['name']} {H}x{D}, {N} tokens, {cond}, "
                               f"bf16, median of {repeats} after {warmup} warm-up, torch "
                               f"{torch.__version__}"}
        log(f"measure: {kname}: {t * 1e3:.2f} ms, {tflops:.1f} TFLOP/s ({cond})")
        entries.append(entry)
    if not entries:
        raise InputError("no kernel could be measured")
    keep = [e for e in topo.get("measured_compute", []) if not any(
        e.get("gpu_model") == n["gpu_model"] and e.get("kernel") == n["kernel"] and
        e.get("head_dim") == n["head_dim"] for n in entries)]
    topo["measured_compute"] = keep + entries
    tmp = Path(str(out) + ".tmp")
    tmp.write_text(json.dumps(topo, indent=2) + "\n")
    os.replace(tmp, out)
    return entries
