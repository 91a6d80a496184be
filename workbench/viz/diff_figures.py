"""Figures of a trace diff (:func:`workbench.diff`): A vs B per layer and per range, per step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.diff import TraceDiff
from ..textfmt import MICRO, compact
from .colors import SIDE
from .common import OTHER_RANGES, esc, layout, top_names, us

_SUMS = ["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]


def _label(d: TraceDiff, side: str) -> str:
    return f"{side}: {esc(d.a if side == 'A' else d.b, 48)}"


def _per_layer(d: TraceDiff, metric: str, range_name: str | None, title: str, ytitle: str, scale):
    import plotly.graph_objects as go

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
    fig = go.Figure()
    for side, col in (("A", f"{metric}_a"), ("B", f"{metric}_b")):
        ys, hover = [], []
        for _, g in groups:
            ys.append(scale(g[col].sum()))
            hover.append("<br>".join(
                f"{esc(r.range, 40)}: {compact(scale(getattr(r, metric + '_a')))} \u2192 "
                f"{compact(scale(getattr(r, metric + '_b')))}" for r in g.itertuples()))
        fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ys, marker_color=SIDE[side], customdata=hover,
                             hovertemplate="%{x}<br>" + side + ": %{y:,.2f}<br><br>A \u2192 B per range:<br>%{customdata}"
                                           "<extra></extra>",
                             text=[compact(y) for y in ys], textposition="outside", cliponaxis=False))
    layout(fig, title, barmode="group", yaxis_title=ytitle, xaxis_title=None)
    return fig


def layer_counts(d: TraceDiff, range: str | None = None):  # noqa: A002 - the natural name
    """Kernels per step of each layer, A vs B (grouped bars). ``range`` keeps one range name
    (``"kv_write"``): what a fusion changes per layer."""
    what = f"range {esc(range)}" if range else "all ranges"
    return _per_layer(d, "kernels", range, f"Kernels per step per layer ({what})", "kernels per step", float)


def layer_time(d: TraceDiff, range: str | None = None):  # noqa: A002
    """GPU time per step of each layer in microseconds, A vs B (grouped bars)."""
    what = f"range {esc(range)}" if range else "all ranges"
    return _per_layer(d, "gpu_time_ns", range, f"GPU time per step per layer ({what})",
                      f"GPU time per step ({MICRO})", us)


def _scope(d: TraceDiff, scope, max_ranges: int) -> tuple[pd.DataFrame, str]:
    """The rows ``diff_bars`` draws for ``scope``, indexed by their bar label, and its title."""
    r = d.ranges
    if scope is None:
        names = r["name"].astype(str)
        keep = top_names(r.groupby(names)[["gpu_time_ns_a", "gpu_time_ns_b"]].sum().max(axis=1), max_ranges)
        names = names.where(names.isin(keep), OTHER_RANGES)
        return r.groupby(names, sort=True)[_SUMS].sum(), "all layers, per range name"
    if isinstance(scope, (int, np.integer)):
        return r[r["layer"] == int(scope)].set_index("name").sort_index(kind="stable")[_SUMS], f"layer {int(scope)}"
    return r[r["range"] == str(scope)].set_index("range")[_SUMS], esc(scope, 80)


def diff_bars(d: TraceDiff, scope=None, max_ranges: int = 30):
    """Kernels and GPU time per step, A vs B, side by side, for a scope:
    ``None`` (every range name, summed over layers), a layer index (the ranges of that
    layer) or a range key (``"layer_03/kv_write"``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    g, title = _scope(d, scope, max_ranges)
    xs = [esc(x, 32) for x in g.index]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("kernels per step", f"GPU time per step ({MICRO})"),
                        horizontal_spacing=0.12)
    for side, s in (("A", "a"), ("B", "b")):
        for col, (ys, what) in enumerate((([float(v) for v in g[f"kernels_{s}"]], "kernels"),
                                          ([us(v) for v in g[f"gpu_time_ns_{s}"]], MICRO)), start=1):
            fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ys, marker_color=SIDE[side], legendgroup=side,
                                 showlegend=None if col == 1 else False, text=[compact(v) for v in ys],
                                 textposition="outside", cliponaxis=False,
                                 hovertemplate="%{x}<br>" + side + f": %{{y:,.2f}} {what}<extra></extra>"),
                          row=1, col=col)
    layout(fig, f"A vs B: {title}", barmode="group", height=400,
           legend=dict(orientation="h", yanchor="top", y=-0.12, xanchor="center", x=0.5, title_text=""))
    fig.update_layout(margin=dict(t=80, b=70))
    return fig
