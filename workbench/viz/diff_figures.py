"""Figures of a trace diff (:func:`workbench.diff`): A (base) vs B (fix) per layer and per
range, per step (per inference for a TensorRT engine); A before B in every group and first in
the legend.

Layers run along the x axis by number. Named groups (ranges, engine layers) are rows of
horizontal bars, in name order with numbers read as numbers (``Conv_3`` before ``Conv_10``):
their names, however long, are wrapped beside the bars, never rotated into the panel below.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.diff import TraceDiff
from ..textfmt import compact, natural_key, num
from .colors import SIDE
from .common import (OTHER_RANGES, esc, fmt_ns, layout, row_axes, row_ticks, rows_height, time_unit, top_names, units,
                     wrap)

_SUMS = ["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]


def _label(d: TraceDiff, side: str) -> str:
    return wrap(f"{side}: {d.a if side == 'A' else d.b}")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _labels(ys: list[float], groups: int) -> list[str] | None:
    """Value labels over two bars a group, or None where they would not fit side by side (a
    plot ~600 px wide, ~8 px a character): the hover still gives every value."""
    text = [compact(y) for y in ys]
    return text if groups * 2 * 8 * max((len(t) for t in text), default=0) <= 600 else None


def _natural(index) -> list:
    """``index`` in name order, numbers read as numbers, "(other ...)" last."""
    return sorted(index, key=lambda n: (str(n).startswith("("), natural_key(n)))


def _hbar(go, d: TraceDiff, side: str, names: list[str], xs: list[float], shown: list[str], **kw):
    """One side's horizontal bars over the rows ``names`` (:func:`~.common.row_axes`), the
    values ``shown`` on the bars and in the hover."""
    return go.Bar(name=_label(d, side), orientation="h", y=list(range(len(names))), x=xs, marker_color=SIDE[side],
                  legendgroup=side, text=shown, textposition="outside", cliponaxis=False,
                  customdata=[[esc(n, 200), v] for n, v in zip(names, shown)],
                  hovertemplate="%{customdata[0]}<br>" + side + ": %{customdata[1]}<extra></extra>", **kw)


def _per_layer(d: TraceDiff, metric: str, range_name: str | None, title: str):
    import plotly.graph_objects as go

    u = units(d)
    lay = d.layers
    if range_name is not None:
        lay = lay[lay["range"].astype(str) == str(range_name)]
    layered = lay[lay["layer"] >= 0]
    if metric == "kernels":
        div, unit, fmt, what = 1.0, "", num, f"{u.works} per {u.step}"
    else:
        div, unit = time_unit(np.nanmax(lay[[f"{metric}_a", f"{metric}_b"]].to_numpy()) if len(lay) else 0)
        fmt, what = fmt_ns, f"{u.time} per {u.step} ({unit})"
    fig = go.Figure()
    if not len(layered):  # no layer ranges: one row per range name (the 30 largest, the rest as one)
        names = lay["range"].astype(str)
        keep = top_names(lay.groupby(names)[[f"{metric}_a", f"{metric}_b"]].sum().max(axis=1), 30)
        g = lay.groupby(names.where(names.isin(keep), OTHER_RANGES))[[f"{metric}_a", f"{metric}_b"]].sum()
        rows = _natural(g.index)
        for side, col in (("A", f"{metric}_a"), ("B", f"{metric}_b")):
            vals = [float(g.loc[n, col]) for n in rows]
            fig.add_trace(_hbar(go, d, side, rows, [v / div for v in vals], [fmt(v) for v in vals]))
        ticks = row_ticks(rows)
        layout(fig, title, barmode="group", xaxis_title=what, height=rows_height(ticks), margin=dict(l=20),
               legend_entries=[tr.name for tr in fig.data])
        row_axes(fig, ticks)
        return fig
    groups = list(layered.groupby("layer", sort=True))
    for side, col in (("A", f"{metric}_a"), ("B", f"{metric}_b")):
        ys, hover = [], []
        for _, g in groups:
            ys.append(float(g[col].sum()) / div)
            hover.append([fmt(g[col].sum()), "<br>".join(
                f"{esc(r.range, 40)}: {fmt(getattr(r, metric + '_a'))} \u2192 {fmt(getattr(r, metric + '_b'))}"
                for r in sorted(g.itertuples(), key=lambda r: natural_key(r.range)))])
        fig.add_trace(go.Bar(name=_label(d, side), x=[int(k) for k, _ in groups], y=ys, marker_color=SIDE[side],
                             customdata=hover,
                             hovertemplate="layer %{x}<br>" + side + ": %{customdata[0]}<br><br>A \u2192 B per range:"
                                           "<br>%{customdata[1]}<extra></extra>",
                             text=_labels(ys, len(groups)), textposition="outside", cliponaxis=False))
    layout(fig, title, barmode="group", yaxis_title=what, xaxis_title="layer",
           legend_entries=[tr.name for tr in fig.data])
    # Layers by number: every one ticked while they fit, else plotly's round steps.
    fig.update_xaxes(dtick=1 if len(groups) <= 24 else None, tickformat="d")
    return fig


def layer_counts(d: TraceDiff, range: str | None = None):  # noqa: A002 - the natural name
    """Kernels (CPU ops of a CPU-only trace) per step of each layer, A vs B (grouped bars).
    ``range`` keeps one range name (``"kv_write"``): what a fusion changes per layer. A diff
    without layers (a TensorRT engine) gets one row per range instead."""
    u = units(d)
    what = f"{u.range} {esc(range)}" if range else f"all {u.range}s"
    per = "per layer" if (d.layers["layer"] >= 0).any() else f"per {u.range}"
    return _per_layer(d, "kernels", range, f"{_cap(u.works)} per {u.step} {per} ({what})")


def layer_time(d: TraceDiff, range: str | None = None):  # noqa: A002
    """GPU time (CPU time of a CPU-only trace) per step of each layer, A vs B (grouped bars)."""
    u = units(d)
    what = f"{u.range} {esc(range)}" if range else f"all {u.range}s"
    per = "per layer" if (d.layers["layer"] >= 0).any() else f"per {u.range}"
    return _per_layer(d, "gpu_time_ns", range, f"{u.time} per {u.step} {per} ({what})")


def _scope(d: TraceDiff, scope, max_ranges: int) -> tuple[pd.DataFrame, str]:
    """The rows ``diff_bars`` draws for ``scope``, indexed by their row name, in name order, and
    its title: for all layers or one, the per-decode-step ranges (``d.per_step()``); a range
    key as it is."""
    if isinstance(scope, str):
        r = d.ranges
        return r[r["range"] == str(scope)].set_index("range")[_SUMS], esc(scope, 80)
    r = d.per_step()
    if scope is None:
        names = r["name"].astype(str)
        keep = top_names(r.groupby(names)[["gpu_time_ns_a", "gpu_time_ns_b"]].sum().max(axis=1), max_ranges)
        names = names.where(names.isin(keep), OTHER_RANGES)
        g = r.groupby(names, sort=False)[_SUMS].sum()
        every = "every engine layer" if units(d).range == "engine layer" else "all layers, per range name"
        return g.loc[_natural(g.index)], every
    if isinstance(scope, (int, np.integer)):
        g = r[r["layer"] == int(scope)].set_index("name")[_SUMS]
        return g.loc[_natural(g.index)], f"layer {int(scope)}"
    raise ValueError(f"scope {scope!r}: None, a layer index or a range key")


def diff_bars(d: TraceDiff, scope=None, max_ranges: int = 30):
    """Kernels and GPU time per decode step (CPU ops and CPU time of CPU-only traces; engine
    layers and GPU time per inference of TensorRT engines), A vs B, in two panels side by side,
    one row per range, for a scope: ``None`` (every range name, summed over layers), a layer
    index (the ranges of that layer) or a range key (``"layer_03/kv_write"``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    u = units(d)
    g, title = _scope(d, scope, max_ranges)
    names = [str(x) for x in g.index]
    div, unit = time_unit(g[["gpu_time_ns_a", "gpu_time_ns_b"]].to_numpy().max() if len(g) else 0)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.08,
                        subplot_titles=(f"{u.works} per {u.decode_step}", f"{u.time} per {u.decode_step} ({unit})"))
    top = [1.0, 1.0]
    for side, s in (("A", "a"), ("B", "b")):
        counts = [float(v) for v in g[f"kernels_{s}"]]
        times = [float(v) for v in g[f"gpu_time_ns_{s}"]]
        for col, (xs, shown) in enumerate(((counts, [num(v) for v in counts]),
                                           ([v / div for v in times], [fmt_ns(v) for v in times])), start=1):
            top[col - 1] = max([top[col - 1], *xs])
            fig.add_trace(_hbar(go, d, side, names, xs, shown, showlegend=None if col == 1 else False), row=1, col=col)
    ticks = row_ticks(names)
    layout(fig, f"A vs B: {title}", barmode="group", height=rows_height(ticks), extra_top=20,
           margin=dict(l=20), legend_entries=[tr.name for tr in fig.data if tr.showlegend is not False])
    row_axes(fig, ticks)
    # Room right of the longest bar for its value.
    for col, t in enumerate(top, start=1):
        fig.update_xaxes(range=[0, t * 1.3], rangemode="tozero", row=1, col=col)
    return fig
