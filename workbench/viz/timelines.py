"""Timelines: one range instance of a trace as a Gantt chart, its ranges above (one row per
nesting depth) and its kernels below (one row per GPU stream; CPU ops: one per thread).

Two time axes (``view``): the window's own time (``"window"``: ranges when the host issued
them, kernels when they ran, on one clock), or GPU time alone (``"gpu"``, :mod:`.clock`: the
idle gaps between kernels cut, each range drawn over the GPU work it launched). ``"auto"``
takes the GPU view where the host dominates the window (an eager engine: kernels would be
one-pixel slivers), else the window. A pair of timelines shares one view and one time axis,
so the shorter one is shorter on the page.

Four things a timeline must not do:

* draw a million bars: past ``max_bars`` the longest kernels are drawn one by one and the
  others merged, per row and time slice, into one bar each (busy time and count in its hover),
  and the title says how many of each; ranges past ``MAX_RANGES`` keep the longest;
* print labels nobody can read: a range bar carries its own short name (:func:`last_part`)
  only where it fits at a readable size, never rotated or shrunk; the full path is in the hover;
* colour two kernels alike, or one kernel otherwise than the session's other figures do
  (:func:`~workbench.viz.colors.kernel_colors`);
* leave the GPU's work unreadable: see ``view`` above.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .clock import Clock, gpu_clock, host_dominated, window_clock
from .colors import RANGE_FILL, kernel_colors, range_color, trace_presentation
from .common import (GPU, OTHER_COLOR, esc, fmt_ns, kernel_names, labelled, last_part, layout, time_unit, top_names,
                     units, wrap)

MAX_RANGES = 1500
MERGED_COLOR = "#d9d9d9"
# A range label is sent only when its bar is likely wide enough (plot ~550 px wide, ~6 px a
# character at the label's size); plotly hides the ones that still do not fit (uniformtext).
_PLOT_PX, _CHAR_PX = 550.0, 6.0


def _legend_names(names: pd.Series, max_legend: int) -> list[str]:
    """The kernels that get their own colour and legend entry: the most frequent."""
    return sorted(str(n) for n in top_names(names.value_counts(), max_legend)) if len(names) else []


def _lanes(k: pd.DataFrame, cpu: bool) -> pd.Series:
    """The row of each kernel: its stream; a CPU op's thread."""
    col = "launch_tid" if cpu and "launch_tid" in k.columns else "stream"
    return k[col].astype(np.int64)


def _gpu_extent(w) -> tuple[np.ndarray, np.ndarray]:
    """Per range of window ``w`` (in ``w.ranges`` order): the first start and last end of the
    kernels it launched, its descendants' included (NaN where none)."""
    r = w.ranges
    lo = np.full(len(r), np.inf)
    hi = np.full(len(r), -np.inf)
    if len(r) and len(w.kernels):
        pos = pd.Series(np.arange(len(r)), index=r["id"].to_numpy())
        parent = pos.reindex(r["parent"].to_numpy()).to_numpy()  # NaN: outside the window
        at = pos.reindex(w.kernels["range_id"].to_numpy()).to_numpy()
        ks, ke = w.kernels["start"].to_numpy(np.float64), w.kernels["end"].to_numpy(np.float64)
        while (ok := ~np.isnan(at)).any():
            i = at[ok].astype(np.int64)
            np.minimum.at(lo, i, ks[ok])
            np.maximum.at(hi, i, ke[ok])
            at, ks, ke = parent[i], ks[ok], ke[ok]
    none = ~np.isfinite(lo)
    lo[none], hi[none] = np.nan, np.nan
    return lo, hi


def _range_traces(go, w, pres, clock: Clock, div: float) -> tuple[list, list[str], int]:
    r = w.ranges
    if clock.gpu:  # each range over the GPU work it launched; one that launched none is not drawn
        lo, hi = _gpu_extent(w)
        r = r.assign(_s=lo, _e=hi)[~np.isnan(lo)]
    else:
        r = r.assign(_s=r["start"].astype(np.float64), _e=r["end"].astype(np.float64))
    dropped = max(len(r) - MAX_RANGES, 0)
    if dropped:
        r = r.assign(_d=r["_e"] - r["_s"]).sort_values(["_d", "_s"], ascending=[False, True], kind="stable")
        r = r.head(MAX_RANGES).sort_values(["_s", "depth"], kind="stable")
    traces, rows = [], []
    if not len(r):
        return traces, rows, dropped
    span = max(clock.total, 1.0)
    base_depth = int(r["depth"].min())
    for depth, sub in r.groupby("depth", sort=True):
        row = f"ranges (depth {int(depth) - base_depth})"
        rows.append(row)
        names = [str(x) for x in sub["name"]]
        xs, xe = clock.x(sub["_s"]), clock.x(sub["_e"])
        starts, ends = sub["start"].to_numpy(), sub["end"].to_numpy()
        labels = [last_part(n) for n in names]
        fits = [(e - s) / span * _PLOT_PX >= _CHAR_PX * len(lab) + 8 for lab, s, e in zip(labels, xs, xe)]
        traces.append(go.Bar(
            orientation="h", y=[row] * len(sub), base=list(xs / div), x=list((xe - xs) / div),
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


def _merged(go, small: pd.DataFrame, lanes: pd.Series, u, w, clock: Clock, div: float, bars: int):
    """One bar per (row, slice of the time axis) covering the merged kernels there."""
    span = max(clock.total, 1.0)
    nl = max(lanes.nunique(), 1)
    slices = max(bars // nl, 1)
    at = clock.x(small["start"])
    g = pd.DataFrame({"lane": lanes.to_numpy(), "start": small["start"].to_numpy(), "end": small["end"].to_numpy(),
                      "dur": small["duration"].to_numpy(),
                      "slice": np.minimum((at * slices / span).astype(np.int64), slices - 1)})
    agg = g.groupby(["lane", "slice"], sort=True).agg(start=("start", "min"), end=("end", "max"), n=("dur", "size"),
                                                      busy=("dur", "sum")).reset_index()
    return go.Bar(
        orientation="h", y=[f"{u.lane} {int(v)}" for v in agg["lane"]], base=list(clock.x(agg["start"]) / div),
        x=list((clock.x(agg["end"]) - clock.x(agg["start"])) / div), name=f"(shorter {u.works}, merged)",
        marker=dict(color=MERGED_COLOR, line=dict(color="#999999", width=1)),
        customdata=[[u.count(n), fmt_ns(b), fmt_ns(e - s), fmt_ns(s - w.t0)]
                    for n, b, s, e in zip(agg["n"], agg["busy"], agg["start"], agg["end"])],
        hovertemplate="<b>%{customdata[0]} merged</b><br>%{customdata[1]} busy in %{customdata[2]}<br>"
                      "from %{customdata[3]}<extra></extra>"), len(agg)


def _kernel_traces(go, k: pd.DataFrame, legend: list[str], colors: dict, u, w, clock: Clock, div: float):
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
        xs = clock.x(sub["start"])
        traces.append(go.Bar(
            orientation="h", y=[f"{u.lane} {v}" for v in lanes[sel]], base=list(xs / div),
            x=list((clock.x(sub["end"]) - xs) / div), name=wrap(kname),
            # The outline keeps a kernel far shorter than a pixel visible (as trace viewers
            # draw slices at least a pixel wide); the hover gives its true duration.
            marker=dict(color=colors.get(kname, OTHER_COLOR), line=dict(color=colors.get(kname, OTHER_COLOR), width=1)),
            customdata=cd,
            hovertemplate="<b>%{customdata[0]}</b><br>in %{customdata[1]}<br>%{customdata[2]} from %{customdata[3]}"
                          + ("<br>%{customdata[4]}" if grid else "") + "<extra></extra>"))
    return traces


VIEWS = ("auto", "window", "gpu")


def _clock(t, w, view: str) -> Clock:
    """The time axis of window ``w`` in ``view`` (see the module docstring)."""
    if view not in VIEWS:
        raise ValueError(f"view {view!r}: one of {', '.join(VIEWS)}")
    k = w.kernels
    if view == "auto":
        gpu = units(t) is GPU and host_dominated(k["start"].to_numpy(), k["end"].to_numpy(), w.t0, w.t1)
        view = "gpu" if gpu else "window"
    if view == "gpu" and len(k):
        return gpu_clock(k["start"].to_numpy(), k["end"].to_numpy())
    return window_clock(w.t0, w.t1)


def _figure(label: str, t, w, legend: list[str], colors: dict, title: str | None, max_bars: int, clock: Clock,
            axis_ns: float | None = None):
    import plotly.graph_objects as go

    u = units(t)
    axis_ns = max(axis_ns or clock.total, 1.0)
    div, unit = time_unit(axis_ns)
    fig = go.Figure()
    rtraces, rows, dropped = _range_traces(go, w, trace_presentation(t), clock, div)
    k = w.kernels
    one, small = _split(k, max_bars)
    lanes = sorted(set(_lanes(k, u.lane == "thread"))) if len(k) else []
    rows += [f"{u.lane} {v}" for v in lanes]
    ktraces = _kernel_traces(go, one, legend, colors, u, w, clock, div) if len(one) else []
    notes = []
    if clock.gpu:
        notes.append(f"GPU view: {fmt_ns(clock.busy)} busy, idle gaps cut")
    if len(small):
        merged, nbars = _merged(go, small, _lanes(small, u.lane == "thread"), u, w, clock, div, max_bars - len(one))
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
    xtitle = (f"GPU busy time from the first {u.work}, idle gaps cut ({unit})" if clock.gpu
              else f"time from window start ({unit})")
    fig.update_xaxes(title_text=xtitle, range=[0, axis_ns / div])
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)), title_text=None, automargin=True)
    return fig


def timeline(trace, where=None, *, view: str = "auto", title: str | None = None, max_kernels: int | None = None,
             max_legend: int = 15, max_bars: int = 3000, step_regex: str | None = None, colors: dict | None = None,
             emphasis=None):
    """Gantt of one range instance: its NVTX / record_function ranges on rows above and its
    kernels below, coloured by kernel. ``where``: ``None`` (the typical decode step), a range
    key or path (``"layer_03/kv_write"``: its typical instance), ``("layer", 3)`` or a range id.

    ``view`` (see the module docstring): ``"window"`` puts ranges and kernels on the window's
    clock, time from its start: ranges are CPU-side (when the launches were issued), kernels
    GPU-side (when they ran), so the gap between them is launch latency / queueing; ``"gpu"``
    cuts the GPU's idle gaps, each range drawn over the kernels it launched; ``"auto"`` (the
    default) takes the GPU view where the GPU is busy less than a quarter of the window.

    The ``max_legend`` most frequent kernels get their own colour and legend entry, the rest
    share "(other kernels)" (hover still names each one); ``colors`` (``{kernel: colour}``)
    and ``emphasis`` (kernels to stand out) as :func:`~workbench.viz.colors.kernel_colors`.
    ``max_kernels`` reads only the first kernels of the window; ``max_bars`` bounds what is
    drawn (see the module).
    """
    from .select import window

    (label, t), = labelled(trace)
    w = window(t, where, max_kernels=max_kernels or sys.maxsize, step_regex=step_regex)
    legend = _legend_names(kernel_names(w.kernels), max_legend)
    cmap = dict(colors) if colors is not None else kernel_colors(legend, emphasis)
    return _figure(label, t, w, legend, cmap, title, max_bars, _clock(t, w, view))


def timeline_pair(d_or_traces, where=None, *, view: str = "auto", labels: Sequence[str] | None = None,
                  max_kernels: int | None = None, max_legend: int = 15, max_bars: int = 3000,
                  step_regex: str | None = None):
    """Timelines of the same range in two traces (base, fix), each its typical instance, in one
    ``view`` (``"auto"``: the GPU view when either window is host-dominated, see
    :func:`timeline`) and on one time axis (same unit and length: the shorter one is shorter on
    the page), with one kernel colour map: the kernels whose count differs between the two
    stand out, the others are muted. ``labels`` replace the two titles' heads."""
    from .select import window

    items = [labelled(x)[0] for x in d_or_traces]
    if len(items) != 2:
        raise ValueError("timeline_pair takes two traces")
    wins = [window(t, where, max_kernels=max_kernels or sys.maxsize, step_regex=step_regex) for _, t in items]
    names = [kernel_names(w.kernels) for w in wins]
    legend = _legend_names(pd.concat(names, ignore_index=True), max_legend)
    counts = [n[n.isin(set(legend))].value_counts() for n in names]
    changed = {n for n in legend if counts[0].get(n, 0) != counts[1].get(n, 0)}
    cmap = kernel_colors(legend, changed)
    if view == "auto":
        view = "gpu" if any(_clock(t, w, "auto").gpu for (_, t), w in zip(items, wins)) else "window"
    clocks = [_clock(t, w, view) for (_, t), w in zip(items, wins)]
    axis_ns = max(c.total for c in clocks)
    return tuple(_figure(lab, t, w, legend, cmap, labels[i] if labels else None, max_bars, c, axis_ns)
                 for i, ((lab, t), w, c) in enumerate(zip(items, wins, clocks)))
