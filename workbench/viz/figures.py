"""Plotly figures over traces and trace diffs. Every function returns a ``plotly.graph_objects.Figure``.

Plotly is imported inside each function, never when ``workbench`` is imported. Figures are
deterministic: inputs are sorted, no random ids, so a regenerated report is byte-identical
(pass a fixed ``div_id`` to ``fig.to_html`` for that). Trace-supplied names are HTML-escaped
before they reach plotly's text rendering (which understands a subset of HTML).

Times are shown in microseconds; counts and times from a diff are per step.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..analysis.diff import STEP_REGEX, TraceDiff
from ..analysis.projection import project
from ..trace.schema import Trace
from .colors import RANGE_FILL, SIDE, kernel_color, range_color, variant_color

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13)
HEIGHT = 420


def _t(s, limit: int | None = None) -> str:
    """Escape a trace-supplied string for plotly text; shorten it to ``limit`` characters."""
    s = str(s)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return html.escape(s, quote=False)


OTHER_KERNELS = "(other kernels)"
OTHER_RANGES = "(other ranges)"
OTHER_COLOR = "#b0b0b0"


def _top(weights: pd.Series, n: int) -> set:
    """The ``n`` index labels with the largest weights (ties by label): what a figure shows
    one by one; the rest are folded into one "other" entry so figures of traces with
    thousands of names stay small and fast."""
    if len(weights) <= n:
        return set(weights.index)
    w = pd.DataFrame({"k": [str(i) for i in weights.index], "w": weights.to_numpy(dtype=float)}, index=weights.index)
    w = w.sort_values(["w", "k"], ascending=[False, True], kind="stable")
    return set(w.index[:n])


def _us(ns) -> float:
    return float(ns) / 1000.0


def _layout(fig, title: str, **kw) -> None:
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left"), font=FONT, template="plotly_white",
        height=kw.pop("height", HEIGHT), margin=dict(l=70, r=20, t=60, b=60),
        legend=kw.pop("legend", dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0, title_text="")),
        hoverlabel=dict(namelength=-1), **kw,
    )


def _label(d: TraceDiff, side: str) -> str:
    return f"{side}: {_t(d.a if side == 'A' else d.b, 48)}"


def _traces(traces) -> list[tuple[str, Trace]]:
    """``Trace`` | ``{label: Trace}`` | ``[Trace, ...]`` -> [(label, Trace)] (names and paths
    are opened with :func:`workbench.open_trace`)."""
    from ..trace import open_trace

    if isinstance(traces, (Trace, str)):
        traces = [traces]
    if isinstance(traces, Mapping):
        items = list(traces.items())
    else:
        items = [(None, t) for t in traces]
    out = []
    for label, t in items:
        t = t if isinstance(t, Trace) else open_trace(t)
        out.append((str(label) if label is not None else t.label, t))
    return out


# --- diff figures ---------------------------------------------------------------------

def _layer_table(d: TraceDiff, range_name: str | None) -> pd.DataFrame:
    lay = d.layers
    if range_name is not None:
        lay = lay[lay["range"].astype(str) == str(range_name)]
    lay = lay.sort_values(["layer", "range"], kind="stable")
    return lay


def _per_layer(d: TraceDiff, metric: str, range_name: str | None, title: str, ytitle: str, scale):
    import plotly.graph_objects as go

    lay = _layer_table(d, range_name)
    layered = lay[lay["layer"] >= 0]
    if len(layered):
        groups = list(layered.groupby("layer", sort=True))
        xs = [f"layer {int(k)}" for k, _ in groups]
    else:  # no layer ranges: one bar group per range name (the 30 largest, the rest as one)
        names = lay["range"].astype(str)
        keep = _top(lay.groupby(names)[[f"{metric}_a", f"{metric}_b"]].sum().max(axis=1), 30)
        lay = lay.assign(range=names.where(names.isin(keep), OTHER_RANGES))
        groups = list(lay.groupby("range", sort=True))
        xs = [_t(k, 40) for k, _ in groups]
    fig = go.Figure()
    for side, col in (("A", f"{metric}_a"), ("B", f"{metric}_b")):
        ys, hover = [], []
        for _, g in groups:
            ys.append(scale(g[col].sum()))
            hover.append("<br>".join(
                f"{_t(r.range, 40)}: {_fmt(scale(getattr(r, metric + '_a')))} \u2192 {_fmt(scale(getattr(r, metric + '_b')))}"
                for r in g.itertuples()))
        fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ys, marker_color=SIDE[side], customdata=hover,
                             hovertemplate="%{x}<br>" + side + ": %{y:,.2f}<br><br>A \u2192 B per range:<br>%{customdata}"
                                           "<extra></extra>",
                             text=[_fmt(y) for y in ys], textposition="outside", cliponaxis=False))
    _layout(fig, title, barmode="group", yaxis_title=ytitle, xaxis_title=None)
    return fig


def _fmt(x: float) -> str:
    x = float(x)
    if x.is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:,.2f}"


def layer_counts(d: TraceDiff, range: str | None = None):  # noqa: A002 - the natural name
    """Kernels per step of each layer, A vs B (grouped bars). ``range`` keeps one range name
    (``"kv_write"``): the fusion case's 15 -> 1 per layer."""
    what = f"range {_t(range)}" if range else "all ranges"
    return _per_layer(d, "kernels", range, f"Kernels per step per layer ({what})", "kernels per step", float)


def layer_time(d: TraceDiff, range: str | None = None):  # noqa: A002
    """GPU time per step of each layer in microseconds, A vs B (grouped bars)."""
    what = f"range {_t(range)}" if range else "all ranges"
    return _per_layer(d, "gpu_time_ns", range, f"GPU time per step per layer ({what})", "GPU time per step (\u00b5s)", _us)


def diff_bars(d: TraceDiff, scope=None, max_ranges: int = 30):
    """Kernels and GPU time per step, A vs B, side by side, for a scope:
    ``None`` (every range name, summed over layers), a layer index (the ranges of that
    layer) or a range key (``"layer_03/kv_write"``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    r = d.ranges
    if scope is None:
        names = r["name"].astype(str)
        keep = _top(r.groupby(names)[["gpu_time_ns_a", "gpu_time_ns_b"]].sum().max(axis=1), max_ranges)
        names = names.where(names.isin(keep), OTHER_RANGES)
        g = r.groupby(names, sort=True)[["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]].sum()
        title = "all layers, per range name"
    elif isinstance(scope, (int, np.integer)):
        g = r[r["layer"] == int(scope)].set_index("name").sort_index(kind="stable")
        g = g[["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]]
        title = f"layer {int(scope)}"
    else:
        g = r[r["range"] == str(scope)].set_index("range")[["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]]
        title = _t(scope, 80)
    xs = [_t(x, 32) for x in g.index]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("kernels per step", "GPU time per step (\u00b5s)"),
                        horizontal_spacing=0.12)
    for side, s in (("A", "a"), ("B", "b")):
        ks = [float(v) for v in g[f"kernels_{s}"]]
        ts = [_us(v) for v in g[f"gpu_time_ns_{s}"]]
        fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ks, marker_color=SIDE[side], legendgroup=side,
                             text=[_fmt(v) for v in ks], textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}<br>" + side + ": %{y:,.2f} kernels<extra></extra>"), row=1, col=1)
        fig.add_trace(go.Bar(name=_label(d, side), x=xs, y=ts, marker_color=SIDE[side], legendgroup=side,
                             showlegend=False, text=[_fmt(v) for v in ts], textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}<br>" + side + ": %{y:,.2f} \u00b5s<extra></extra>"), row=1, col=2)
    _layout(fig, f"A vs B: {title}", barmode="group", height=400,
            legend=dict(orientation="h", yanchor="top", y=-0.12, xanchor="center", x=0.5, title_text=""))
    fig.update_layout(margin=dict(t=80, b=70))
    return fig


# --- single-trace figures -----------------------------------------------------------------

def _n_steps(p: pd.DataFrame, step_regex: str) -> int:
    rx = re.compile(step_regex)
    steps = [s for s in p.loc[p["status"] == "range", "step"].astype(str).unique() if rx.search(s)]
    return max(len(steps), 1)


def range_composition(traces, metric: str = "gpu_time", per_step: bool = True, step_regex: str = STEP_REGEX,
                      max_kernels: int = 15, max_ranges: int = 30):
    """What each range is made of: stacked bars per range name (innermost range, summed over
    layers), one stack segment per kernel, coloured by kernel. With several traces the x axis
    groups ranges under each trace label. ``metric``: ``gpu_time`` (µs) or ``kernels``."""
    import plotly.graph_objects as go

    if metric not in ("gpu_time", "kernels"):
        raise ValueError("metric must be 'gpu_time' or 'kernels'")
    items = _traces(traces)
    rows = []
    for label, t in items:
        p = project(t)
        n = _n_steps(p, step_regex) if per_step else 1
        g = p.groupby(["range", "short_name"], observed=True, sort=True)["duration"]
        df = pd.DataFrame({"kernels": g.size() / n, "gpu_time": g.sum() / n / 1000.0}).reset_index()
        df["trace"] = label
        rows.append(df)
    df = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["range", "short_name", "kernels", "gpu_time", "trace"])
    df["range"] = df["range"].astype(str)
    df["short_name"] = df["short_name"].astype(str)
    keep_k = _top(df.groupby("short_name")[metric].sum(), max_kernels)
    keep_r = _top(df.groupby("range")[metric].sum(), max_ranges)
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
                xs0.append(_t(lab, 40))
                xs1.append(_t(rng, 40))
                ys.append(float(row[metric]))
                cd.append([float(row["kernels"]), float(row["gpu_time"])])
        x = [xs0, xs1] if multi else xs1
        fig.add_trace(go.Bar(
            name=_t(kname, 40), x=x, y=ys, marker_color=OTHER_COLOR if kname == OTHER_KERNELS else kernel_color(kname),
            customdata=cd,
            hovertemplate=f"<b>{_t(kname, 100)}</b><br>range %{{x}}<br>%{{customdata[0]:,.2f}} kernels, "
                          f"%{{customdata[1]:,.2f}} \u00b5s{' per step' if per_step else ''}<extra></extra>"))
    unit = "GPU time (\u00b5s)" if metric == "gpu_time" else "kernels"
    _layout(fig, f"Range composition by kernel ({unit}{' per step' if per_step else ''})", barmode="stack",
            yaxis_title=unit + (" per step" if per_step else ""), height=460,
            legend=dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top", title_text="kernel"))
    fig.update_layout(margin=dict(r=260))
    return fig


def launches_per_step(traces, step_regex: str = STEP_REGEX):
    """Kernel launches in each step, one bar group per trace (hover: GPU time and wall time)."""
    import plotly.graph_objects as go

    from ..analysis.tables import launches_per_step as lps

    fig = go.Figure()
    for i, (label, t) in enumerate(_traces(traces)):
        df = lps(t, step_regex)
        color = SIDE["A" if i == 0 else "B"] if i < 2 else variant_color(label)
        fig.add_trace(go.Bar(
            name=_t(label, 48), x=[_t(s, 40) for s in df["step"]], y=[int(v) for v in df["kernels"]],
            marker_color=color, text=[str(int(v)) for v in df["kernels"]], textposition="outside", cliponaxis=False,
            customdata=[[_us(g), _us(w)] for g, w in zip(df["gpu_time_ns"], df["wall_ns"])],
            hovertemplate="%{x}: %{y} kernels<br>GPU time %{customdata[0]:,.1f} \u00b5s<br>"
                          "wall %{customdata[1]:,.1f} \u00b5s<extra>" + _t(label, 40) + "</extra>"))
    _layout(fig, "Kernel launches per step", barmode="group", yaxis_title="kernels launched", xaxis_title="step")
    return fig


def summary_bars(trace, by: str = "range", metric: str = "gpu_time", top: int = 30):
    """Bars of :func:`workbench.summary` ``by`` range/layer/kernel/path/step; ``metric``
    ``gpu_time`` (µs) or ``kernels``. ``by="layer"`` stacks the ranges of each layer."""
    import plotly.graph_objects as go

    from ..analysis.tables import summary

    (label, t), = _traces(trace)
    df = summary(t, by=by)
    col = "gpu_time_ns" if metric == "gpu_time" else "kernels"
    conv = _us if metric == "gpu_time" else float
    unit = "GPU time (\u00b5s)" if metric == "gpu_time" else "kernels"
    fig = go.Figure()
    if by == "layer":
        df = df.copy()
        df["range"] = df["range"].astype(str)
        keep = _top(df.groupby("range")[col].sum(), 12)
        if len(keep) < df["range"].nunique():
            df["range"] = df["range"].where(df["range"].isin(keep), OTHER_RANGES)
            df = df.groupby(["layer", "range"], sort=True)[["kernels", "gpu_time_ns"]].sum().reset_index()
        df = df.sort_values(["layer", "range"], kind="stable")
        xs_all = sorted(df["layer"].unique())
        xlab = {x: (f"layer {x}" if x >= 0 else "no layer") for x in xs_all}
        for rng in sorted(df["range"].astype(str).unique()):
            sub = df[df["range"].astype(str) == rng]
            fig.add_trace(go.Bar(
                name=_t(rng, 40), x=[xlab[x] for x in sub["layer"]], y=[conv(v) for v in sub[col]],
                marker_color=OTHER_COLOR if rng == OTHER_RANGES else range_color(rng),
                customdata=[[int(k), _us(g)] for k, g in zip(sub["kernels"], sub["gpu_time_ns"])],
                hovertemplate=f"%{{x}} / {_t(rng, 60)}<br>%{{customdata[0]}} kernels, %{{customdata[1]:,.1f}} \u00b5s<extra></extra>"))
        barmode = "stack"
    else:
        key = {"range": "range", "kernel": "kernel", "path": "path", "step": "step"}[by]
        df = df.sort_values([col, key], ascending=[False, True], kind="stable").head(top)
        names = [str(x) for x in df[key]]
        colors = [kernel_color(n) if by == "kernel" else range_color(n.rsplit("/", 1)[-1]) for n in names]
        fig.add_trace(go.Bar(
            x=[_t(n, 48) for n in names], y=[conv(v) for v in df[col]], marker_color=colors, showlegend=False,
            customdata=[[_t(n, 160), int(k), _us(g)] for n, k, g in zip(names, df["kernels"], df["gpu_time_ns"])],
            hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]:,} kernels, %{customdata[2]:,.1f} \u00b5s<extra></extra>"))
        barmode = "relative"
    _layout(fig, f"{_t(label, 60)}: {unit} by {by}", barmode=barmode, yaxis_title=unit)
    if by in ("kernel", "path"):
        fig.update_xaxes(tickangle=-35)
        fig.update_layout(height=520, margin=dict(b=160))
    return fig


def timeline(trace, where=None, *, title: str | None = None, max_kernels: int = 20000, max_legend: int = 15,
             step_regex: str = STEP_REGEX):
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

    (label, t), = _traces(trace)
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
                orientation="h", y=[row] * len(sub), base=[_us(s - w.t0) for s in sub["start"]],
                x=[_us(e - s) for s, e in zip(sub["start"], sub["end"])],
                marker=dict(color=[range_color(n) if n in ("qkv", "kv_write", "attention", "mlp", "lm_head") else RANGE_FILL
                                   for n in names], line=dict(color="#555555", width=1)),
                opacity=0.55, text=[_t(n, 24) for n in names], textposition="inside", insidetextanchor="middle",
                textfont=dict(color="#111111"), constraintext="both", showlegend=False, name="ranges",
                customdata=[[_t(p, 120), _us(e - s)] for p, s, e in zip(sub["path"], sub["start"], sub["end"])],
                hovertemplate="<b>%{customdata[0]}</b><br>CPU range, %{customdata[1]:,.1f} \u00b5s<br>"
                              "from %{base:,.1f} \u00b5s<extra></extra>"))
    k = w.kernels
    if len(k):
        streams = sorted(int(s) for s in k["stream"].unique())
        krows = {s: f"GPU stream {s}" for s in streams}
        rows += [krows[s] for s in streams]
        short = k["short_name"].astype(str)
        keep = _top(short.value_counts(), max_legend)
        legend = short.where(short.isin(keep), OTHER_KERNELS)
        for kname, sub in sorted(k.groupby(legend.to_numpy(), sort=False), key=lambda x: str(x[0])):
            kname = str(kname)
            fig.add_trace(go.Bar(
                orientation="h", y=[krows[int(s)] for s in sub["stream"]], base=[_us(s - w.t0) for s in sub["start"]],
                x=[_us(d) for d in sub["duration"]], name=_t(kname, 40),
                marker=dict(color=OTHER_COLOR if kname == OTHER_KERNELS else kernel_color(kname)),
                customdata=[[_t(n, 160), _t(path, 120), _us(d), f"{gx}x{gy}x{gz}", f"{bx}x{by}x{bz}"]
                            for n, path, d, gx, gy, gz, bx, by, bz in zip(
                                sub["name"].astype(str), sub["path"].astype(str), sub["duration"], sub["grid_x"],
                                sub["grid_y"], sub["grid_z"], sub["block_x"], sub["block_y"], sub["block_z"])],
                hovertemplate="<b>%{customdata[0]}</b><br>in %{customdata[1]}<br>%{customdata[2]:,.2f} \u00b5s "
                              "at %{base:,.1f} \u00b5s<br>grid %{customdata[3]}, block %{customdata[4]}<extra></extra>"))
    head = title if title is not None else f"{_t(label, 60)}: {_t(w.title, 80)}"
    nk = len(k)
    _layout(fig, f"{head} \u2014 {nk} kernel{'s' if nk != 1 else ''}, {_us(w.t1 - w.t0):,.1f} \u00b5s",
            barmode="overlay", bargap=0.25,
            height=max(260, 90 + 46 * len(rows), 110 + 21 * (min(k["short_name"].nunique(), max_legend + 1) if len(k) else 0)),
            legend=dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top", title_text="kernel"))
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


def sweep(data, x: str = "context", y: str = "median_ms", color: str = "variant", lo: str | None = "min_ms",
          hi: str | None = "max_ms", *, dash: str | None = None, facet: str | None = None, log_x: bool = True,
          title: str | None = None, x_title: str | None = None, y_title: str | None = None):
    """Lines with min–max error bars: e.g. decode latency against context length, full vs
    bucketed. ``data``: a DataFrame or a list of records with columns ``x``, ``y``, ``color``
    and optionally ``lo``/``hi``. ``dash`` names a column (e.g. ``engine``) drawn as line
    styles; ``facet`` names a column drawn as side-by-side panels, each with its own y axis
    (use it when the values differ by an order of magnitude, as eager vs CUDA-graph latency)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

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
        fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[f"{_t(facet)}: {_t(p, 40)}" for p in panels],
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
                name=_t(label, 60), x=[float(v) for v in sub[x]] if numeric else [_t(v, 40) for v in sub[x]], y=ys,
                mode="lines+markers", error_y=err, legendgroup=_t(label, 60), showlegend=col == 1,
                line=dict(color=variant_color(var), width=2.5, dash=styles.get(style, "solid")), marker=dict(size=9),
                hovertemplate=(f"{_t(label, 60)}" + (f" ({_t(panel, 40)})" if facet else "")
                               + f"<br>{_t(x)} %{{x{':,' if numeric else ''}}}<br>{_t(y)} %{{y:,.3f}}<extra></extra>"))
            if facet:
                fig.add_trace(trace, row=1, col=col)
            else:
                fig.add_trace(trace)
    _layout(fig, title or f"{_t(y)} vs {_t(x)}", height=HEIGHT + (40 if facet else 0))
    fig.update_xaxes(title_text=x_title if x_title is not None else _t(x))
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=y_title if y_title is not None else _t(y), col=1) if facet else \
        fig.update_yaxes(title_text=y_title if y_title is not None else _t(y))
    if facet:
        fig.update_layout(margin=dict(t=110), legend=dict(orientation="h", yanchor="bottom", y=1.12, xanchor="right",
                                                          x=1.0, title_text=""))
    if log_x:
        ticks = sorted({float(v) for v in df[x]})
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{v:g}" for v in ticks])
    return fig
