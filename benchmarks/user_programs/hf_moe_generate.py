"""A user's own mixture-of-experts program, for the H200 campaign `benchmarks/h200_moe.sh`: a
random-weight Mixtral built from its config (transformers' own code), sampling a batch of
prompts with `generate()` (top-k, temperature). It knows nothing of the workbench. With a
batch, each layer's router sends the tokens to a different number of experts at every step, and
with ``--experts eager`` (transformers' experts loop, instead of its default grouped GEMMs)
each hit expert's kernels are launched: the layers' kernel counts vary.

    python hf_moe_generate.py [--device D] [--layers N] [--batch B] [--new-tokens N] [--experts IMPL] [--tiny]
"""

import argparse

import torch
import transformers

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
parser.add_argument("--layers", type=int, default=8)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--new-tokens", type=int, default=12)
parser.add_argument("--experts", default="grouped_mm", help="transformers experts_implementation (eager, grouped_mm)")
parser.add_argument("--tiny", action="store_true", help="CPU-sized model")
opts = parser.parse_args()

torch.manual_seed(0)
size = (dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
        if opts.tiny else
        dict(hidden_size=1024, intermediate_size=2048, num_attention_heads=16, num_key_value_heads=8, vocab_size=32000))
config = transformers.MixtralConfig(num_hidden_layers=opts.layers, num_local_experts=8, num_experts_per_tok=2,
                                    max_position_embeddings=512, experts_implementation=opts.experts, **size)
dtype = torch.bfloat16 if opts.device.startswith("cuda") else torch.float32
model = transformers.MixtralForCausalLM(config).to(opts.device, dtype).eval()
ids = torch.randint(size["vocab_size"], (opts.batch, 16), device=opts.device)
with torch.inference_mode():
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=opts.new_tokens,
                         min_new_tokens=opts.new_tokens, do_sample=True, top_k=50, temperature=0.8, pad_token_id=0)
print("generated", out[:, ids.shape[1]:].tolist())
