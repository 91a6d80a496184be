"""transformers' own compiled decoding, as a user runs it: a Llama built from its config with
random weights (hubs are unreachable), ``generate()`` over a static cache, which compiles the
decode step itself (``torch.compile`` with ``mode="reduce-overhead"``: each decode step one
CUDA-graph replay; the prefill runs eager). It imports nothing of the workbench: ranges come
from ``workbench capture --modules``, layers of compiled code from the compiler's provenance.

    python hf_compiled_generate.py [--attn sdpa|eager] [--no-compile] [--shape 1b|tiny]
                                   [--prompt N] [--new-tokens N] [--window] [--device D]

``--no-compile`` is the eager twin (``disable_compile=True``). ``--window`` runs one ``generate``
first (compiles, captures the graphs), then brackets a second one with cudaProfilerStart/Stop,
as programs written for Nsight Systems do: ``workbench capture --windows`` records only that.
Prints the program's own timing of the measured ``generate`` (CUDA events on a GPU).
"""

import argparse
import time

import torch
import transformers

parser = argparse.ArgumentParser()
parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
parser.add_argument("--no-compile", action="store_true")
parser.add_argument("--shape", default="1b", choices=["1b", "tiny"])
parser.add_argument("--prompt", type=int, default=128)
parser.add_argument("--new-tokens", type=int, default=8)
parser.add_argument("--window", action="store_true")
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
opts = parser.parse_args()

SHAPES = {  # Llama-3.2-1B's shape, and one small enough for a CPU check of the script
    "1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8),
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2),
}
torch.manual_seed(0)
config = transformers.LlamaConfig(**SHAPES[opts.shape], max_position_embeddings=4096)
dtype = torch.bfloat16 if opts.device.startswith("cuda") else torch.float32
model = transformers.LlamaForCausalLM(config).to(opts.device, dtype).eval()
model.config._attn_implementation = opts.attn
ids = torch.randint(config.vocab_size, (1, opts.prompt), device=opts.device)
# generate() compiles the decode step on CUDA only, unless told to on every device.
compile_config = transformers.CompileConfig()
compile_config._compile_all_devices = not opts.device.startswith("cuda")


def generate():
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=opts.new_tokens,
                          min_new_tokens=opts.new_tokens, do_sample=False, pad_token_id=0,
                          cache_implementation="static", disable_compile=opts.no_compile,
                          compile_config=compile_config)


def timed():
    if opts.device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = generate()
        end.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(end)
    t = time.perf_counter()
    out = generate()
    return out, (time.perf_counter() - t) * 1e3


with torch.inference_mode():
    if opts.window:
        generate()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        out, ms = timed()
        torch.cuda.profiler.stop()
    else:
        out, ms = timed()
print("generated", out[0, ids.shape[1]:].tolist())
print(f"generate {ms:.2f} ms for {opts.new_tokens} tokens (program's own timing)")
