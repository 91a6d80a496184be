"""A user's own decoder, written for the compiled-code tests: nn.Modules as an engine writes
them (``model.layers.N.{norm,attn,mlp}``, ``lm_head``), a prefill and a few greedy decode steps
over a static cache. It knows nothing of the workbench: ranges come from ``--modules``, layers of
compiled code from the compiler's provenance.

    python compiled_decoder.py [--compile] [--steps N] [--layers L] [--device D]

``--compile`` compiles the model whole, as engines do (``mode="reduce-overhead"`` on CUDA: each
decode step one CUDA-graph replay).
"""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--layers", type=int, default=3)
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
HIDDEN, VOCAB, MAX_LEN, PROMPT = 32, 64, 16, 4


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.out = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x, k_cache, v_cache, pos):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        # The cache is written in place at the step's rows (a static cache: one graph for
        # every decode step), and attention reads every row with a mask past the end.
        k_cache.index_copy_(1, pos, k)
        v_cache.index_copy_(1, pos, v)
        rows = torch.arange(MAX_LEN, device=x.device)
        mask = rows[None, :] <= pos[:, None]
        scores = (q @ k_cache.transpose(1, 2)) / HIDDEN ** 0.5
        scores = scores.masked_fill(~mask[None], float("-inf"))
        return self.out(torch.softmax(scores, dim=-1) @ v_cache)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 2 * HIDDEN), nn.GELU(), nn.Linear(2 * HIDDEN, HIDDEN))

    def forward(self, x, k_cache, v_cache, pos):
        x = x + self.attn(self.norm(x), k_cache, v_cache, pos)
        return x + self.mlp(x)


class Decoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(layers))
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens, k_caches, v_caches, pos):
        x = self.embed(tokens)
        for layer, k, v in zip(self.layers, k_caches, v_caches):
            x = layer(x, k, v, pos)
        return self.lm_head(x[:, -1])


def build(layers: int, device: str) -> Decoder:
    torch.manual_seed(0)
    return Decoder(layers).to(device).eval()


def decode(model: Decoder, step, steps: int) -> list[int]:
    """A prefill by ``model`` (eager: its shape differs from a decode step's), then ``steps``
    greedy decode steps by ``step`` (``model`` or its compiled form)."""
    device = next(model.parameters()).device
    k_caches = [torch.zeros(1, MAX_LEN, HIDDEN, device=device) for _ in model.layers]
    v_caches = [torch.zeros(1, MAX_LEN, HIDDEN, device=device) for _ in model.layers]
    with torch.inference_mode():
        tokens = torch.randint(0, VOCAB, (1, PROMPT), device=device, generator=torch.Generator(device).manual_seed(0))
        logits = model(tokens, k_caches, v_caches, torch.arange(PROMPT, device=device))
        out = []
        for i in range(steps):
            token = logits.argmax(-1, keepdim=True)
            out.append(int(token))
            logits = step(token, k_caches, v_caches, torch.tensor([PROMPT + i], device=device))
    return out


def compiled(model: Decoder, device: str):
    mode = "reduce-overhead" if device.startswith("cuda") else None
    return torch.compile(model, mode=mode, fullgraph=True)


if __name__ == "__main__":
    opts = parser.parse_args()
    model = build(opts.layers, opts.device)
    print("tokens", decode(model, compiled(model, opts.device) if opts.compile else model, opts.steps))
