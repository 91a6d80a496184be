"""Which layer a range belongs to and what it is called across layers, read from its name.

Ranges of real models name their layer in many ways: ``layer_03`` (the workbench's own
workloads), ``model.layers.3.self_attn`` (module paths, from ``annotate_modules`` or other
tools' NVTX), ``transformer.h.3.attn``, ``blocks.3.mlp``, and ``nn.Module:
LlamaDecoderLayer_3`` (torch.profiler's module events: class name and instance counter, which
counts the modules of a class in the order they are first called, so the decoder layers in
order). A name splits into its **layer** (3) and its **label**, the name with the layer taken
out, so one label stands for that range in every layer:

* ``model.layers.3.self_attn`` -> ``self_attn``: what follows the layer index;
* ``model.layers.3`` -> ``layers``, ``layer_03`` -> ``layer``, ``nn.Module:
  LlamaDecoderLayer_3`` -> ``LlamaDecoderLayer``: a name that ends at its index keeps the word
  before it;
* ``nn.Module: LlamaAttention_1`` -> ``LlamaAttention``: a module event's instance counter is
  no layer and is dropped;
* any other name is its own label (``kv_write``, ``step_2``).

A range whose name holds no layer takes that of its nearest ancestor that has one (see
``projection.range_layers``). A custom pattern (``--layer-regex``) gives the layer as its first
group; the label is then the name with the match cut out, or the name itself if nothing is left.
"""

from __future__ import annotations

import re

import numpy as np

from ..trace.readers.kineto.modules import LAYER_SUFFIXES, PREFIX

# A layer container and its index in a path or a range name. The word must start a part of the
# name (after a separator or at its start): "layers.3", "layer_03", "decoder_layer_12",
# "blocks.3", "h.3" (GPT-2's "transformer.h.3", only with a dot: "h3" is too common).
_LAYER_DEFAULT = r"(?:^|[^A-Za-z0-9])(?:(?:layers?|blocks?)[._\-]?|h\.)(\d+)(?![0-9])"
# torch.profiler's module event of a layer class (the reader's rule): "nn.Module:
# LlamaDecoderLayer_3", "nn.Module: GPT2Block_3"; and of any class.
_MODULE_LAYER = re.compile(rf"^{re.escape(PREFIX)}(\w*?(?:{'|'.join(LAYER_SUFFIXES)}))_(\d+)$")
_MODULE = re.compile(rf"^{re.escape(PREFIX)}(\w+?)_\d+$")
_SEPARATORS = "._-/: "


def layer_pattern(pattern: str | None = None) -> re.Pattern:
    """Compiled layer pattern: its first group is the layer index.

    The default maps ``layer_03``, ``layers.3``, ``model.layers.3.self_attn``, ``h.3.attn``
    and ``decoder_layer_12`` to 3, 3, 3, 3 and 12.
    """
    return re.compile(pattern or _LAYER_DEFAULT, re.IGNORECASE)


def name_parts(name: str, pattern: str | None = None) -> tuple[int, str]:
    """``(layer, label)`` of one range name (layer -1: the name holds none); see the module
    docstring."""
    if pattern is None:
        m = _MODULE_LAYER.match(name)
        if m:
            return int(m.group(2)), m.group(1)
        m = _MODULE.match(name)
        if m:
            return -1, m.group(1)
    m = layer_pattern(pattern).search(name)
    if not m:
        return -1, name
    layer = int(m.group(1))
    if pattern is not None:
        rest = (name[: m.start()] + name[m.end():]).strip(_SEPARATORS)
        return layer, rest or name
    after = name[m.end():].strip(_SEPARATORS)
    if after:
        return layer, after
    # The container's word: the part of the name the match starts, index and separators cut.
    word = name[: m.start(1)].rstrip(_SEPARATORS)
    return layer, re.split(r"[./: ]", word)[-1] or name


def label_parts(names, pattern: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per name of ``names`` (distinct strings, e.g. a categorical's categories): its layer
    (int64) and its label (object array)."""
    parts = [name_parts(str(n), pattern) for n in names]
    layers = np.fromiter((p[0] for p in parts), dtype=np.int64, count=len(parts))
    labels = np.empty(len(parts), dtype=object)
    labels[:] = [p[1] for p in parts]
    return layers, labels
