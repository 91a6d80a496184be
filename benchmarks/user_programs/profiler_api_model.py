"""A user's program written for Nsight Systems, not for the workbench: it brackets its decode
steps with cudaProfilerStart/Stop (``torch.cuda.profiler``) and marks layers with plain NVTX
(``torch.cuda.nvtx``), as many inference engines do. It imports nothing of the workbench.

    python profiler_api_model.py [--steps N] [--layers L]
"""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--layers", type=int, default=4)
opts = parser.parse_args()

torch.manual_seed(0)
dev = "cuda"
d, heads = 256, 4
blocks = [torch.nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True).to(dev).eval()
          for _ in range(opts.layers)]
x = torch.randn(1, 16, d, device=dev)


def forward(h):
    for i, blk in enumerate(blocks):
        torch.cuda.nvtx.range_push(f"layers.{i}")
        h = blk(h)
        torch.cuda.nvtx.range_pop()
    return h


with torch.inference_mode():
    for _ in range(2):  # warm-up: not recorded
        forward(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for s in range(opts.steps):
        torch.cuda.nvtx.range_push(f"step_{s}")
        y = forward(x)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
print(f"checksum {float(y.float().sum()):.4f}")
