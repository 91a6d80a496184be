"""An open-source engine's compiled decoding, as its users run it: gpt-fast (pytorch-labs,
``gpt_fast/``: its ``model.py`` and ``generate.py`` as published, BSD-3, commit 32971d3), a
Llama-shaped ``Transformer`` built from a ``ModelArgs`` with random weights (hubs are
unreachable), its KV cache set up for ``--cache`` rows, its own ``prefill`` and
``decode_n_tokens``, and ``decode_one_token`` compiled as gpt-fast's ``main`` compiles it
(``torch.compile(mode="reduce-overhead", fullgraph=True)``: each decode step one CUDA-graph
replay). gpt-fast's attention reads the whole cache under a mask, so ``--cache`` sets how much
of it every decode step reads. It imports nothing of the workbench.

    python gpt_fast_decode.py [--cache N] [--prompt N] [--new-tokens N] [--window]
                              [--no-compile] [--shape small|tiny] [--device D]

``--window`` decodes once first (compiles, captures the graphs), then brackets a second decode
with cudaProfilerStart/Stop, as programs written for Nsight Systems do: ``workbench capture
--windows`` records only that. Prints the program's own time per decoded token.
"""

import argparse
import sys
import time
import types
from pathlib import Path

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--cache", type=int, default=2048, help="KV-cache rows (max_seq_length)")
parser.add_argument("--prompt", type=int, default=64)
parser.add_argument("--new-tokens", type=int, default=16)
parser.add_argument("--window", action="store_true")
parser.add_argument("--no-compile", action="store_true")
parser.add_argument("--shape", default="small", choices=["small", "tiny"])
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
opts = parser.parse_args()

# gpt-fast's generate.py imports its tokenizer (sentencepiece, tiktoken) at the top; decoding
# token ids needs none of it.
sys.modules["tokenizer"] = types.SimpleNamespace(get_tokenizer=None)
sys.path.insert(0, str(Path(__file__).parent / "gpt_fast"))
import generate as gf  # noqa: E402  (gpt-fast's generate.py)
from model import ModelArgs, Transformer  # noqa: E402  (gpt-fast's model.py)

SHAPES = {  # 8 Llama-style layers with grouped-query attention; one small enough for a CPU check
    "small": dict(n_layer=8, n_head=16, n_local_heads=4, dim=2048, intermediate_size=5632, vocab_size=32000),
    "tiny": dict(n_layer=4, n_head=4, n_local_heads=2, dim=64, intermediate_size=128, vocab_size=256),
}
torch.manual_seed(0)
dtype = torch.bfloat16 if opts.device.startswith("cuda") else torch.float32
args = ModelArgs(block_size=max(opts.cache, opts.prompt + opts.new_tokens), **SHAPES[opts.shape])
with torch.device(opts.device):
    model = Transformer(args)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.02)
    model = model.to(dtype).eval()
    model.setup_caches(max_batch_size=1, max_seq_length=opts.cache)
if not opts.no_compile:
    gf.decode_one_token = torch.compile(gf.decode_one_token, mode="reduce-overhead", fullgraph=True)
prompt = torch.randint(args.vocab_size, (1, opts.prompt), device=opts.device)


def sync():
    if opts.device.startswith("cuda"):
        torch.cuda.synchronize()


def decode():
    """gpt-fast's own prefill, then its decode loop over ``--new-tokens`` tokens."""
    with torch.inference_mode():
        input_pos = torch.arange(0, opts.prompt, device=opts.device)
        token = gf.prefill(model, prompt, input_pos).clone()
        input_pos = torch.tensor([opts.prompt], device=opts.device, dtype=torch.int)
        return gf.decode_n_tokens(model, token.view(1, -1), input_pos, opts.new_tokens - 1)


decode()  # compiles and captures the decode graph
sync()
if opts.window and opts.device.startswith("cuda"):
    torch.cuda.cudart().cudaProfilerStart()
t0 = time.perf_counter()
decode()
sync()
elapsed = time.perf_counter() - t0
if opts.window and opts.device.startswith("cuda"):
    torch.cuda.cudart().cudaProfilerStop()
print(f"gpt-fast decode: {opts.new_tokens} tokens, cache {opts.cache} rows, "
      f"{elapsed / opts.new_tokens * 1e3:.3f} ms per token (prefill included)")
