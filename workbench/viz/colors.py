"""Colours: distinct within every figure, and the same for the same thing wherever a workload
says so.

Kernels have no fixed colour: each figure assigns its kernels colours from one ordered
qualitative palette, in a stable order (the emphasised kernels first, then by name), so two
kernels of one figure never share a colour (a colour hashed from the name would, once in a
while, for two kernels that matter). Figures drawn together take one map (``timeline_pair``;
``range_composition`` of two traces colours both with it; ``timeline(colors=...)``). A figure
that compares two traces emphasises the kernels that changed (strong colours) and mutes the
unchanged ones (the palette's colours lightened), so the subject of a change stands out.

A range or variant takes the colour its workload's presentation gives it
(:class:`workbench.workloads.Presentation`), so ``kv_write`` is the same red in every figure,
notebook and report; the other ranges and variants of a figure take palette colours that no
name of the figure already holds.
"""

from __future__ import annotations

import colorsys
import hashlib
import re
from collections.abc import Iterable, Mapping

from ..workloads import NO_PRESENTATION, Presentation, presentation_of

# Ordered so that the first colours are the most distinct (tab10, then darker and brighter
# hues that tab10 lacks); greys left out: grey is "(other ...)" and the base side of a
# comparison. Beyond these, golden-angle hues (``_nth``) keep colours distinct however many.
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#1616a7", "#fb00d1", "#00a08b", "#b68100", "#750d86", "#eb663b", "#6c7c32", "#862a16", "#2e91e5",
    "#1ca71c", "#da16ff", "#fc0080", "#511cfb", "#778aae", "#620042",
)

# Two traces compared (A = base, before; B = fix, after) and the status of aligned kernels.
SIDE = {"A": "#7f7f7f", "B": "#1f77b4"}
STATUS = {"equal": "#ffffff", "removed": "#fde0dd", "added": "#e5f5e0"}
STATUS_TEXT = {"equal": "#333333", "removed": "#a50f15", "added": "#006d2c"}
RANGE_FILL = "#e8e8f0"

# Ranges every trace may have (analysis names them), whatever its workload.
_FIXED = {"(no range)": "#bbbbbb", "(no launch record)": "#999999"}


def _nth(i: int) -> str:
    """The palette's ``i``-th colour; past its end, hues spaced by the golden angle."""
    if i < len(PALETTE):
        return PALETTE[i]
    r, g, b = colorsys.hls_to_rgb((i * 0.618033988749895) % 1.0, 0.42 + 0.12 * (i % 3) / 2, 0.75)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def muted(color: str, amount: float = 0.6) -> str:
    """``color`` (``#rrggbb``) moved ``amount`` of the way to white: same hue, less weight."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def _assign(order: Iterable[str], preset: Mapping[str, str | None] | None = None,
            mute: frozenset = frozenset(), avoid: Iterable[str] = ()) -> dict[str, str]:
    """``{name: colour}`` for ``order``: a name's preset colour unless an earlier name holds it,
    else the next palette colour no name holds (lightened for names in ``mute``), never one
    of ``avoid`` (colours the figure gives other things)."""
    names = list(dict.fromkeys(str(n) for n in order))
    preset = preset or {}
    out: dict[str, str] = {}
    used: set[str] = {c.lower() for c in avoid}
    for n in names:
        c = preset.get(n)
        if c and c.lower() not in used:
            out[n] = c
            used.add(c.lower())
    i = 0
    for n in names:
        if n in out:
            continue
        while True:
            c = muted(_nth(i)) if n in mute else _nth(i)
            i += 1
            if c not in used:
                break
        out[n] = c
        used.add(c)
    return {n: out[n] for n in names}


def kernel_colors(names: Iterable[str], emphasis: Iterable[str] | None = None,
                  avoid: Iterable[str] = ()) -> dict[str, str]:
    """Distinct colours for the kernels of one figure, in figure order: the ``emphasis`` kernels
    (those a comparison changed) first, in strong colours, then the rest by name, muted. With no
    emphasis (or all of them) every kernel is strong. ``avoid``: colours the figure already
    gives other things (a workload's range colours in a timeline)."""
    names = sorted({str(n) for n in names})
    emph = {str(n) for n in emphasis or ()} & set(names)
    if not emph or emph == set(names):
        return _assign(names, avoid=avoid)
    order = sorted(emph) + [n for n in names if n not in emph]
    return _assign(order, mute=frozenset(set(names) - emph), avoid=avoid)


def trace_presentation(trace=None) -> Presentation:
    """The presentation of ``trace``'s workload (a Trace or a manifest dict); the empty one
    for None or a trace whose manifest names no registered workload."""
    return presentation_of(getattr(trace, "meta", trace))


def _index(name: str, n: int) -> int:
    return int.from_bytes(hashlib.sha1(str(name).encode("utf-8", "surrogatepass")).digest()[:4], "big") % n


def range_color(name: str, p: Presentation = NO_PRESENTATION) -> str:
    """Colour of one range (innermost name such as ``kv_write``) on its own: the workload's
    colour for it, else a stable hash. Figures of several ranges use :func:`range_colors`."""
    s = str(name)
    return p.colors.get(s) or _FIXED.get(s) or PALETTE[_index("range:" + s, len(PALETTE))]


def range_colors(names: Iterable[str], p: Presentation = NO_PRESENTATION) -> dict[str, str]:
    """Distinct colours for the ranges of one figure: the workload's colours first, the others
    from the palette, by name."""
    names = sorted({str(n) for n in names})
    return _assign(names, {n: p.colors.get(n) or _FIXED.get(n) for n in names})


def variant_preset(name: str, p: Presentation = NO_PRESENTATION) -> str | None:
    """The workload's colour of a variant value or trace label (see :func:`variant_color`), or None."""
    s = str(name)
    if s in p.colors:
        return p.colors[s]
    low = s.lower()
    for key, color in p.colors.items():
        if key not in p.regions and re.search(rf"(^|[^a-z]){re.escape(key.lower())}([^a-z]|$)", low):
            return color
    return None


def variant_color(name: str, p: Presentation = NO_PRESENTATION) -> str:
    """Colour of a variant value or a trace label in comparisons (``full``, ``bucketed``,
    ``h200-kvwrite-unfused-eager``): the workload's colour of the value, or of the first of its
    variant values (keys of ``colors`` that are not regions) that the label holds as a word;
    else a stable hash."""
    return variant_preset(name, p) or PALETTE[_index("variant:" + str(name), len(PALETTE))]


def variant_colors(names: Iterable[str], p: Presentation = NO_PRESENTATION,
                   fixed: Mapping[str, str] | None = None) -> dict[str, str]:
    """Distinct colours for the series of one figure, in the given order: ``fixed`` ones, else
    the workload's colour (see :func:`variant_color`) when no earlier series holds it, else a
    palette colour."""
    names = [str(n) for n in names]
    return _assign(names, {n: (fixed or {}).get(n) or variant_preset(n, p) for n in names})


def color_map(names, kind: str = "kernel", p: Presentation = NO_PRESENTATION) -> dict[str, str]:
    """``{name: colour}`` for the ``names`` of one figure (``kind``: ``kernel`` or ``range``)."""
    return kernel_colors(names) if kind == "kernel" else range_colors(names, p)
