"""Figures of a trace diff (:func:`workbench.diff`): A (base) vs B (fix) per layer and per
range, per step; A left of B in every group and first in the legend."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.diff import TraceDiff
from ..textfmt import compact, num
from .colors import SIDE
from .common import OTHER_RANGES, esc, fmt_ns, layout, time_unit, top_names, units, wrap

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


def _per_layer(d: TraceDiff, metric: str, range_name: str | None, title: str):
    import plotly.graph_objects as go

    u = units(d)
    lay = d.layers
    if range_name is not None:
        lay = lay[lay["range"].astype(str) == str(range_name)]
    lay = lay.sort_values(["layer", "range"], kind="stable")
    layered = lay[lay["layer"] >= 0]
    if len(layered):
        groups = list(layered.groupby("layer", sort=True))
        xs = [f"layer {int(k)}" for k, _ in groups]
    else:  # no layer ranges: one bar group per range name (the 30 largest, the rest as one)
        names = lay["range"].astype(str)
        keep = top_names(lay.groupby(names)[[f"{metric}_a", f"{metric}_b"]].sum().max(axis=1), 30)
        lay = lay.assign(range=names.where(names.isin(keep), OTHER_RANGES))
        groups = list(lay.groupby("range", sort=True))
        xs = [esc(k, 40) for k, _ in groups]
    if metric == "kernels":
        div, unit, fmt, ytitle = 1.0, "", num, f"{u.works} per step"
    else:
        top = max((g[f"{metric}_{s}"].sum() for _, g in groups for s in "ab"), default=0)
        div, unit = time_unit(top)
        fmt, ytitle = fmt_ns, f"{u.time} per step ({unit})"
    fig = go.Figure()
    for side, col in (("A", f"{metric}_a"), ("B", f"{metric}_b")):
        ys, hover = [], []
        for _, g in groups:
            ys.append(float(g[col].sum()) / div)
            hover.append([fmt(g[col].sum()), "<br>".join(
                f"{esc(r.range, 40)}: {fmt(getattr(r, metric + '_a'))} \u2192 {fmt(getattr(r, metric + '_b'))}"
                for r in g.itertuples())])
        fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ys, marker_color=SIDE[side], customdata=hover,
                             hovertemplate="%{x}<br>" + side + ": %{customdata[0]}<br><br>A \u2192 B per range:<br>"
                                           "%{customdata[1]}<extra></extra>",
                             text=_labels(ys, len(groups)), textposition="outside", cliponaxis=False))
    layout(fig, title, barmode="group", yaxis_title=ytitle, xaxis_title=None,
           legend_entries=[tr.name for tr in fig.data])
    return fig


def layer_counts(d: TraceDiff, range: str | None = None):  # noqa: A002 - the natural name
    """Kernels (CPU ops of a CPU-only trace) per step of each layer, A vs B (grouped bars).
    ``range`` keeps one range name (``"kv_write"``): what a fusion changes per layer."""
    what = f"range {esc(range)}" if range else "all ranges"
    return _per_layer(d, "kernels", range, f"{_cap(units(d).works)} per step per layer ({what})")


def layer_time(d: TraceDiff, range: str | None = None):  # noqa: A002
    """GPU time (CPU time of a CPU-only trace) per step of each layer, A vs B (grouped bars)."""
    what = f"range {esc(range)}" if range else "all ranges"
    return _per_layer(d, "gpu_time_ns", range, f"{units(d).time} per step per layer ({what})")


def _scope(d: TraceDiff, scope, max_ranges: int) -> tuple[pd.DataFrame, str]:
    """The rows ``diff_bars`` draws for ``scope``, indexed by their bar label, and its title: for
    all layers or one, the per-decode-step ranges (``d.per_step()``); a range key as it is."""
    if isinstance(scope, str):
        r = d.ranges
        return r[r["range"] == str(scope)].set_index("range")[_SUMS], esc(scope, 80)
    r = d.per_step()
    if scope is None:
        names = r["name"].astype(str)
        keep = top_names(r.groupby(names)[["gpu_time_ns_a", "gpu_time_ns_b"]].sum().max(axis=1), max_ranges)
        names = names.where(names.isin(keep), OTHER_RANGES)
        return r.groupby(names, sort=True)[_SUMS].sum(), "all layers, per range name"
    if isinstance(scope, (int, np.integer)):
        return r[r["layer"] == int(scope)].set_index("name").sort_index(kind="stable")[_SUMS], f"layer {int(scope)}"
    raise ValueError(f"scope {scope!r}: None, a layer index or a range key")


def diff_bars(d: TraceDiff, scope=None, max_ranges: int = 30):
    """Kernels and GPU time per step (CPU ops and CPU time of CPU-only traces), A vs B, side by
    side, for a scope: ``None`` (every range name, summed over layers), a layer index (the
    ranges of that layer) or a range key (``"layer_03/kv_write"``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    u = units(d)
    g, title = _scope(d, scope, max_ranges)
    xs = [esc(x, 32) for x in g.index]
    div, unit = time_unit(g[["gpu_time_ns_a", "gpu_time_ns_b"]].to_numpy().max() if len(g) else 0)
    # One above the other: side by side, a scope of many ranges leaves each bar too thin to read.
    fig = make_subplots(rows=2, cols=1, subplot_titles=(f"{u.works} per decode step", f"{u.time} per decode step ({unit})"),
                        vertical_spacing=0.2, shared_xaxes=True)
    for side, s in (("A", "a"), ("B", "b")):
        counts = [float(v) for v in g[f"kernels_{s}"]]
        times = [float(v) for v in g[f"gpu_time_ns_{s}"]]
        for row, (ys, shown) in enumerate(((counts, [u.count(v) for v in counts]),
                                           ([v / div for v in times], [fmt_ns(v) for v in times])), start=1):
            fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ys, marker_color=SIDE[side], legendgroup=side,
                                 showlegend=None if row == 1 else False, text=_labels(ys, len(xs)),
                                 textposition="outside", cliponaxis=False, customdata=shown,
                                 hovertemplate="%{x}<br>" + side + ": %{customdata}<extra></extra>"),
                          row=row, col=1)
    layout(fig, f"A vs B: {title}", barmode="group", height=560, extra_top=20,
           legend_entries=[tr.name for tr in fig.data if tr.showlegend is not False])
    fig.update_xaxes(automargin=True, showticklabels=True)
    return fig
