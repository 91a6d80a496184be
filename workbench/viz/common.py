"""What every figure shares: layout, escaping and wrapping of names, units of time and of work,
folding many names into "other", and the normalization of the traces a figure is given.

Figures are deterministic: inputs are sorted, no random ids, so a regenerated report is
byte-identical (pass a fixed ``div_id`` to ``fig.to_html`` for that). Trace-supplied names are
HTML-escaped before they reach plotly's text rendering (which understands a subset of HTML).
Counts and times from a diff are per step. A duration is written with its unit (``fmt_ns``:
``22.0 µs``, ``1.23 ms``); a time axis is in µs, ms or s by its largest value (``textfmt.time_unit``, as tables).

Legends are vertical, right of the plot, with whole names wrapped onto several lines, and a
figure is made tall enough for its whole legend: plotly widens the right margin to fit a
legend, but a legend taller than the plot gets a scroll bar that hides entries.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..textfmt import num, time_unit  # noqa: F401  (time_unit: figures take it from here)
from ..trace.manifest import work_units
from ..trace.schema import Trace

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13)
HEIGHT = 420
OTHER_RANGES = "(other ranges)"
OTHER_COLOR = "#b0b0b0"
LEGEND_WRAP = 34       # characters per legend line
TITLE_WRAP = 90        # characters per title line
_LINE_PX = 19          # height of one legend line at FONT's size
_TITLE_PX = 24         # height of one title line (plotly draws titles 1.4 times the font)
_TITLE_TOP = 32        # from the figure's top to the bottom of the title's first line
_MARGIN = dict(l=70, r=30, t=20, b=60)
# Legends list entries in trace order, stacked bars too (plotly reverses those by default):
# the base / the emphasised come first.
SIDE_LEGEND = dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top", tracegroupgap=4, traceorder="normal")


@dataclass(frozen=True)
class Units:
    """How a figure names its work units and their time. GPU traces count kernels on streams;
    a CPU-only trace (``meta["source"]["work_units"] == "cpu_op"``) counts CPU ops on
    threads, and a figure of it must not say "GPU"; a TensorRT engine profile (trtexec) has
    engine layers, timed per inference, and no steps."""

    work: str       # one unit of work
    works: str      # several
    time: str       # their summed duration
    lane: str       # what runs them, one timeline row each
    issued: str     # what a step does with them
    step: str = "step"                 # what per-step numbers are per
    decode_step: str = "decode step"   # what a diff's per-step numbers are per
    range: str = "range"               # a named part of the trace (a diff matches them)

    @property
    def other(self) -> str:
        """The legend entry that folds the many small ones."""
        return f"(other {self.works})"

    def count(self, n: float) -> str:
        return f"{num(n)} {self.work if float(n) == 1 else self.works}"


GPU = Units("kernel", "kernels", "GPU time", "GPU stream", "kernels launched")
CPU = Units("CPU op", "CPU ops", "CPU time", "thread", "CPU ops run")
# A TensorRT engine profile (trtexec): one work unit per engine layer, its GPU time the profile's
# average over the profiled inferences; the trace has one "step", an inference.
TRT = Units("engine layer", "engine layers", "GPU time", "engine", "engine layers run", step="inference",
            decode_step="inference", range="engine layer")
MIXED = Units("kernel or CPU op", "kernels or CPU ops", "time", "stream or thread", "kernels or CPU ops")
_BY_KIND = {"kernel": GPU, "cpu_op": CPU, "trt_layer": TRT}


def _kinds(obj) -> set[str]:
    """The work-unit kinds (``kernel``, ``cpu_op``) of a trace, a manifest, a diff (its
    ``work_units``: one kind or one per side) or a collection of those."""
    if isinstance(obj, Trace):
        obj = obj.meta
    wu = getattr(obj, "work_units", None)
    if wu is not None:
        return {str(wu)} if isinstance(wu, str) else {str(w) for w in wu}
    if isinstance(obj, Mapping):
        if not obj or not all(isinstance(v, Trace) for v in obj.values()):  # a manifest
            return {work_units(obj)}
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return set().union(*(_kinds(o) for o in obj)) if obj else set()
    return {"kernel"}


def units(*objs) -> Units:
    """The words of a figure of ``objs`` (traces, manifests, diffs, or lists / dicts of them):
    their kind's when they agree (kernels, CPU ops, TensorRT profile layers), else both."""
    kinds = set().union(*(_kinds(o) for o in objs)) if objs else {"kernel"}
    return _BY_KIND.get(kinds.pop(), MIXED) if len(kinds) == 1 else MIXED


def kernel_names(p: pd.DataFrame) -> pd.Series:
    """The readable name of each projected kernel: ``display_name`` where the projection has
    one (templated names made readable), else ``short_name``."""
    return p["display_name" if "display_name" in p.columns else "short_name"].astype(str)


def esc(s, limit: int | None = None) -> str:
    """Escape a trace-supplied string for plotly text; shorten it to ``limit`` characters."""
    s = str(s)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return html.escape(s, quote=False)


_BREAK = re.compile(r"(?<=[_/.:,;\s<>()\-])")


def wrap(s, width: int = LEGEND_WRAP, max_lines: int = 8) -> str:
    """``s`` escaped and wrapped onto lines of at most about ``width`` characters (``<br>``),
    breaking after ``_ / . : , ; < > ( ) -`` or a space where it can, inside a word where it
    must; past ``max_lines`` the rest is cut (``…``): the hover still has the whole name."""
    s = str(s)
    lines: list[str] = []
    cur = ""
    for part in (p for p in _BREAK.split(s) if p):
        while len(part) > width:  # a piece longer than a line: cut it
            room = width - len(cur)
            lines.append(cur + part[:room])
            cur, part = "", part[room:]
        if len(cur) + len(part) > width and cur:
            lines.append(cur)
            cur = ""
        cur += part
    if cur or not lines:
        lines.append(cur)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: width - 1] + "\u2026"
    return "<br>".join(html.escape(x.strip() or x, quote=False) for x in lines)


def n_lines(text: str) -> int:
    return text.count("<br>") + 1


def last_part(name) -> str:
    """A range's own name, short: its last path component, without an ``nn.Module:`` style
    prefix, and of a dotted module path the last component (with its parent when the last
    is a number: ``layers.3``)."""
    s = str(name).rstrip("/").rsplit("/", 1)[-1]
    s = s.split(": ", 1)[-1] if re.match(r"^[\w.]+: ", s) else s
    if "." in s and " " not in s:
        parts = [x for x in s.split(".") if x]
        if parts:
            s = ".".join(parts[-2:]) if parts[-1].isdigit() and len(parts) > 1 else parts[-1]
    return s


def top_names(weights: pd.Series, n: int) -> set:
    """The ``n`` index labels with the largest weights (ties by label): what a figure shows
    one by one; the rest are folded into one "other" entry so figures of traces with
    thousands of names stay small and fast."""
    if len(weights) <= n:
        return set(weights.index)
    w = pd.DataFrame({"k": [str(i) for i in weights.index], "w": weights.to_numpy(dtype=float)}, index=weights.index)
    w = w.sort_values(["w", "k"], ascending=[False, True], kind="stable")
    return set(w.index[:n])


def fmt_ns(ns) -> str:
    """A duration for a reader: ``850 ns``, ``22.0 µs``, ``486 µs``, ``1.23 ms``, ``2.50 s``
    (three significant digits, the unit that keeps the number below 1000)."""
    x = float(ns)
    if x != x:
        return "n/a"
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "\u00b5s")):
        if abs(x) >= div:
            v = x / div
            break
    else:
        return f"{x:.0f} ns"
    if abs(v) >= 999.5:
        return f"{v:,.0f} {unit}"
    return f"{v:.0f} {unit}" if abs(v) >= 99.95 else f"{v:.1f} {unit}" if abs(v) >= 9.995 else f"{v:.2f} {unit}"


def row_ticks(names, width: int = 30, max_lines: int = 2) -> list[str]:
    """The tick texts of horizontal bars' rows: each name wrapped (cut past ``max_lines``, the
    hover has it whole), beside its bars: long names never rotate into another panel."""
    return [wrap(n, width, max_lines) for n in names]


def row_axes(fig, ticks: list[str], **kw) -> None:
    """Rows by position (two names that wrap alike stay two rows), the first on top."""
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(ticks))), ticktext=ticks, autorange="reversed",
                     automargin=True, **kw)


def rows_height(ticks: list[str], per_row: int = 30, least: int = 300) -> int:
    """A figure height that gives each row ``per_row`` pixels, and at least room for the
    longest name's lines (rows are spaced evenly: the tallest name sets the spacing)."""
    per_row = max(per_row, 17 * max((n_lines(t) for t in ticks), default=1) + 4)
    return max(least, 150 + per_row * len(ticks))


def legend_height(entries, title: bool = True) -> int:
    """Pixels a vertical legend of ``entries`` (legend texts, ``<br>`` separating lines) takes."""
    lines = sum(n_lines(e) for e in entries)
    return lines * _LINE_PX + len(entries) * 5 + (26 if title else 0) + 10


def layout(fig, title: str, **kw) -> None:
    """Title (wrapped), font, margins, a vertical legend right of the plot, and a height that
    fits the plot (``height``) and the whole legend (``legend_entries``: their texts). Bar
    labels that would not fit at a readable size are hidden (``uniformtext``), not shrunk."""
    title = wrap_title(title)
    # The title hangs from the figure's top in a top margin made for its lines; ``extra_top``
    # keeps it off subplot titles. Plotly anchors a title by its first line and stacks the others
    # below it, so the anchor is the first line's bottom, ``_TITLE_TOP`` from the top (in pixels
    # of the whole figure: not the plot area's, which tick labels' automargin changes). (Not
    # plotly's title automargin: its relayout leaves bars where the old margin put them.)
    margin = dict(_MARGIN, **kw.pop("margin", {}))
    pad = 10 + kw.pop("extra_top", 0)
    margin["t"] += _TITLE_PX * n_lines(title) + pad
    entries = kw.pop("legend_entries", ())
    legend = {**SIDE_LEGEND, "title_text": "", **kw.pop("legend", {})}
    height = max(kw.pop("height", HEIGHT), legend_height(entries, bool(legend.get("title_text"))) + margin["t"]
                 + margin["b"])
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", xref="container", y=1 - _TITLE_TOP / height, yanchor="bottom",
                   yref="container"),
        font=FONT, template="plotly_white", height=height, margin=margin, legend=legend,
        hoverlabel=dict(namelength=-1, align="left"), uniformtext=kw.pop("uniformtext", dict(minsize=10, mode="hide")),
        **kw,
    )


def wrap_title(title: str) -> str:
    """A title already escaped by its figure, broken at spaces onto lines of ``TITLE_WRAP``."""
    if "<br>" in title or len(title) <= TITLE_WRAP:
        return title
    lines, cur = [], ""
    for word in title.split(" "):
        if cur and len(cur) + 1 + len(word) > TITLE_WRAP:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return "<br>".join(lines + [cur])


def labelled(given) -> list[tuple[str, Trace]]:
    """``Trace`` | ``{label: Trace}`` | ``[Trace, ...]`` -> [(label, Trace)] (names and paths
    are opened with :func:`workbench.open_trace`)."""
    from ..trace import open_trace

    if isinstance(given, (Trace, str)):
        given = [given]
    items = list(given.items()) if isinstance(given, Mapping) else [(None, t) for t in given]
    out = []
    for label, t in items:
        t = t if isinstance(t, Trace) else open_trace(t)
        out.append((str(label) if label is not None else t.label, t))
    return out
