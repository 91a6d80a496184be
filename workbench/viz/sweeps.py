"""Sweep figures: a measured value against a swept parameter (latency vs context length).

Series come base first: in ``order`` when given, else the workload's default pair (its base
value, then its fix value), then as they first appear in the data.
"""

from __future__ import annotations

import re

import pandas as pd

from ..textfmt import ms
from ..workloads import presentation
from .colors import variant_colors
from .common import HEIGHT, esc, layout, wrap


def _series_order(values: list[str], order, pres) -> list[str]:
    """``values`` (first-appearance order) with the base series first; see the module."""
    rank = {str(v): i for i, v in enumerate(order or ())}
    pair = pres.default_pair
    words = (pair.a, pair.b) if pair is not None else ()

    def key(v: str):
        if v in rank:
            return (0, rank[v])
        hit = [i for i, w in enumerate(words) if re.search(rf"(^|[^a-z]){re.escape(w.lower())}([^a-z]|$)", v.lower())]
        return (1, hit[0]) if len(hit) == 1 else (2, 0)

    return sorted(values, key=key)


def sweep(data, x: str = "context", y: str = "median_ms", color: str = "variant", lo: str | None = "min_ms",
          hi: str | None = "max_ms", *, dash: str | None = None, facet: str | None = None, log_x: bool = True,
          title: str | None = None, x_title: str | None = None, y_title: str | None = None, workload=None,
          order=None):
    """Lines with min–max error bars: e.g. decode latency against context length, full vs
    bucketed. ``data``: a DataFrame or a list of records with columns ``x``, ``y``, ``color``
    and optionally ``lo``/``hi``. ``dash`` names a column (e.g. ``engine``) drawn as line
    styles; ``facet`` names a column drawn as side-by-side panels, each with its own y axis
    (use it when panels differ so much in scale that one axis would flatten the smaller).
    ``workload`` (a registered name or a workload object; default: a DataFrame's
    ``attrs["workload"]``, which :func:`workbench.viz.load_sweep` sets) colours the series as
    that workload presents its variants; without one they take palette colours. ``order``
    (default: a DataFrame's ``attrs["order"]``): the series (``color`` values) in legend
    order, the base first (see the module)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if isinstance(data, pd.DataFrame):
        workload = data.attrs.get("workload") if workload is None else workload
        order = data.attrs.get("order") if order is None else order
    pres = presentation(workload)
    df = pd.DataFrame(list(data) if not isinstance(data, pd.DataFrame) else data).copy()
    missing = [c for c in (x, y) if c not in df]
    if missing:
        raise ValueError(f"sweep data lacks column(s) {', '.join(missing)}")
    if color not in df:
        df[color] = "all"
    df[color] = df[color].astype(str)
    numeric = pd.api.types.is_numeric_dtype(df[x])
    log_x = log_x and numeric and bool((df[x] > 0).all())
    if dash and dash in df:
        df[dash] = df[dash].astype(str)
        styles = dict(zip(sorted(df[dash].unique()), ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")))
    else:
        dash, styles = None, {}
    if facet and facet in df:
        df[facet] = df[facet].astype(str)
        panels = sorted(df[facet].unique())
    else:
        facet, panels = None, [None]
    series = _series_order(list(dict.fromkeys(df[color])), order, pres)
    colors = variant_colors(series, pres)
    df = df.sort_values([c for c in (facet, dash) if c] + [x], kind="stable")
    if facet:
        fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[f"{esc(facet)}: {esc(p, 40)}" for p in panels],
                            horizontal_spacing=0.08)
    else:
        fig = go.Figure()
    for col, panel in enumerate(panels, start=1):
        part = df[df[facet] == panel] if facet else df
        present = set(part[color])
        groups = [(v, d) for v in series if v in present
                  for d in (sorted(part.loc[part[color] == v, dash].unique()) if dash else [None])]
        for var, style in groups:
            sub = part[(part[color] == var) & ((part[dash] == style) if dash else True)]
            label = f"{var} \u00b7 {style}" if dash else var
            ys = [float(v) for v in sub[y]]
            err = None
            if lo and hi and lo in sub and hi in sub:
                err = dict(type="data", symmetric=False, array=[float(h) - v for h, v in zip(sub[hi], ys)],
                           arrayminus=[v - float(low) for low, v in zip(sub[lo], ys)], thickness=1.5, width=6)
            spread = [f" (min\u2013max {ms(low)}\u2013{ms(h)})" for low, h in zip(sub[lo], sub[hi])] \
                if err else [""] * len(ys)
            trace = go.Scatter(
                name=wrap(label), x=[float(v) for v in sub[x]] if numeric else [esc(v, 40) for v in sub[x]], y=ys,
                mode="lines+markers", error_y=err, legendgroup=esc(label, 60), showlegend=col == 1,
                line=dict(color=colors[var], width=2.5, dash=styles.get(style, "solid")), marker=dict(size=9),
                customdata=[[ms(v), sp] for v, sp in zip(ys, spread)],
                hovertemplate=(f"{esc(label, 60)}" + (f" ({esc(panel, 40)})" if facet else "")
                               + f"<br>{esc(x)} %{{x{':,' if numeric else ''}}}<br>{esc(y)} %{{customdata[0]}}"
                               "%{customdata[1]}<extra></extra>"))
            if facet:
                fig.add_trace(trace, row=1, col=col)
            else:
                fig.add_trace(trace)
    layout(fig, title or f"{esc(y)} vs {esc(x)}", height=HEIGHT + (40 if facet else 0), extra_top=30 if facet else 0,
           legend_entries=[tr.name for tr in fig.data if tr.showlegend])
    fig.update_xaxes(title_text=x_title if x_title is not None else esc(x))
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=y_title if y_title is not None else esc(y), col=1) if facet else \
        fig.update_yaxes(title_text=y_title if y_title is not None else esc(y))
    if log_x:
        ticks = sorted({float(v) for v in df[x]})
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{v:g}" for v in ticks])
    return fig
