"""Figures of one or more traces: range composition by kernel, launches per step, summary bars."""

from __future__ import annotations

import pandas as pd

from ..analysis.projection import project
from ..analysis.steps import trace_steps_info
from ..textfmt import MICRO
from .colors import SIDE, kernel_color, range_color, trace_presentation, variant_color
from .common import OTHER_COLOR, OTHER_KERNELS, OTHER_RANGES, SIDE_LEGEND, esc, labelled, layout, top_names, us




def range_composition(traces, metric: str = "gpu_time", per_step: bool = True, step_regex: str | None = None,
                      max_kernels: int = 15, max_ranges: int = 30):
    """What each range is made of: stacked bars per range name (innermost range, summed over
    layers), one stack segment per kernel, coloured by kernel. With several traces the x axis
    groups ranges under each trace label. ``metric``: ``gpu_time`` (µs) or ``kernels``.
    ``per_step``: decode work per decode step (prefill left out), else everything captured."""
    import plotly.graph_objects as go

    if metric not in ("gpu_time", "kernels"):
        raise ValueError("metric must be 'gpu_time' or 'kernels'")
    items = labelled(traces)
    rows = []
    for label, t in items:
        p = project(t)
        n = 1
        if per_step:
            p = p[p["phase"] != "prefill"]
            n = max(trace_steps_info(t, step_regex).count(), 1)
        g = p.groupby(["range", "short_name"], observed=True, sort=True)["duration"]
        df = pd.DataFrame({"kernels": g.size() / n, "gpu_time": g.sum() / n / 1000.0}).reset_index()
        df["trace"] = label
        rows.append(df)
    df = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["range", "short_name", "kernels", "gpu_time", "trace"])
    df["range"] = df["range"].astype(str)
    df["short_name"] = df["short_name"].astype(str)
    keep_k = top_names(df.groupby("short_name")[metric].sum(), max_kernels)
    keep_r = top_names(df.groupby("range")[metric].sum(), max_ranges)
    if len(keep_k) < df["short_name"].nunique() or len(keep_r) < df["range"].nunique():
        df["short_name"] = df["short_name"].where(df["short_name"].isin(keep_k), OTHER_KERNELS)
        df["range"] = df["range"].where(df["range"].isin(keep_r), OTHER_RANGES)
        df = df.groupby(["trace", "range", "short_name"], sort=True)[["kernels", "gpu_time"]].sum().reset_index()
    multi = len(items) > 1
    order = [lab for lab, _ in items]
    # Ranges in a stable order: by name within each trace.
    cats = sorted({(lab, r) for lab, r in zip(df["trace"], df["range"])}, key=lambda x: (order.index(x[0]), x[1]))
    fig = go.Figure()
    for kname in sorted(df["short_name"].unique()):
        sub = df[df["short_name"] == kname].set_index(["trace", "range"])
        xs0, xs1, ys, cd = [], [], [], []
        for lab, rng in cats:
            if (lab, rng) in sub.index:
                row = sub.loc[(lab, rng)]
                xs0.append(esc(lab, 40))
                xs1.append(esc(rng, 40))
                ys.append(float(row[metric]))
                cd.append([float(row["kernels"]), float(row["gpu_time"])])
        x = [xs0, xs1] if multi else xs1
        fig.add_trace(go.Bar(
            name=esc(kname, 40), x=x, y=ys, marker_color=OTHER_COLOR if kname == OTHER_KERNELS else kernel_color(kname),
            customdata=cd,
            hovertemplate=f"<b>{esc(kname, 100)}</b><br>range %{{x}}<br>%{{customdata[0]:,.2f}} kernels, "
                          f"%{{customdata[1]:,.2f}} {MICRO}{' per step' if per_step else ''}<extra></extra>"))
    unit = f"GPU time ({MICRO})" if metric == "gpu_time" else "kernels"
    layout(fig, f"Range composition by kernel ({unit}{' per step' if per_step else ''})", barmode="stack",
            yaxis_title=unit + (" per step" if per_step else ""), height=460,
            legend=dict(SIDE_LEGEND, title_text="kernel"))
    fig.update_layout(margin=dict(r=260))
    return fig


def launches_per_step(traces, step_regex: str | None = None):
    """Kernel launches in each step, one bar group per trace (hover: GPU time and wall time)."""
    import plotly.graph_objects as go

    from ..analysis.tables import launches_per_step as lps

    fig = go.Figure()
    for i, (label, t) in enumerate(labelled(traces)):
        df = lps(t, step_regex)
        color = SIDE["A" if i == 0 else "B"] if i < 2 else variant_color(label, trace_presentation(t))
        fig.add_trace(go.Bar(
            name=esc(label, 48), x=[esc(s, 40) for s in df["step"]], y=[int(v) for v in df["kernels"]],
            marker_color=color, text=[str(int(v)) for v in df["kernels"]], textposition="outside", cliponaxis=False,
            customdata=[[us(g), us(w)] for g, w in zip(df["gpu_time_ns"], df["wall_ns"])],
            hovertemplate=f"%{{x}}: %{{y}} kernels<br>GPU time %{{customdata[0]:,.1f}} {MICRO}<br>"
                          f"wall %{{customdata[1]:,.1f}} {MICRO}<extra>" + esc(label, 40) + "</extra>"))
    layout(fig, "Kernel launches per step", barmode="group", yaxis_title="kernels launched", xaxis_title="step")
    return fig


def summary_bars(trace, by: str = "range", metric: str = "gpu_time", top: int = 30):
    """Bars of :func:`workbench.summary` ``by`` range/layer/kernel/path/step; ``metric``
    ``gpu_time`` (µs) or ``kernels``. ``by="layer"`` stacks the ranges of each layer."""
    import plotly.graph_objects as go

    from ..analysis.tables import summary

    (label, t), = labelled(trace)
    p = trace_presentation(t)
    df = summary(t, by=by)
    col = "gpu_time_ns" if metric == "gpu_time" else "kernels"
    conv = us if metric == "gpu_time" else float
    unit = f"GPU time ({MICRO})" if metric == "gpu_time" else "kernels"
    fig = go.Figure()
    if by == "layer":
        df = df.copy()
        df["range"] = df["range"].astype(str)
        keep = top_names(df.groupby("range")[col].sum(), 12)
        if len(keep) < df["range"].nunique():
            df["range"] = df["range"].where(df["range"].isin(keep), OTHER_RANGES)
            df = df.groupby(["layer", "range"], sort=True)[["kernels", "gpu_time_ns"]].sum().reset_index()
        df = df.sort_values(["layer", "range"], kind="stable")
        xs_all = sorted(df["layer"].unique())
        xlab = {x: (f"layer {x}" if x >= 0 else "no layer") for x in xs_all}
        for rng in sorted(df["range"].astype(str).unique()):
            sub = df[df["range"].astype(str) == rng]
            fig.add_trace(go.Bar(
                name=esc(rng, 40), x=[xlab[x] for x in sub["layer"]], y=[conv(v) for v in sub[col]],
                marker_color=OTHER_COLOR if rng == OTHER_RANGES else range_color(rng, p),
                customdata=[[int(k), us(g)] for k, g in zip(sub["kernels"], sub["gpu_time_ns"])],
                hovertemplate=f"%{{x}} / {esc(rng, 60)}<br>%{{customdata[0]}} kernels, %{{customdata[1]:,.1f}} {MICRO}<extra></extra>"))
        barmode = "stack"
    else:
        key = {"range": "range", "kernel": "kernel", "path": "path", "step": "step"}[by]
        df = df.sort_values([col, key], ascending=[False, True], kind="stable").head(top)
        names = [str(x) for x in df[key]]
        colors = [kernel_color(n) if by == "kernel" else range_color(n.rsplit("/", 1)[-1], p) for n in names]
        fig.add_trace(go.Bar(
            x=[esc(n, 48) for n in names], y=[conv(v) for v in df[col]], marker_color=colors, showlegend=False,
            customdata=[[esc(n, 160), int(k), us(g)] for n, k, g in zip(names, df["kernels"], df["gpu_time_ns"])],
            hovertemplate=f"<b>%{{customdata[0]}}</b><br>%{{customdata[1]:,}} kernels, %{{customdata[2]:,.1f}} {MICRO}"
                          "<extra></extra>"))
        barmode = "relative"
    layout(fig, f"{esc(label, 60)}: {unit} by {by}", barmode=barmode, yaxis_title=unit)
    if by in ("kernel", "path"):
        fig.update_xaxes(tickangle=-35)
        fig.update_layout(height=520, margin=dict(b=160))
    return fig

