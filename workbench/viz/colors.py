"""Colours: the same for the same thing in every figure of a session, and distinct within
every figure.

A kernel keeps one colour across the figures of a session (a notebook's kernel process): the
first figure that draws it gives it one, and every later figure draws it so. The colour given
is the one its name hashes to among the palette's first, strongest colours, unless another
kernel already holds that one, then the next free one: so a kernel mostly has the same colour
in every session and report too, and two kernels never share one. Kernels never take a colour
a workload gives its regions (``kv_write``'s red): a timeline draws regions and kernels
together. A figure that compares two traces emphasises the kernels that changed (their
colours) and mutes the unchanged ones (the same colours lightened), so the subject of a change
stands out. Ranges without a workload's colour are given theirs the same way (a book of
their own). :func:`color_scope` starts a fresh assignment for the figures drawn inside it: a
report uses one, so that its colours do not depend on what the process drew before.

A range or variant takes the colour its workload's presentation gives it
(:class:`workbench.workloads.Presentation`), so ``kv_write`` is the same red in every figure,
notebook and report; the variants of one figure take palette colours that no name of the
figure already holds.
"""

from __future__ import annotations

import colorsys
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from ..textfmt import natural_key
from ..workloads import NO_PRESENTATION, Presentation, presentation_of, presentations

# Ordered so that the first colours are the most distinct (tab10, then darker and brighter
# hues that tab10 lacks, the most distinct from tab10's first); greys left out: grey is
# "(other ...)" and the base side of a comparison. Beyond these, golden-angle hues (``_nth``)
# keep colours distinct however many.
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#1616a7", "#00a08b", "#b68100", "#750d86", "#fb00d1", "#2e91e5", "#1ca71c", "#eb663b", "#6c7c32",
    "#862a16", "#da16ff", "#fc0080", "#511cfb", "#778aae", "#620042",
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


def _assign(names: Iterable[str], preset: Mapping[str, str | None]) -> dict[str, str]:
    """``{name: colour}`` for ``names``, in order: a name's preset colour unless an earlier name
    holds it, else the next palette colour no name holds."""
    names = list(dict.fromkeys(str(n) for n in names))
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in names:
        c = preset.get(n)
        if c and c.lower() not in used:
            out[n] = c
            used.add(c.lower())
    i = 0
    for n in names:
        if n in out:
            continue
        while _nth(i) in used:
            i += 1
        out[n] = _nth(i)
        used.add(out[n])
    return {n: out[n] for n in names}


# How many of the palette's first free colours a name's hash picks among: the strongest ones.
_STRONG = 8


class _Book:
    """Colours handed out once per name and kept (see the module docstring)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.given: dict[str, str] = {}
        self._held: set[str] = set()
        self._beyond = len(PALETTE)  # the next golden-angle colour to try past the palette

    def colors(self, names: Iterable[str]) -> dict[str, str]:
        new = [n for n in names if n not in self.given]
        if new:
            free = [c for c in PALETTE if c not in _reserved()]
            for name in new:
                at = _index(f"{self.kind}:{name}", min(_STRONG, len(free))) if free else 0
                # From the hashed one on through the strong ones, then the rest, then past the palette.
                order = free[at:_STRONG] + free[:at] + free[_STRONG:]
                c = next((c for c in order if c not in self._held), None)
                while c is None or c in self._held:
                    c, self._beyond = _nth(self._beyond), self._beyond + 1
                self.given[name] = c
                self._held.add(c)
        return {n: self.given[n] for n in names}


def _reserved() -> set[str]:
    """The colours a registered workload gives its regions, and those of the fixed ranges."""
    return {c for p in presentations() for n, c in p.colors.items() if n in p.regions} | set(_FIXED.values())


# The books figures take kernel and range colours from: the session's, or a color_scope's.
_SESSION = {"kernel": _Book("kernel"), "range": _Book("range")}
_BOOKS: ContextVar[dict[str, _Book] | None] = ContextVar("workbench_viz_colors", default=None)


def _book(kind: str) -> _Book:
    return (_BOOKS.get() or _SESSION)[kind]


@contextmanager
def color_scope() -> Iterator[None]:
    """Figures drawn inside take kernel and range colours from a fresh assignment, not from the
    session's (see the module docstring): colours that depend only on the figures inside."""
    token = _BOOKS.set({"kernel": _Book("kernel"), "range": _Book("range")})
    try:
        yield
    finally:
        _BOOKS.reset(token)


def kernel_colors(names: Iterable[str], emphasis: Iterable[str] | None = None) -> dict[str, str]:
    """The colours of the kernels of one figure, each the one it has in every figure of the
    session (see the module docstring), in figure order: the ``emphasis`` kernels (those a
    comparison changed) first, then the rest, by name (numbers read as numbers), muted. With
    no emphasis (or all of them) no kernel is muted."""
    names = sorted({str(n) for n in names}, key=natural_key)
    emph = {str(n) for n in emphasis or ()} & set(names)
    colors = _book("kernel").colors(names)  # given in name order: the same order each time
    if not emph or emph == set(names):
        return colors
    return {**{n: colors[n] for n in names if n in emph}, **{n: muted(colors[n]) for n in names if n not in emph}}


def trace_presentation(trace=None) -> Presentation:
    """The presentation of ``trace``'s workload (a Trace or a manifest dict); the empty one
    for None or a trace whose manifest names no registered workload."""
    return presentation_of(getattr(trace, "meta", trace))


def _index(name: str, n: int) -> int:
    return int.from_bytes(hashlib.sha1(str(name).encode("utf-8", "surrogatepass")).digest()[:4], "big") % n


def range_color(name: str, p: Presentation = NO_PRESENTATION) -> str:
    """Colour of one range (innermost name such as ``kv_write``): the workload's colour for
    it, else the one it has in every figure of the session (see the module docstring)."""
    s = str(name)
    return p.colors.get(s) or _FIXED.get(s) or _book("range").colors([s])[s]


def range_colors(names: Iterable[str], p: Presentation = NO_PRESENTATION) -> dict[str, str]:
    """The colours of the ranges of one figure (:func:`range_color`), by name."""
    names = sorted({str(n) for n in names}, key=natural_key)
    booked = _book("range").colors([n for n in names if not (p.colors.get(n) or _FIXED.get(n))])
    return {n: p.colors.get(n) or _FIXED.get(n) or booked[n] for n in names}


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
