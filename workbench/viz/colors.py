"""Consistent colours: the same kernel (or range) gets the same colour in every figure,
every notebook and every regenerated report.

The colour comes from a stable hash (SHA-1, not Python's salted ``hash``) of the name into
a fixed palette, so it does not depend on which other kernels a figure happens to show.
"""

from __future__ import annotations

import hashlib
import re

# 40 distinguishable colours (tab10, its light partners, 20 of Plotly's Dark24; greys left
# out so bars stay visible on white). More colours than kernels in a typical figure keeps
# hash collisions rare; the legend and hover always name the kernel.
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f3b08",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#fdae6b",
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86", "#EB663B", "#511CFB",
    "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042", "#1616A7",
)

# Two traces compared (A = before, B = after) and the status of aligned kernels.
SIDE = {"A": "#7f7f7f", "B": "#1f77b4"}
STATUS = {"equal": "#ffffff", "removed": "#fde0dd", "added": "#e5f5e0"}
STATUS_TEXT = {"equal": "#333333", "removed": "#a50f15", "added": "#006d2c"}
RANGE_FILL = "#e8e8f0"

# Well-known ranges of the reference workloads get fixed, readable colours.
_FIXED = {"qkv": "#9467bd", "kv_write": "#d62728", "attention": "#1f77b4", "mlp": "#2ca02c",
          "lm_head": "#8c564b", "(no range)": "#bbbbbb", "(no launch record)": "#999999"}


def _index(name: str, n: int) -> int:
    return int.from_bytes(hashlib.sha1(str(name).encode("utf-8", "surrogatepass")).digest()[:4], "big") % n


def kernel_color(name: str) -> str:
    """Colour of a kernel, by its short name."""
    return PALETTE[_index(name, len(PALETTE))]


def range_color(name: str) -> str:
    """Colour of a range (innermost name such as ``kv_write``)."""
    return _FIXED.get(str(name)) or PALETTE[_index("range:" + str(name), len(PALETTE))]


def color_map(names, kind: str = "kernel") -> dict[str, str]:
    """``{name: colour}`` for ``names`` (kernels or ranges)."""
    f = kernel_color if kind == "kernel" else range_color
    return {str(n): f(n) for n in names}


# Variants of the reference workloads: before in warm/grey tones, after in blue/green.
_VARIANTS = {"full": "#d62728", "bucketed": "#1f77b4", "unfused": "#ff7f0e", "fused": "#2ca02c"}


def variant_color(name: str) -> str:
    """Colour of a variant or trace label in comparisons (``full``, ``bucketed``, ...)."""
    s = str(name)
    if s in _VARIANTS:
        return _VARIANTS[s]
    for key in ("unfused", "bucketed", "fused", "full"):  # "unfused" before "fused"
        if re.search(rf"(^|[^a-z]){key}([^a-z]|$)", s.lower()):
            return _VARIANTS[key]
    return PALETTE[_index("variant:" + s, len(PALETTE))]
