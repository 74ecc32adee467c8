#!/usr/bin/env python3
"""When does a communication kernel launched beside an attention kernel get to run?

Why: sparsp's `sm_overlap:high_priority_comm=0` (policy/README.md) models PyTorch's default NCCL
stream as ring attention uses it (yunchang, xDiT, ring-flash-attention): the step's transfer and
its attention kernel become ready together, at equal stream priority, and the model assumes the
attention kernel's thread blocks are dispatched first, so the transfer runs after it. That was
inferred from code and published step times. This script measures it on one GPU without NCCL.

The stand-in for NCCL's send/recv kernel is a copy kernel with NCCL's shape: `ctas` blocks of 512
threads (NCCL_NTHREADS default 512; one block per channel) that stream `copy_bytes` from one
buffer to another. Per case, both streams wait on one event recorded after a gate kernel, then the
copy kernel is enqueued on the comm stream FIRST (as RingComm.send_recv runs before flash-attn),
then SDPA flash attention (FlashAttention-2) on the compute stream. CUDA events give, from the
gate: when the copy ended, when the attention ended, and each alone. Comm stream at default
priority (PyTorch's default for NCCL) and at the highest priority (what
`is_high_priority_stream` / `high_priority_comm=1` stand for).

Usage: OUT=DIR python3 comm_beside_attention.py   (writes DIR/comm-beside-attention-<gpu>.json)
"""
import json
import os

import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}
void block_copy(torch::Tensor src, torch::Tensor dst, int64_t ctas) {
  long n = src.numel() * src.element_size() / 16;
  copy_kernel<<<ctas, 512, 0, c10::cuda::getCurrentCUDAStream()>>>(
      (const int4*)src.data_ptr(), (int4*)dst.data_ptr(), n);
}
"""
CPP = "void block_copy(torch::Tensor src, torch::Tensor dst, int64_t ctas);"


def main():
    ext = load_inline("comm_beside_attention_ext", CPP, cuda_sources=SRC, functions=["block_copy"],
                      extra_cuda_cflags=["-O3", "-arch=sm_90"], verbose=False)
    dev = torch.cuda.current_device()
    flash = torch.ops.aten._scaled_dot_product_flash_attention
    R = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
         "sms": torch.cuda.get_device_properties(dev).multi_processor_count, "cases": []}
    lo, hi = torch.cuda.Stream.priority_range()  # (lowest = 0, highest = negative)
    gate_a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def ev():
        return torch.cuda.Event(enable_timing=True)

    for heads, tokens, copy_mb, ctas in [(24, 17776, 109, 2), (24, 17776, 109, 8),
                                         (48, 8888, 27, 2), (48, 8888, 109, 2),
                                         (30, 17776, 68, 4), (8, 8192, 64, 2)]:
        q, k, v = (torch.randn(1, heads, tokens, 64, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        src = torch.empty(copy_mb << 20, device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        for prio_name, prio in (("default", 0), ("high", hi)):
            comm = torch.cuda.Stream(priority=prio)
            comp = torch.cuda.Stream(priority=0)
            rows = []
            for rep in range(17):
                torch.cuda.synchronize()
                g0, g1, c1, a1 = ev(), ev(), ev(), ev()
                with torch.cuda.stream(comp):
                    g0.record()
                    gate_a @ gate_a  # the previous step's work both streams wait for
                    g1.record()
                comm.wait_event(g1)
                with torch.cuda.stream(comm):
                    ext.block_copy(src, dst, ctas)
                    c1.record()
                with torch.cuda.stream(comp):
                    flash(q, k, v, 0.0, False)
                    a1.record()
                torch.cuda.synchronize()
                if rep >= 2:
                    rows.append((g1.elapsed_time(c1), g1.elapsed_time(a1)))
            # Each alone, after the same gate.
            alone = []
            for fn in (lambda: ext.block_copy(src, dst, ctas), lambda: flash(q, k, v, 0.0, False)):
                ts = []
                for rep in range(5):
                    torch.cuda.synchronize()
                    s, e = ev(), ev()
                    with torch.cuda.stream(comp):
                        s.record()
                        fn()
                        e.record()
                    torch.cuda.synchronize()
                    ts.append(s.elapsed_time(e))
                alone.append(sorted(ts)[len(ts) // 2])
            med = sorted(rows)[len(rows) // 2]
            # A copy "waited" when it ended after 80% of the attention kernel and later than
            # twice its time alone: it did not start beside the attention.
            waited = sum(c > 0.8 * a and c > 2 * alone[0] for c, a in rows)
            case = {"heads": heads, "tokens": tokens, "head_dim": 64, "copy_MB": copy_mb,
                    "copy_ctas": ctas, "comm_priority": prio_name,
                    "copy_alone_ms": alone[0], "attention_alone_ms": alone[1],
                    "copy_end_ms": med[0], "attention_end_ms": med[1],
                    "reps": len(rows), "reps_copy_waited": waited,
                    "copy_end_ms_each": [round(c, 4) for c, _ in rows],
                    "attention_end_ms_each": [round(a, 4) for _, a in rows]}
            R["cases"].append(case)
            print(f"{heads}x{tokens} copy {copy_mb} MB on {ctas} CTAs, comm {prio_name:7s}: "
                  f"alone copy {alone[0]:.3f} attn {alone[1]:.3f} | together: copy ends "
                  f"{med[0]:.3f}, attn ends {med[1]:.3f} ms; copy waited in {waited}/{len(rows)}")
    out = os.environ.get("OUT", ".")
    name = R["gpu"].replace(" ", "-").lower()
    with open(os.path.join(out, f"comm-beside-attention-{name}.json"), "w") as f:
        json.dump(R, f, indent=1)


if __name__ == "__main__":
    main()
