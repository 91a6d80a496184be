"""Figures of one or more traces: range composition by kernel, launches per step, summary bars.

Several traces are drawn in the order given, the first (the base) first: left in a group of
bars, first in a legend.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.projection import project
from ..analysis.steps import trace_steps_info
from ..textfmt import natural_key, num
from .colors import SIDE, kernel_colors, range_colors, trace_presentation, variant_colors, variant_preset
from .common import (
    OTHER_COLOR,
    OTHER_RANGES,
    esc,
    fmt_ns,
    kernel_names,
    labelled,
    last_part,
    layout,
    n_lines,
    row_axes,
    row_ticks,
    rows_height,
    time_unit,
    top_names,
    units,
    wrap,
)


def _changed(df: pd.DataFrame, a: str, b: str, other: str) -> set[str]:
    """Kernels a comparison changed: their count per step differs between traces ``a`` and ``b``
    (or one lacks them), or their time moved by at least 20% and 1% of the larger total (what
    a change of shapes, not of counts, does: bucketed attention)."""
    if not len(df) or not {a, b} <= set(df["trace"]):
        return set()
    g = df.groupby(["kernel", "trace"], sort=True)[["kernels", "time_ns"]].sum().unstack("trace", fill_value=0.0)
    ka, kb, ta, tb = g["kernels"][a], g["kernels"][b], g["time_ns"][a], g["time_ns"][b]
    total = max(float(ta.sum()), float(tb.sum()), 1.0)
    moved = ((ta - tb).abs() >= 0.2 * np.maximum(ta, tb)) & ((ta - tb).abs() >= 0.01 * total)
    return {str(n) for n in g.index[((ka - kb).abs() > 1e-9) | moved] if n != other}


def range_composition(traces, metric: str = "gpu_time", per_step: bool = True, step_regex: str | None = None,
                      max_kernels: int = 15, max_ranges: int = 30, emphasis=None):
    """What each range is made of: one row of stacked horizontal bars per range name
    (innermost range, summed over layers; names in order, numbers read as numbers), one stack
    segment per kernel. Several traces are panels side by side on one axis, the first (the
    base) left, and the kernels that changed between the first two traces are drawn in strong
    colours, the others muted (``emphasis``: the kernels to stand out instead). ``metric``:
    ``gpu_time`` or ``kernels``. ``per_step``: decode work per decode step (prefill left
    out), else everything captured."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if metric not in ("gpu_time", "kernels"):
        raise ValueError("metric must be 'gpu_time' or 'kernels'")
    items = labelled(traces)
    u = units([t for _, t in items])
    rows = []
    for label, t in items:
        p = project(t)
        n = 1
        if per_step:
            p = p[p["phase"] != "prefill"]
            n = max(trace_steps_info(t, step_regex).count(), 1)
        g = p.assign(kernel=kernel_names(p)).groupby(["range", "kernel"], observed=True, sort=True)["duration"]
        df = pd.DataFrame({"kernels": g.size() / n, "time_ns": g.sum() / n}).reset_index()
        df["trace"] = label
        rows.append(df)
    df = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["range", "kernel", "kernels", "time_ns", "trace"])
    df["range"] = df["range"].astype(str)
    df["kernel"] = df["kernel"].astype(str)
    col = "time_ns" if metric == "gpu_time" else "kernels"
    keep_k = top_names(df.groupby("kernel")[col].sum(), max_kernels)
    keep_r = top_names(df.groupby("range")[col].sum(), max_ranges)
    if len(keep_k) < df["kernel"].nunique() or len(keep_r) < df["range"].nunique():
        df["kernel"] = df["kernel"].where(df["kernel"].isin(keep_k), u.other)
        df["range"] = df["range"].where(df["range"].isin(keep_r), OTHER_RANGES)
        df = df.groupby(["trace", "range", "kernel"], sort=True)[["kernels", "time_ns"]].sum().reset_index()
    order = [lab for lab, _ in items]
    if emphasis is None:
        emphasis = _changed(df, order[0], order[1], u.other) if len(order) > 1 else ()
    colors = kernel_colors([k for k in df["kernel"].unique() if k != u.other], emphasis)
    div, unit = time_unit(df.groupby(["trace", "range"])["time_ns"].sum().max() if len(df) else 0)
    scale = (lambda v: v / div) if metric == "gpu_time" else float
    names = sorted(set(df["range"]), key=lambda r: (r == OTHER_RANGES, natural_key(r)))
    ticks = row_ticks(names)
    heads = [wrap(lab, max(12, 60 // len(items)), 2) for lab in order] if len(items) > 1 else None
    fig = make_subplots(rows=1, cols=len(items), shared_yaxes=True, shared_xaxes="all", horizontal_spacing=0.04,
                        subplot_titles=heads)
    per = f" per {u.step}" if per_step else ""
    for kname in list(colors) + ([u.other] if u.other in set(df["kernel"]) else []):
        sub = df[df["kernel"] == kname].set_index(["trace", "range"])
        for panel, lab in enumerate(order, start=1):
            xs, cd = [], []
            for rng in names:
                row = sub.loc[(lab, rng)] if (lab, rng) in sub.index else None
                xs.append(None if row is None else scale(row[col]))
                cd.append(["", "", "", ""] if row is None else
                          [esc(lab, 80), wrap(rng, 90), u.count(row["kernels"]), fmt_ns(row["time_ns"])])
            fig.add_trace(go.Bar(
                name=wrap(kname), orientation="h", y=list(range(len(names))), x=xs, legendgroup=kname,
                showlegend=panel == 1, marker_color=colors.get(kname, OTHER_COLOR), customdata=cd,
                hovertemplate=f"<b>{wrap(kname, 90)}</b><br>%{{customdata[1]}} (%{{customdata[0]}})<br>"
                              f"%{{customdata[2]}}, %{{customdata[3]}}{per}<extra></extra>"), row=1, col=panel)
    what = f"{u.time}{per} ({unit})" if metric == "gpu_time" else u.works + per
    legend_title = u.work + ("<br><sub>strong: changed, muted: not</sub>" if set(emphasis) & set(colors) and
                             len(set(emphasis) & set(colors)) < len(colors) else "")
    layout(fig, f"Range composition by {u.work}: {what}", barmode="stack", height=rows_height(ticks, 26, 420),
           extra_top=max(n_lines(h) for h in heads) * 20 if heads else 0, legend=dict(title_text=legend_title),
           margin=dict(l=20),
           legend_entries=[tr.name for tr in fig.data if tr.showlegend])
    row_axes(fig, ticks)
    fig.update_xaxes(title_text=what if len(items) == 1 else None, rangemode="tozero")
    return fig


def launches_per_step(traces, step_regex: str | None = None):
    """Kernel launches in each step, one bar group per trace, the first (the base) left;
    hover: time and wall time of the step."""
    import plotly.graph_objects as go

    from ..analysis.tables import launches_per_step as lps

    items = labelled(traces)
    u = units([t for _, t in items])
    labels = [lab for lab, _ in items]
    # Base and fix: the comparison's grey and blue; more traces: their workload's colour.
    fixed = {lab: variant_preset(lab, trace_presentation(t)) for lab, t in items[2:]}
    colors = variant_colors(labels, fixed={**fixed, **dict(zip(labels[:2], (SIDE["A"], SIDE["B"])))})
    fig = go.Figure()
    for label, t in items:
        df = lps(t, step_regex)
        fig.add_trace(go.Bar(
            name=wrap(label), x=[esc(s, 40) for s in df["step"]], y=[int(v) for v in df["kernels"]],
            marker_color=colors[label], text=[num(v) for v in df["kernels"]], textposition="outside", cliponaxis=False,
            customdata=[[fmt_ns(g), fmt_ns(w)] for g, w in zip(df["gpu_time_ns"], df["wall_ns"])],
            hovertemplate=f"%{{x}}: %{{y:,}} {u.works}<br>{u.time} %{{customdata[0]}}<br>"
                          f"wall %{{customdata[1]}}<extra>{esc(label, 60)}</extra>"))
    layout(fig, f"{u.issued[:1].upper()}{u.issued[1:]} per {u.step}", barmode="group", yaxis_title=u.issued,
           xaxis_title=u.step, legend_entries=[tr.name for tr in fig.data])
    return fig


def summary_bars(trace, by: str = "range", metric: str = "gpu_time", top: int = 30):
    """Bars of :func:`workbench.summary` ``by`` range/layer/kernel/path/step; ``metric``
    ``gpu_time`` or ``kernels``. ``by="layer"`` stacks the ranges of each layer; the others
    are horizontal bars, largest first, the names whole (wrapped)."""
    import plotly.graph_objects as go

    from ..analysis.tables import summary

    (label, t), = labelled(trace)
    u = units(t)
    df = summary(t, by=by)
    col = "gpu_time_ns" if metric == "gpu_time" else "kernels"
    div, unit = time_unit(df[col].max() if metric == "gpu_time" and len(df) else 0)
    conv = (lambda v: float(v) / div) if metric == "gpu_time" else float
    what = f"{u.time} ({unit})" if metric == "gpu_time" else u.works
    fig = go.Figure()
    if by == "layer":
        df = df.copy()
        df["range"] = df["range"].astype(str)
        keep = top_names(df.groupby("range")[col].sum(), 12)
        if len(keep) < df["range"].nunique():
            df["range"] = df["range"].where(df["range"].isin(keep), OTHER_RANGES)
            df = df.groupby(["layer", "range"], sort=True)[["kernels", "gpu_time_ns"]].sum().reset_index()
        df = df.sort_values(["layer", "range"], kind="stable")
        xlab = {x: (f"layer {x}" if x >= 0 else "no layer") for x in sorted(df["layer"].unique())}
        colors = range_colors([r for r in df["range"].unique() if r != OTHER_RANGES], trace_presentation(t))
        for rng in sorted(df["range"].unique(), key=lambda r: (r == OTHER_RANGES, natural_key(r))):
            sub = df[df["range"] == rng]
            fig.add_trace(go.Bar(
                name=wrap(rng), x=[xlab[x] for x in sub["layer"]], y=[conv(v) for v in sub[col]],
                marker_color=colors.get(rng, OTHER_COLOR),
                customdata=[[u.count(k), fmt_ns(g)] for k, g in zip(sub["kernels"], sub["gpu_time_ns"])],
                hovertemplate=f"%{{x}} / {wrap(rng, 90)}<br>%{{customdata[0]}}, %{{customdata[1]}}<extra></extra>"))
        layout(fig, f"{esc(label)}: {what} by layer", barmode="stack", yaxis_title=what, legend=dict(title_text="range"),
               legend_entries=[tr.name for tr in fig.data])
        fig.update_xaxes(categoryorder="array", categoryarray=list(xlab.values()))  # layers by number
        return fig
    key = {"range": "range", "kernel": "kernel", "path": "path", "step": "step"}[by]
    df = df.sort_values([col, key], ascending=[False, True], kind="stable").head(top)
    names = [str(x) for x in df[key]]
    if by == "kernel":
        colors = kernel_colors(names)
    elif by in ("range", "path"):
        by_name = range_colors({last_part(n) if by == "path" else n for n in names}, trace_presentation(t))
        colors = {n: by_name[last_part(n) if by == "path" else n] for n in names}
    else:
        colors = dict.fromkeys(names, SIDE["B"])
    ticks = row_ticks(names, 44)
    fig.add_trace(go.Bar(
        orientation="h", y=list(range(len(names))), x=[conv(v) for v in df[col]], marker_color=[colors[n] for n in names],
        showlegend=False, customdata=[[wrap(n, 90), u.count(k), fmt_ns(g)]
                                      for n, k, g in zip(names, df["kernels"], df["gpu_time_ns"])],
        hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]}, %{customdata[2]}<extra></extra>"))
    layout(fig, f"{esc(label)}: {what} by {u.work if by == 'kernel' else by}", xaxis_title=what,
           height=rows_height(ticks, 32), margin=dict(l=20))
    row_axes(fig, ticks)
    return fig
