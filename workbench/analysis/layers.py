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

from ..errors import WorkbenchError
from ..patterns import compile_regex
from ..trace.readers.kineto.modules import LAYER_SUFFIXES, PREFIX

# How the command line spells the option whose pattern this is, for its errors.
LAYER_OPTION = "--layer-regex"

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
    """Compiled layer pattern: its first group is the layer index. A custom one that does not
    compile or has no group is refused in one line.

    The default maps ``layer_03``, ``layers.3``, ``model.layers.3.self_attn``, ``h.3.attn``
    and ``decoder_layer_12`` to 3, 3, 3, 3 and 12.
    """
    if pattern is None:
        return re.compile(_LAYER_DEFAULT, re.IGNORECASE)
    rx = compile_regex(pattern, LAYER_OPTION, re.IGNORECASE)
    if rx.groups < 1:
        raise WorkbenchError(f"{LAYER_OPTION} {pattern!r}", r"has no group: its first group is the layer number, "
                                                           r"as in 'layers\.(\d+)'")
    return rx


def _layer_number(m: re.Match, name: str) -> int:
    """The layer a custom pattern's first group captured in ``name``; a group that captured
    no number (or nothing) is refused rather than read as some layer."""
    text = m.group(1)
    try:
        return int(text)
    except (TypeError, ValueError):
        raise WorkbenchError(f"{LAYER_OPTION} {m.re.pattern!r}", f"its first group matched {text!r} in the range "
                             f"name {name!r}, not a layer number (the group must capture digits)") from None


def name_parts(name: str, pattern: str | None = None) -> tuple[int, str]:
    """``(layer, label)`` of one range name (layer -1: the name holds none); see the module
    docstring."""
    return _parts(name, layer_pattern(pattern), pattern is not None)


def _parts(name: str, rx: re.Pattern, custom: bool) -> tuple[int, str]:
    """:func:`name_parts` with the layer pattern compiled (``custom``: given by the user)."""
    if not custom:
        m = _MODULE_LAYER.match(name)
        if m:
            return int(m.group(2)), m.group(1)
        m = _MODULE.match(name)
        if m:
            return -1, m.group(1)
    m = rx.search(name)
    if not m:
        return -1, name
    layer = _layer_number(m, name) if custom else int(m.group(1))
    if custom:
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
    rx, custom = layer_pattern(pattern), pattern is not None
    # As a list first: iterating an Arrow-backed Index makes a scalar per element.
    parts = [_parts(str(n), rx, custom) for n in (names.tolist() if hasattr(names, "tolist") else names)]
    layers = np.fromiter((p[0] for p in parts), dtype=np.int64, count=len(parts))
    labels = np.empty(len(parts), dtype=object)
    labels[:] = [p[1] for p in parts]
    return layers, labels


def trace_label_parts(trace, pattern: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`label_parts` of the trace's range names (its name column's categories), worked
    out once per pattern: the projection's labels and layers and the steps' model calls all
    read them, and a trace whose ranges are each named apart has as many names as ranges."""
    key = f"label_parts:{pattern}"
    if key not in trace.memo:
        names = trace.columns("ranges", ["name"])["name"]
        trace.memo[key] = label_parts(names.cat.categories.astype(str), pattern)
    return trace.memo[key]
