"""Timelines: one range instance of a trace as a Gantt chart, its ranges above (one row per
nesting depth) and its kernels below (one row per GPU stream; CPU ops: one per thread).

Three things a timeline must not do:

* draw a million bars: past ``max_bars`` the longest kernels are drawn one by one and the
  others merged, per row and time slice, into one bar each (busy time and count in its hover),
  and the title says how many of each; ranges past ``MAX_RANGES`` keep the longest;
* print labels nobody can read: a range bar carries its own short name (:func:`last_part`)
  only where it fits at a readable size, never rotated or shrunk; the full path is in the hover;
* colour two kernels alike (:func:`~workbench.viz.colors.kernel_colors`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .colors import RANGE_FILL, kernel_colors, range_color, trace_presentation
from .common import (OTHER_COLOR, esc, fmt_ns, kernel_names, labelled, last_part, layout, time_unit, top_names,
                     units, wrap)

MAX_RANGES = 1500
MERGED_COLOR = "#d9d9d9"
# A range label is sent only when its bar is likely wide enough (plot ~550 px wide, ~6 px a
# character at the label's size); plotly hides the ones that still do not fit (uniformtext).
_PLOT_PX, _CHAR_PX = 550.0, 6.0


def _legend_names(names: pd.Series, max_legend: int) -> list[str]:
    """The kernels that get their own colour and legend entry: the most frequent."""
    return sorted(str(n) for n in top_names(names.value_counts(), max_legend)) if len(names) else []


def _region_colors(t, w) -> set[str]:
    """The colours the workload gives the ranges window ``w`` draws: kernels do not take them."""
    pres = trace_presentation(t)
    names = set(w.ranges["name"].astype(str))
    return {pres.colors[n] for n in names & set(pres.regions) if n in pres.colors}


def _lanes(k: pd.DataFrame, cpu: bool) -> pd.Series:
    """The row of each kernel: its stream; a CPU op's thread."""
    col = "launch_tid" if cpu and "launch_tid" in k.columns else "stream"
    return k[col].astype(np.int64)


def _range_traces(go, w, pres, div: float, span: float) -> tuple[list, list[str], int]:
    r = w.ranges
    dropped = max(len(r) - MAX_RANGES, 0)
    if dropped:
        r = r.assign(_d=r["end"] - r["start"]).sort_values(["_d", "start"], ascending=[False, True], kind="stable")
        r = r.head(MAX_RANGES).sort_values(["start", "depth"], kind="stable")
    traces, rows = [], []
    if not len(r):
        return traces, rows, dropped
    base_depth = int(r["depth"].min())
    for depth, sub in r.groupby("depth", sort=True):
        row = f"ranges (depth {int(depth) - base_depth})"
        rows.append(row)
        names = [str(x) for x in sub["name"]]
        starts, ends = sub["start"].to_numpy(), sub["end"].to_numpy()
        labels = [last_part(n) for n in names]
        fits = [(e - s) / span * _PLOT_PX >= _CHAR_PX * len(lab) + 8 for lab, s, e in zip(labels, starts, ends)]
        traces.append(go.Bar(
            orientation="h", y=[row] * len(sub), base=[(s - w.t0) / div for s in starts], x=[(e - s) / div for s, e in zip(starts, ends)],
            marker=dict(color=[range_color(n, pres) if n in pres.regions else RANGE_FILL for n in names],
                        line=dict(color="#555555", width=1), opacity=0.55),
            text=[esc(lab) if ok else "" for lab, ok in zip(labels, fits)], textposition="inside",
            insidetextanchor="middle", textangle=0, textfont=dict(color="#111111", size=11), showlegend=False,
            name="ranges", customdata=[[wrap(p, 90), fmt_ns(e - s), fmt_ns(s - w.t0)]
                                       for p, s, e in zip(sub["path"], starts, ends)],
            hovertemplate="<b>%{customdata[0]}</b><br>range, %{customdata[1]}<br>from %{customdata[2]}<extra></extra>"))
    return traces, rows, dropped


def _split(k: pd.DataFrame, max_bars: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kernels drawn one by one, kernels to merge): all of them fit, or the longest half of
    ``max_bars`` one by one (ties: the earlier) and the rest merged."""
    if len(k) <= max_bars:
        return k, k.iloc[:0]
    order = np.lexsort((k["start"].to_numpy(), -k["duration"].to_numpy()))
    one = np.zeros(len(k), dtype=bool)
    one[order[: max_bars // 2]] = True
    return k[one], k[~one]


def _merged(go, small: pd.DataFrame, lanes: pd.Series, u, w, div: float, bars: int):
    """One bar per (row, time slice) covering the merged kernels there."""
    span = max(w.t1 - w.t0, 1)
    nl = max(lanes.nunique(), 1)
    slices = max(bars // nl, 1)
    g = pd.DataFrame({"lane": lanes.to_numpy(), "start": small["start"].to_numpy(), "end": small["end"].to_numpy(),
                      "dur": small["duration"].to_numpy(),
                      "slice": np.minimum((small["start"].to_numpy() - w.t0) * slices // span, slices - 1)})
    agg = g.groupby(["lane", "slice"], sort=True).agg(start=("start", "min"), end=("end", "max"), n=("dur", "size"),
                                                      busy=("dur", "sum")).reset_index()
    return go.Bar(
        orientation="h", y=[f"{u.lane} {int(v)}" for v in agg["lane"]], base=[(s - w.t0) / div for s in agg["start"]],
        x=[(e - s) / div for s, e in zip(agg["start"], agg["end"])], name=f"(shorter {u.works}, merged)",
        marker=dict(color=MERGED_COLOR, line=dict(color="#999999", width=1)),
        customdata=[[u.count(n), fmt_ns(b), fmt_ns(e - s), fmt_ns(s - w.t0)]
                    for n, b, s, e in zip(agg["n"], agg["busy"], agg["start"], agg["end"])],
        hovertemplate="<b>%{customdata[0]} merged</b><br>%{customdata[1]} busy in %{customdata[2]}<br>"
                      "from %{customdata[3]}<extra></extra>"), len(agg)


def _kernel_traces(go, k: pd.DataFrame, legend: list[str], colors: dict, u, w, div: float):
    names = kernel_names(k)
    shown = names.where(names.isin(set(legend)), u.other)
    lanes = _lanes(k, u.lane == "thread")
    grid = u.lane != "thread"  # CPU ops have no launch grid
    order = [n for n in colors if n in set(shown)] + sorted(set(shown) - set(colors))
    traces = []
    for kname in order:
        sel = (shown == kname).to_numpy()
        sub = k[sel]
        full = sub["name"].astype(str).to_numpy()
        paths = sub["path"].astype(str).to_numpy()
        cd = [[wrap(n, 90), wrap(p, 90), fmt_ns(d), fmt_ns(s - w.t0)]
              for n, p, d, s in zip(full, paths, sub["duration"], sub["start"])]
        if grid:
            for row, (gx, gy, gz, bx, by, bz) in zip(cd, sub[["grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                                             "block_z"]].itertuples(index=False)):
                row.append(f"grid {gx}x{gy}x{gz}, block {bx}x{by}x{bz}")
        traces.append(go.Bar(
            orientation="h", y=[f"{u.lane} {v}" for v in lanes[sel]], base=[(s - w.t0) / div for s in sub["start"]],
            x=[d / div for d in sub["duration"]], name=wrap(kname),
            # The outline keeps a kernel far shorter than a pixel visible (as trace viewers
            # draw slices at least a pixel wide); the hover gives its true duration.
            marker=dict(color=colors.get(kname, OTHER_COLOR), line=dict(color=colors.get(kname, OTHER_COLOR), width=1)),
            customdata=cd,
            hovertemplate="<b>%{customdata[0]}</b><br>in %{customdata[1]}<br>%{customdata[2]} from %{customdata[3]}"
                          + ("<br>%{customdata[4]}" if grid else "") + "<extra></extra>"))
    return traces


def _figure(label: str, t, w, legend: list[str], colors: dict, title: str | None, max_bars: int):
    import plotly.graph_objects as go

    u = units(t)
    span = max(w.t1 - w.t0, 1)
    div, unit = time_unit(span)
    fig = go.Figure()
    rtraces, rows, dropped = _range_traces(go, w, trace_presentation(t), div, span)
    k = w.kernels
    one, small = _split(k, max_bars)
    lanes = sorted(set(_lanes(k, u.lane == "thread"))) if len(k) else []
    rows += [f"{u.lane} {v}" for v in lanes]
    ktraces = _kernel_traces(go, one, legend, colors, u, w, div) if len(one) else []
    notes = []
    if len(small):
        merged, nbars = _merged(go, small, _lanes(small, u.lane == "thread"), u, w, div, max_bars - len(one))
        ktraces.append(merged)
        notes.append(f"the {len(one):,} longest drawn, {len(small):,} shorter merged into {nbars:,} bars")
    if dropped:
        notes.append(f"the {MAX_RANGES:,} longest of {len(w.ranges):,} ranges drawn")
    for tr in rtraces + ktraces:
        fig.add_trace(tr)
    head = title if title is not None else f"{esc(label)}: {esc(w.title)}"
    note = f" ({'; '.join(notes)})" if notes else ""
    layout(fig, f"{head} \u2014 {u.count(len(k))}, {fmt_ns(w.t1 - w.t0)}{note}", barmode="overlay", bargap=0.25,
           height=max(260, 110 + 46 * len(rows)), legend=dict(title_text=u.work),
           legend_entries=[tr.name for tr in ktraces], uniformtext=dict(minsize=9, mode="hide"),
           margin=dict(l=20))
    fig.update_xaxes(title_text=f"time from window start ({unit})", rangemode="tozero")
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)), title_text=None, automargin=True)
    return fig


def timeline(trace, where=None, *, title: str | None = None, max_kernels: int | None = None, max_legend: int = 15,
             max_bars: int = 3000, step_regex: str | None = None, colors: dict | None = None, emphasis=None):
    """Gantt of one range instance: its NVTX / record_function ranges on rows above and its
    kernels below, coloured by kernel; time from the window start. ``where``: ``None`` (the
    first step), a range key or path (``"layer_03/kv_write"``, first instance),
    ``("layer", 3)`` or a range id.

    Ranges are CPU-side (when the launches were issued), kernels GPU-side (when they ran), on
    one clock, so the gap between them is launch latency / queueing. The ``max_legend`` most
    frequent kernels get their own colour and legend entry, the rest share "(other kernels)"
    (hover still names each one); ``colors`` (``{kernel: colour}``) and ``emphasis`` (kernels
    to stand out) as :func:`~workbench.viz.colors.kernel_colors`. ``max_kernels`` reads only
    the first kernels of the window; ``max_bars`` bounds what is drawn (see the module).
    """
    from .select import window

    (label, t), = labelled(trace)
    w = window(t, where, max_kernels=max_kernels or sys.maxsize, step_regex=step_regex)
    legend = _legend_names(kernel_names(w.kernels), max_legend)
    cmap = dict(colors) if colors is not None else kernel_colors(legend, emphasis, avoid=_region_colors(t, w))
    return _figure(label, t, w, legend, cmap, title, max_bars)


def timeline_pair(d_or_traces, where=None, *, labels: Sequence[str] | None = None, max_kernels: int | None = None,
                  max_legend: int = 15, max_bars: int = 3000, step_regex: str | None = None):
    """Timelines of the same range in two traces (base, fix), on separate time axes, with one
    kernel colour map: the kernels whose count differs between the two stand out, the others
    are muted. ``labels`` replace the two titles' heads."""
    from .select import window

    items = [labelled(x)[0] for x in d_or_traces]
    if len(items) != 2:
        raise ValueError("timeline_pair takes two traces")
    wins = [window(t, where, max_kernels=max_kernels or sys.maxsize, step_regex=step_regex) for _, t in items]
    names = [kernel_names(w.kernels) for w in wins]
    legend = _legend_names(pd.concat(names, ignore_index=True), max_legend)
    counts = [n[n.isin(set(legend))].value_counts() for n in names]
    changed = {n for n in legend if counts[0].get(n, 0) != counts[1].get(n, 0)}
    cmap = kernel_colors(legend, changed, avoid=set().union(*(_region_colors(t, w) for (_, t), w in zip(items, wins))))
    return tuple(_figure(lab, t, w, legend, cmap, labels[i] if labels else None, max_bars)
                 for i, ((lab, t), w) in enumerate(zip(items, wins)))
