"""A user's own HuggingFace program, written for the module-range tests: a tiny random-weight
Llama built from its config, greedy generation of a few tokens. It knows nothing of the
workbench; ``workbench capture --modules`` gives its layers ranges from outside.

    python hf_generate.py [--device D] [--layers N] [--new-tokens N]
"""

import argparse

import torch
import transformers

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--new-tokens", type=int, default=3)
opts = parser.parse_args()

torch.manual_seed(0)
config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=opts.layers, num_attention_heads=4, num_key_value_heads=2)
model = transformers.LlamaForCausalLM(config).to(opts.device).eval()
ids = torch.randint(256, (1, 8), device=opts.device)
with torch.inference_mode():
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=opts.new_tokens, do_sample=False,
                         pad_token_id=0)
print("generated", out[0, ids.shape[1]:].tolist())
