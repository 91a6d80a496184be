"""Consistent colours: the same kernel (or range) gets the same colour in every figure,
every notebook and every regenerated report.

A range or variant takes the colour its workload's presentation gives it
(:class:`workbench.workloads.Presentation`); anything else, and everything of a trace whose
workload is unknown, takes a stable hash (SHA-1, not Python's salted ``hash``) of the name into
a fixed palette, so it does not depend on which other names a figure happens to show.
"""

from __future__ import annotations

import hashlib
import re

from ..workloads import NO_PRESENTATION, Presentation, presentation_of

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

# Ranges every trace may have (analysis names them), whatever its workload.
_FIXED = {"(no range)": "#bbbbbb", "(no launch record)": "#999999"}


def _index(name: str, n: int) -> int:
    return int.from_bytes(hashlib.sha1(str(name).encode("utf-8", "surrogatepass")).digest()[:4], "big") % n


def trace_presentation(trace=None) -> Presentation:
    """The presentation of ``trace``'s workload (a Trace or a manifest dict); the empty one
    for None or a trace whose manifest names no registered workload."""
    return presentation_of(getattr(trace, "meta", trace))


def kernel_color(name: str) -> str:
    """Colour of a kernel, by its short name."""
    return PALETTE[_index(name, len(PALETTE))]


def range_color(name: str, p: Presentation = NO_PRESENTATION) -> str:
    """Colour of a range (innermost name such as ``kv_write``): the workload's colour for it,
    else a stable hash."""
    s = str(name)
    return p.colors.get(s) or _FIXED.get(s) or PALETTE[_index("range:" + s, len(PALETTE))]


def color_map(names, kind: str = "kernel", p: Presentation = NO_PRESENTATION) -> dict[str, str]:
    """``{name: colour}`` for ``names`` (kernels or ranges)."""
    if kind == "kernel":
        return {str(n): kernel_color(n) for n in names}
    return {str(n): range_color(n, p) for n in names}


def variant_color(name: str, p: Presentation = NO_PRESENTATION) -> str:
    """Colour of a variant value or a trace label in comparisons (``full``, ``bucketed``,
    ``h200-kvwrite-unfused-eager``): the workload's colour of the value, or of the first of its
    variant values (keys of ``colors`` that are not regions) that the label holds as a word;
    else a stable hash."""
    s = str(name)
    if s in p.colors:
        return p.colors[s]
    low = s.lower()
    for key, color in p.colors.items():
        if key not in p.regions and re.search(rf"(^|[^a-z]){re.escape(key.lower())}([^a-z]|$)", low):
            return color
    return PALETTE[_index("variant:" + s, len(PALETTE))]
