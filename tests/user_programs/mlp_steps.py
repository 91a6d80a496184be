"""A user's own program, written for the capture tests: a tiny residual MLP stack run for a
few "decode" steps. It knows the workbench only through its public window/step/annotate API.

    python mlp_steps.py [--steps N] [--device D] [--extra-op] [--exit CODE] [--leave-window-open]
"""

import argparse
import sys

import torch

import workbench as wb

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
parser.add_argument("--extra-op", action="store_true", help="one more op in layer 1 (a 'variant')")
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--leave-window-open", action="store_true")
opts = parser.parse_args()

torch.manual_seed(0)
layers = [torch.nn.Linear(24, 24).to(opts.device) for _ in range(3)]
x = torch.randn(2, 24, device=opts.device)


def layer(i, h):
    with wb.annotate(f"layer_{i:02d}"):
        out = h + torch.tanh(layers[i](h))
        if opts.extra_op and i == 1:
            out = out * 0.5
        return out


with torch.inference_mode():
    for i in range(3):  # warm-up, outside the window
        x = layer(i, x)
    if opts.leave_window_open:
        held = wb.window("decode")  # entered, never exited: a bug the capture must name
        held.__enter__()
    else:
        with wb.window("decode"):
            for _ in range(opts.steps):
                with wb.step():
                    for i in range(3):
                        x = layer(i, x)
print(f"checksum {float(x.sum()):.6f}")
sys.exit(opts.exit)
