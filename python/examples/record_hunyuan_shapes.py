"""A random-weight DiT-style stack at HunyuanVideo 720p attention shapes (24 heads x 128, 119,056
tokens: 118,800 video + 256 text), recorded with sparsp_torch.record. Run on a GPU:

    PYTHONPATH=python python3 python/examples/record_hunyuan_shapes.py OUT.npz [layers] [steps]

Weights are random (seeded), so the masks show the recorder working at full size, not
HunyuanVideo's real sparsity."""
import sys
import time

import torch

import sparsp_torch as st

out = sys.argv[1]
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 3
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 2
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
L = st.Layout.from_model("hunyuanvideo-720p", 128, "raster")
N, H, D = L.tokens, 24, 128
qkv = [torch.nn.Linear(H * D, 3 * H * D, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
proj = [torch.nn.Linear(H * D, H * D, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
x = torch.randn(1, N, H * D, device=dev, dtype=torch.bfloat16)
t0 = time.time()
with torch.no_grad(), st.record(out, model="hunyuanvideo-720p", kind="topk", density=0.1,
                                layers_per_step=layers) as rec:
    for s in range(steps):
        for l in range(layers):
            q, k, v = qkv[l](x).view(1, N, 3, H, D).permute(2, 0, 3, 1, 4)
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            x = x + proj[l](o.transpose(1, 2).reshape(1, N, H * D))
        rec.step()
print(f"recorded {rec.calls} calls ({rec.skipped} skipped) in {time.time() - t0:.1f} s on {dev}: "
      f"{rec.sidecar['steps']} steps x {rec.sidecar['layers']} layers, {rec.sidecar['blocks']} blocks")
