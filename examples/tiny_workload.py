"""A workload of your own (docs/your-own-model.md, "Your own workloads"): the smallest object
the eager engine can run, a two-matrix MLP over an embedding, with no KV cache. From the
repository root:

    workbench capture examples.tiny_workload:WORKLOAD --variant hidden=128 --name tiny-h128
"""

import torch


class TinyInstance:
    def __init__(self, variant, device):
        gen = torch.Generator().manual_seed(variant["seed"])
        vocab, hidden = variant["vocab"], variant["hidden"]
        self.device = torch.device(device)          # a torch.device, not the string
        self.ctx, self.rows = variant["ctx"], 256   # prompt length; positions allowed
        self.embed = torch.randn(vocab, hidden, generator=gen).to(self.device)
        self.w1 = torch.randn(hidden, hidden, generator=gen).to(self.device) / hidden ** 0.5
        self.w2 = torch.randn(hidden, vocab, generator=gen).to(self.device) / hidden ** 0.5
        self.prompt = torch.randint(vocab, (self.ctx,), generator=gen).to(self.device)
        self.info = {"dtype": "float32"}

    def rows_for(self, cached):                     # no KV cache here: a constant
        return self.rows

    def forward(self, tokens, positions, rows):     # -> logits of the last position, (1, vocab)
        return (torch.relu(self.embed[tokens] @ self.w1) @ self.w2)[-1:]


class Tiny:
    options = {"hidden": 64, "vocab": 512, "ctx": 16, "seed": 0}   # plain values = defaults

    def create(self, variant, device):
        return TinyInstance(variant, device)


WORKLOAD = Tiny()
