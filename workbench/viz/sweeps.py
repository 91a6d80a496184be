"""Sweep figures: a measured value against a swept parameter (latency vs context length)."""

from __future__ import annotations

import pandas as pd

from ..workloads import presentation
from .colors import variant_color
from .common import HEIGHT, esc, layout


def sweep(data, x: str = "context", y: str = "median_ms", color: str = "variant", lo: str | None = "min_ms",
          hi: str | None = "max_ms", *, dash: str | None = None, facet: str | None = None, log_x: bool = True,
          title: str | None = None, x_title: str | None = None, y_title: str | None = None, workload=None):
    """Lines with min–max error bars: e.g. decode latency against context length, full vs
    bucketed. ``data``: a DataFrame or a list of records with columns ``x``, ``y``, ``color``
    and optionally ``lo``/``hi``. ``dash`` names a column (e.g. ``engine``) drawn as line
    styles; ``facet`` names a column drawn as side-by-side panels, each with its own y axis
    (use it when panels differ so much in scale that one axis would flatten the smaller).
    ``workload`` (a registered name or a workload object; default: a DataFrame's
    ``attrs["workload"]``, which :func:`workbench.viz.load_sweep` sets) colours the series as
    that workload presents its variants; without one they take stable-hash colours."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if workload is None and isinstance(data, pd.DataFrame):
        workload = data.attrs.get("workload")
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
    df = df.sort_values([c for c in (facet, color, dash) if c] + [x], kind="stable")
    if facet:
        fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[f"{esc(facet)}: {esc(p, 40)}" for p in panels],
                            horizontal_spacing=0.08)
    else:
        fig = go.Figure()
    for col, panel in enumerate(panels, start=1):
        part = df[df[facet] == panel] if facet else df
        groups = [(v, d) for v in sorted(part[color].unique())
                  for d in (sorted(part.loc[part[color] == v, dash].unique()) if dash else [None])]
        for var, style in groups:
            sub = part[(part[color] == var) & ((part[dash] == style) if dash else True)]
            label = f"{var} \u00b7 {style}" if dash else var
            ys = [float(v) for v in sub[y]]
            err = None
            if lo and hi and lo in sub and hi in sub:
                err = dict(type="data", symmetric=False, array=[float(h) - v for h, v in zip(sub[hi], ys)],
                           arrayminus=[v - float(low) for low, v in zip(sub[lo], ys)], thickness=1.5, width=6)
            trace = go.Scatter(
                name=esc(label, 60), x=[float(v) for v in sub[x]] if numeric else [esc(v, 40) for v in sub[x]], y=ys,
                mode="lines+markers", error_y=err, legendgroup=esc(label, 60), showlegend=col == 1,
                line=dict(color=variant_color(var, pres), width=2.5, dash=styles.get(style, "solid")), marker=dict(size=9),
                hovertemplate=(f"{esc(label, 60)}" + (f" ({esc(panel, 40)})" if facet else "")
                               + f"<br>{esc(x)} %{{x{':,' if numeric else ''}}}<br>{esc(y)} %{{y:,.3f}}<extra></extra>"))
            if facet:
                fig.add_trace(trace, row=1, col=col)
            else:
                fig.add_trace(trace)
    layout(fig, title or f"{esc(y)} vs {esc(x)}", height=HEIGHT + (40 if facet else 0))
    fig.update_xaxes(title_text=x_title if x_title is not None else esc(x))
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=y_title if y_title is not None else esc(y), col=1) if facet else \
        fig.update_yaxes(title_text=y_title if y_title is not None else esc(y))
    if facet:
        fig.update_layout(margin=dict(t=110), legend=dict(orientation="h", yanchor="bottom", y=1.12, xanchor="right",
                                                          x=1.0, title_text=""))
    if log_x:
        ticks = sorted({float(v) for v in df[x]})
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{v:g}" for v in ticks])
    return fig
