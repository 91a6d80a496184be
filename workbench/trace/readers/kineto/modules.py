"""torch.profiler's ``nn.Module: <Class>_<n>`` events (``with_stack``/``with_modules``) thinned
to the ones worth a range: every module outside a layer, each layer, and the layer's direct
children (attention, MLP, norms). The modules inside those (a ``Linear`` of the attention, the
MLP's activation) are dropped, so that their work is attributed to the layer's child.

A layer is a module whose class ends with one of ``LAYER_SUFFIXES`` (``LlamaDecoderLayer``,
``GPT2Block``, ``BertLayer``) and that lies in no other layer: a "layer" inside one (a
``SparseMoeBlock`` in a decoder layer) is a child like any other, its experts dropped.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...arrays import climb
from ...assemble.nesting import nest, thread_blocks

PREFIX = "nn.Module: "
# DecoderLayer and EncoderLayer end with Layer too.
LAYER_SUFFIXES = ("Layer", "Block")
# The per-class instance counter torch.profiler appends to the class name.
_COUNTER = re.compile(r"_\d+$")


def is_layer_class(name: str) -> bool:
    """Whether a module event's name (``nn.Module: LlamaDecoderLayer_3``) is of a layer class."""
    return _COUNTER.sub("", name.removeprefix(PREFIX)).endswith(LAYER_SUFFIXES)


def thin(modules: pd.DataFrame) -> np.ndarray:
    """Which module events (name as a categorical, start, end, pid, tid) to keep, in their order.

    Nesting is by time containment on each (pid, tid), as the ranges' nesting is.
    """
    n = len(modules)
    order = np.lexsort((-modules["end"].to_numpy(), modules["start"].to_numpy(),
                        modules["tid"].to_numpy(), modules["pid"].to_numpy()))
    pid, tid = modules["pid"].to_numpy()[order], modules["tid"].to_numpy()[order]
    start, end = modules["start"].to_numpy()[order], modules["end"].to_numpy()[order]
    parent = np.full(n, -1, dtype=np.int64)
    for lo, hi in thread_blocks(pid, tid):
        p, _, _ = nest(start[lo:hi], end[lo:hi])
        parent[lo:hi] = np.where(p >= 0, p + lo, -1)
    names = modules["name"].cat
    layer_name = np.fromiter(map(is_layer_class, names.categories), dtype=bool, count=len(names.categories))
    layer = layer_name[names.codes.to_numpy()[order]]
    # inside: a layer at or above the event; an outer layer is one with none above it.
    inside = climb(parent, layer)[0] >= 0
    has_parent = parent >= 0
    up = np.maximum(parent, 0)
    outer = layer & ~(has_parent & inside[up])
    keep_sorted = ~has_parent | ~inside[up] | outer[up]
    keep = np.empty(n, dtype=bool)
    keep[order] = keep_sorted
    return keep
