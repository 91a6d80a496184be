"""Timelines: one range instance of a trace as a Gantt chart, CPU ranges above GPU kernels."""

from __future__ import annotations

from collections.abc import Sequence

from ..textfmt import MICRO
from .colors import RANGE_FILL, kernel_color, range_color, trace_presentation
from .common import OTHER_COLOR, OTHER_KERNELS, SIDE_LEGEND, esc, labelled, layout, top_names, us


def timeline(trace, where=None, *, title: str | None = None, max_kernels: int = 20000, max_legend: int = 15,
             step_regex: str | None = None):
    """Gantt of one range instance: its NVTX / record_function ranges on rows above (one row
    per nesting depth) and its kernels below (one row per stream), coloured by kernel; time in
    µs from the window start. ``where``: ``None`` (the first step), a range key or path
    (``"layer_03/kv_write"``, first instance), ``("layer", 3)`` or a range id.

    Ranges are CPU-side (when the launches were issued), kernels GPU-side (when they ran), on
    one clock, so the gap between them is launch latency / queueing. The ``max_legend`` most
    frequent kernels get their own colour and legend entry, the rest share "(other kernels)"
    (hover still names each one).
    """
    import plotly.graph_objects as go

    from .select import window

    (label, t), = labelled(trace)
    pres = trace_presentation(t)
    w = window(t, where, max_kernels=max_kernels, step_regex=step_regex)
    fig = go.Figure()
    rows: list[str] = []
    if len(w.ranges):
        base_depth = int(w.ranges["depth"].min())
        for depth, sub in w.ranges.groupby("depth", sort=True):
            row = f"ranges (depth {int(depth) - base_depth})"
            rows.append(row)
            names = [str(x) for x in sub["name"]]
            fig.add_trace(go.Bar(
                orientation="h", y=[row] * len(sub), base=[us(s - w.t0) for s in sub["start"]],
                x=[us(e - s) for s, e in zip(sub["start"], sub["end"])],
                marker=dict(color=[range_color(n, pres) if n in pres.regions else RANGE_FILL for n in names],
                            line=dict(color="#555555", width=1)),
                opacity=0.55, text=[esc(n, 24) for n in names], textposition="inside", insidetextanchor="middle",
                textfont=dict(color="#111111"), constraintext="both", showlegend=False, name="ranges",
                customdata=[[esc(p, 120), us(e - s)] for p, s, e in zip(sub["path"], sub["start"], sub["end"])],
                hovertemplate="<b>%{customdata[0]}</b><br>CPU range, %{customdata[1]:,.1f} \u00b5s<br>"
                              "from %{base:,.1f} \u00b5s<extra></extra>"))
    k = w.kernels
    if len(k):
        streams = sorted(int(s) for s in k["stream"].unique())
        krows = {s: f"GPU stream {s}" for s in streams}
        rows += [krows[s] for s in streams]
        short = k["short_name"].astype(str)
        keep = top_names(short.value_counts(), max_legend)
        legend = short.where(short.isin(keep), OTHER_KERNELS)
        for kname, sub in sorted(k.groupby(legend.to_numpy(), sort=False), key=lambda x: str(x[0])):
            kname = str(kname)
            fig.add_trace(go.Bar(
                orientation="h", y=[krows[int(s)] for s in sub["stream"]], base=[us(s - w.t0) for s in sub["start"]],
                x=[us(d) for d in sub["duration"]], name=esc(kname, 40),
                marker=dict(color=OTHER_COLOR if kname == OTHER_KERNELS else kernel_color(kname)),
                customdata=[[esc(n, 160), esc(path, 120), us(d), f"{gx}x{gy}x{gz}", f"{bx}x{by}x{bz}"]
                            for n, path, d, gx, gy, gz, bx, by, bz in zip(
                                sub["name"].astype(str), sub["path"].astype(str), sub["duration"], sub["grid_x"],
                                sub["grid_y"], sub["grid_z"], sub["block_x"], sub["block_y"], sub["block_z"])],
                hovertemplate="<b>%{customdata[0]}</b><br>in %{customdata[1]}<br>%{customdata[2]:,.2f} \u00b5s "
                              "at %{base:,.1f} \u00b5s<br>grid %{customdata[3]}, block %{customdata[4]}<extra></extra>"))
    head = title if title is not None else f"{esc(label, 60)}: {esc(w.title, 80)}"
    nk = len(k)
    layout(fig, f"{head} \u2014 {nk} kernel{'s' if nk != 1 else ''}, {us(w.t1 - w.t0):,.1f} {MICRO}",
            barmode="overlay", bargap=0.25,
            height=max(260, 90 + 46 * len(rows), 110 + 21 * (min(k["short_name"].nunique(), max_legend + 1) if len(k) else 0)),
            legend=dict(SIDE_LEGEND, title_text="kernel"))
    fig.update_layout(margin=dict(l=150, r=260))
    fig.update_xaxes(title_text="time from window start (\u00b5s)", rangemode="tozero")
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)), title_text=None)
    return fig


def timeline_pair(d_or_traces, where=None, *, labels: Sequence[str] | None = None, max_kernels: int = 20000):
    """Timelines of the same range in two traces, stacked (A above B) on separate time axes."""
    a, b = d_or_traces
    fa = timeline(a, where, max_kernels=max_kernels)
    fb = timeline(b, where, max_kernels=max_kernels)
    if labels:
        fa.update_layout(title_text=labels[0])
        fb.update_layout(title_text=labels[1])
    return fa, fb
