"""Your own model, as docs/your-own-model.md and the README's tour use it: a tiny decoder-style
stack (attention + MLP per layer) that greedily generates a few tokens. It runs on the GPU
when there is one. The workbench calls are the only additions to a plain torch script:
``wb.window`` marks what to record, ``wb.step`` each decode step, ``wb.annotate`` each layer.

    python examples/my_model.py [--tokens N]
"""

import argparse

import torch

import workbench as wb

VOCAB, DIM, LAYERS = 256, 64, 4


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(DIM, 4, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.mlp(x)


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            with wb.annotate(f"layer_{i:02d}"):
                x = layer(x)
        return self.head(x[:, -1])


def generate(model, tokens, n):
    for _ in range(n):
        with wb.step():
            nxt = model(tokens).argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], dim=1)
    return tokens


_built = {}


def one_step():
    """One forward pass of a fixed model and prompt, built on first use: a ``module:function``
    for ``workbench capture --call examples.my_model:one_step`` (it takes no arguments, so
    it can run in the child process an nsys capture needs)."""
    if not _built:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(0)
        _built["model"] = TinyLM().to(device).eval()
        _built["prompt"] = torch.randint(VOCAB, (1, 8), device=device)
    with torch.inference_mode():
        return _built["model"](_built["prompt"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=3)
    opts = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = TinyLM().to(device).eval()
    prompt = torch.randint(VOCAB, (1, 8), device=device)
    with torch.inference_mode():
        generate(model, prompt, 1)  # warm-up, outside the window
        with wb.window("decode"):
            out = generate(model, prompt, opts.tokens)
    print("generated", out[0, -opts.tokens:].tolist())


if __name__ == "__main__":
    main()
