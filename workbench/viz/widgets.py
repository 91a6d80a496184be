"""ipywidgets 8 widgets: :class:`TraceDiffWidget` (two traces, per layer / per range, aligned
kernels, timeline) and :class:`TraceExplorer` (one trace, grouped tables, bars, timeline).

Figures are plotly ``go.Figure`` objects shown inside ``ipywidgets.Output`` as the plotly
mime type (``application/vnd.plotly.v1+json``), which JupyterLab renders through the plotly
extension bundled with the ``plotly`` package: no ``anywidget``, no CDN. Every
trace-supplied string that reaches HTML goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import ipywidgets as widgets
import pandas as pd

from ..analysis.diff import Alignment, TraceDiff, diff
from ..analysis.projection import NO_LAUNCH, NO_RANGE
from ..analysis.tables import BY, summary
from ..trace import open_trace
from ..trace.schema import Trace
from ..trace.store import list_traces
from . import figures
from .colors import STATUS, STATUS_TEXT
from .notebook import find_pair, traces_root

# Engines whose kernels are not launched under layer ranges (graph replay) or are re-fused.
_NOT_LAYERED = ("bucketed", "cudagraph", "compile")

_e = html.escape


def figure_output(fig) -> dict:
    """A display_data output holding ``fig`` as the plotly mime type (what an Output shows)."""
    data = json.loads(fig.to_json())
    data["config"] = {"displaylogo": False, "responsive": True}
    title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
    return {"output_type": "display_data", "metadata": {},
            "data": {"application/vnd.plotly.v1+json": data, "text/plain": f"<plotly figure: {title}>"}}


def _show(out: widgets.Output, *figs_or_html) -> None:
    items = []
    for x in figs_or_html:
        if isinstance(x, str):
            items.append({"output_type": "display_data", "metadata": {},
                          "data": {"text/html": x, "text/plain": html.unescape(x)}})
        else:
            items.append(figure_output(x))
    out.outputs = tuple(items)


def _us(ns: float) -> str:
    return f"{float(ns) / 1000:,.1f} \u00b5s"


def _n(x: float) -> str:
    x = float(x)
    return f"{int(x):,}" if x.is_integer() else f"{x:,.2f}"


def _error(msg: str) -> str:
    return f'<div style="color:#a50f15"><b>error:</b> {_e(msg)}</div>'


def alignment_table(al: Alignment, max_rows: int = 120) -> str:
    """Side-by-side HTML table of an alignment: A's kernels left, B's right; removed (red),
    added (green). A removed block followed by an added block shares rows: what replaced what."""
    rows: list[tuple[str, str | None, str | None]] = []
    ops = list(al.ops)
    i = 0
    while i < len(ops):
        op, names = ops[i]
        if op == "equal":
            rows += [("equal", n, n) for n in names]
        elif op == "removed" and i + 1 < len(ops) and ops[i + 1][0] == "added":
            added = ops[i + 1][1]
            for j in range(max(len(names), len(added))):
                rows.append(("replace", names[j] if j < len(names) else None, added[j] if j < len(added) else None))
            i += 1
        elif op == "removed":
            rows += [("removed", n, None) for n in names]
        else:
            rows += [("added", None, n) for n in names]
        i += 1
    def td(name: str | None, status: str) -> str:
        if name is None:
            return '<td class="wb-none"></td>'
        mark = {"removed": "\u2212 ", "added": "+ "}.get(status, "")
        return f'<td class="wb-{status}" title="{_e(name)}">{mark}{_e(name)}</td>'

    body = []
    for kind, a, b in rows[:max_rows]:
        sa = "equal" if kind == "equal" else "removed"
        sb = "equal" if kind == "equal" else "added"
        body.append(f'<tr class="wb-{kind}">{td(a, sa)}{td(b, sb)}</tr>')
    if len(rows) > max_rows:
        body.append(f'<tr><td colspan="2" class="wb-more">\u2026 {len(rows) - max_rows} more rows</td></tr>')
    return f'<table class="wb-alignment"><tr><th>A</th><th>B</th></tr>{"".join(body)}</table>'


_STYLE = (
    "<style>"
    ".wb-alignment{border-collapse:collapse;margin:2px 0 10px 0}"
    ".wb-alignment td,.wb-alignment th{padding:1px 8px;font-family:monospace;font-size:12px;white-space:nowrap;"
    "max-width:440px;overflow:hidden;text-overflow:ellipsis;text-align:left}"
    f".wb-alignment td.wb-removed{{background:{STATUS['removed']};color:{STATUS_TEXT['removed']}}}"
    f".wb-alignment td.wb-added{{background:{STATUS['added']};color:{STATUS_TEXT['added']}}}"
    f".wb-alignment td.wb-equal{{color:{STATUS_TEXT['equal']}}}"
    ".wb-alignment td.wb-none{background:#fafafa}.wb-alignment td.wb-more{color:#666}"
    "</style>"
)


def _range_header(r) -> str:
    return (f"<div style='margin-top:6px'><b>{_e(str(r.range))}</b>: kernels/step {_n(r.kernels_a)} \u2192 "
            f"{_n(r.kernels_b)}, GPU time/step {_us(r.gpu_time_ns_a)} \u2192 {_us(r.gpu_time_ns_b)}</div>")



def _open_cached(cache: dict[str, Trace], root, key: str) -> Trace:
    """A stored trace by name under ``root`` (or any path), opened once per widget."""
    if key not in cache:
        src = root / key if (root / key).is_dir() else key
        cache[key] = open_trace(str(src))
    return cache[key]

class TraceDiffWidget(widgets.VBox):
    """Compare two stored traces: pick A and B, a layer or a range; see kernels and GPU time
    per step A vs B, the aligned kernel sequences side by side, and (button) the timeline of
    that range instance in both traces.

    ``a``/``b``: stored trace names, or ``Trace`` objects (added to the choices); ``root``:
    the trace store (default: ``$WORKBENCH_TRACES`` or the repository's ``traces/``).
    """

    def __init__(self, a=None, b=None, root=None, *, max_groups: int = 8, max_ranges: int = 400):
        self.root = Path(root) if root is not None else traces_root()
        self.max_groups = max_groups
        self.max_ranges = max_ranges
        self._traces: dict[str, Trace] = {}
        self._diffs: dict[tuple[str, str], TraceDiff] = {}
        options = [(n, n) for n in list_traces(self.root)]
        keys = []
        for t in (a, b):
            if isinstance(t, Trace):
                key = f"{t.label} (in memory #{len(self._traces)})"
                self._traces[key] = t
                options.append((key, key))
                keys.append(key)
            else:
                keys.append(str(t) if t is not None else None)
        names = [v for _, v in options]
        if keys[0] is None or keys[1] is None:
            pair = find_pair("unfused", "fused", "kvwrite", root=self.root, exclude=_NOT_LAYERED,
                             prefer=("nsys", "eager")) or (None, None)
            if keys[0] is None:
                keys[0] = pair[0] or (names[0] if names else None)
            if keys[1] is None:
                keys[1] = pair[1] or (names[1] if len(names) > 1 else keys[0])
        for k in keys:
            if k is not None and k not in names:  # a path or a name outside the store
                options.append((k, k))
                names.append(k)
        style = {"description_width": "initial"}
        lay = widgets.Layout(width="48%")
        self.a_select = widgets.Dropdown(options=options, value=keys[0], description="A (before)", style=style, layout=lay)
        self.b_select = widgets.Dropdown(options=options, value=keys[1], description="B (after)", style=style, layout=lay)
        self.scope = widgets.Dropdown(options=[("all layers", "all")], value="all", description="layer / range",
                                      style=style, layout=widgets.Layout(width="60%"))
        self.timeline_button = widgets.Button(description="show timeline", icon="chart-bar", button_style="info",
                                              tooltip="Gantt of this layer / range instance in A and B")
        self.summary = widgets.HTML()
        self.bars = widgets.Output(layout=widgets.Layout(width="100%"))
        self.table = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.timeline = widgets.Output(layout=widgets.Layout(width="100%"))
        self.diff: TraceDiff | None = None
        self.figure = None
        self.timeline_figures: list = []
        super().__init__([
            widgets.HBox([self.a_select, self.b_select]),
            widgets.HBox([self.scope, self.timeline_button]),
            self.summary, self.bars,
            widgets.HTML("<b>Aligned kernel sequences</b> (first instance of each range; "
                         "<span style='background:#fde0dd;color:#a50f15'>&minus; removed in B</span>, "
                         "<span style='background:#e5f5e0;color:#006d2c'>+ added in B</span>)"),
            self.table, self.timeline,
        ])
        self.add_class("wb-trace-diff")
        self.a_select.observe(self._on_traces, names="value")
        self.b_select.observe(self._on_traces, names="value")
        self.scope.observe(self._on_scope, names="value")
        self.timeline_button.on_click(self._on_timeline)
        self._on_traces()

    # -- data ------------------------------------------------------------------------------
    def _trace(self, key: str) -> Trace:
        return _open_cached(self._traces, self.root, key)

    def _diff(self) -> TraceDiff:
        pair = (self.a_select.value, self.b_select.value)
        if pair not in self._diffs:
            self._diffs[pair] = diff(self._trace(pair[0]), self._trace(pair[1]))
        return self._diffs[pair]

    def scope_options(self, d: TraceDiff) -> list[tuple[str, str]]:
        opts = [("all layers", "all")]
        layers = sorted(int(x) for x in d.ranges["layer"].unique() if x >= 0)
        for layer in layers:
            sub = d.ranges[d.ranges["layer"] == layer]
            opts.append((f"layer {layer}  (kernels/step {_n(sub['kernels_a'].sum())} \u2192 {_n(sub['kernels_b'].sum())})",
                         f"layer:{layer}"))
        ranges = d.ranges
        if len(ranges) > self.max_ranges:  # a long dropdown is unusable: the ranges that changed most
            order = ranges.assign(_w=ranges["delta_gpu_time_ns"].abs()).sort_values(["_w", "range"], ascending=[False, True],
                                                                                     kind="stable")
            ranges = order.head(self.max_ranges)
        for r in ranges.sort_values("range", kind="stable").itertuples():
            tag = {"only_a": "  [only in A]", "only_b": "  [only in B]"}.get(r.status, "")
            opts.append((f"{r.range}  ({_n(r.kernels_a)} \u2192 {_n(r.kernels_b)}){tag}", f"range:{r.range}"))
        return opts

    # -- events ----------------------------------------------------------------------------
    def _on_traces(self, change=None) -> None:
        self.timeline.outputs = ()
        self.timeline_figures = []
        if self.a_select.value is None or self.b_select.value is None:
            self.summary.value = _error(f"no stored traces under {self.root}: pass a= and b= (names, paths or Trace "
                                        "objects) or root=")
            return
        try:
            d = self._diff()
        except Exception as e:  # show it in the widget: a callback's exception is easy to miss
            self.diff = None
            self.summary.value = _error(str(e))
            self.bars.outputs = ()
            self.table.value = ""
            return
        self.diff = d
        old = self.scope.value
        opts = self.scope_options(d)
        values = [v for _, v in opts]
        with self.hold_trait_notifications():
            self.scope.unobserve(self._on_scope, names="value")
            self.scope.options = opts
            self.scope.value = old if old in values else "all"
            self.scope.observe(self._on_scope, names="value")
        self._render()

    def _on_scope(self, change=None) -> None:
        self.timeline.outputs = ()
        self.timeline_figures = []
        self._render()

    def _where(self):
        v = self.scope.value
        if v.startswith("layer:"):
            return ("layer", int(v.split(":", 1)[1]))
        if v.startswith("range:"):
            return v.split(":", 1)[1]
        return None

    def _render(self) -> None:
        d = self.diff
        if d is None:
            return
        t = d.totals
        head = (f"<div class='wb-summary'><b>A</b> {_e(d.a)} \u2192 <b>B</b> {_e(d.b)}: kernels/step "
                f"<b>{_n(t['kernels_per_step_a'])} \u2192 {_n(t['kernels_per_step_b'])}</b>, GPU time/step "
                f"<b>{_us(t['gpu_time_per_step_ns_a'])} \u2192 {_us(t['gpu_time_per_step_ns_b'])}</b> "
                f"({t['steps_a']} vs {t['steps_b']} captured steps; {d.common} ranges in common)</div>")
        if d.common == 0:
            head += ("<div style='color:#a50f15'>No range in common between A and B: their range paths differ "
                     f"entirely ({t['only_a_ranges']} only in A, {t['only_b_ranges']} only in B).</div>")
        self.summary.value = head
        v = self.scope.value
        try:
            if v == "all":
                fig = figures.diff_bars(d, None)
            elif v.startswith("layer:"):
                fig = figures.diff_bars(d, int(v.split(":", 1)[1]))
            else:
                fig = figures.diff_bars(d, v.split(":", 1)[1])
        except Exception as e:
            self.figure = None
            self.bars.outputs = ()
            self.table.value = _error(str(e))
            return
        self.figure = fig
        _show(self.bars, fig)
        self.table.value = self._alignments_html(d, v)

    def _alignments_html(self, d: TraceDiff, v: str) -> str:
        r = d.ranges[d.ranges["status"] == "both"]
        if v.startswith("layer:"):
            r = r[r["layer"] == int(v.split(":", 1)[1])]
        elif v.startswith("range:"):
            key = v.split(":", 1)[1]
            r = d.ranges[d.ranges["range"] == key]
            if len(r) and r["status"].iloc[0] != "both":
                side = "A" if r["status"].iloc[0] == "only_a" else "B"
                return f"<div>{_e(key)} exists only in {side}: nothing to align.</div>"
        if not len(r):
            return "<div>No range in common: nothing to align.</div>"
        parts = []
        if v == "all":
            # Ranges with the same aligned sequences (every layer's kv_write) are shown once.
            changed = r[(r["kernels_a"] != r["kernels_b"])]
            if not len(changed):
                changed = r
            groups: dict[tuple, list] = {}
            for row in changed.sort_values("range", kind="stable").itertuples():
                al = d.alignments.get(row.range)
                sig = tuple((op, tuple(ks)) for op, ks in al.ops) if al else ()
                groups.setdefault(sig, []).append(row)
            ordered = sorted(groups.values(), key=lambda rows: (-abs(sum(x.delta_kernels for x in rows)), rows[0].range))
            for rows in ordered[: self.max_groups]:
                first = rows[0]
                al = d.alignments.get(first.range)
                names = ", ".join(_e(str(x.range)) for x in rows[:6]) + (f", \u2026 ({len(rows)} ranges)" if len(rows) > 6 else "")
                parts.append(f"<div style='margin-top:6px'><b>{names}</b>: kernels/step {_n(first.kernels_a)} \u2192 "
                             f"{_n(first.kernels_b)} each; {_e(al.describe()) if al else ''}</div>")
                if al:
                    parts.append(alignment_table(al))
            if len(ordered) > self.max_groups:
                parts.append(f"<div>\u2026 {len(ordered) - self.max_groups} more groups; pick a layer or range.</div>")
        else:
            for row in r.sort_values("range", kind="stable").itertuples():
                al = d.alignments.get(row.range)
                parts.append(_range_header(row) + (f"<div style='color:#555'>{_e(al.describe())}</div>" if al else ""))
                if al:
                    parts.append(alignment_table(al))
        return _STYLE + "<div class='wb-alignments'>" + "".join(parts) + "</div>"

    def _on_timeline(self, button=None) -> None:
        d = self.diff
        if d is None:
            return
        where = self._where()
        items, figs = [], []
        if where in (NO_RANGE, NO_LAUNCH):
            self.timeline_figures = []
            _show(self.timeline, f"<div>{_e(where)}: these kernels have no range instance to draw; "
                                 "pick a layer or a range.</div>")
            return
        for side, key in (("A", self.a_select.value), ("B", self.b_select.value)):
            try:
                fig = figures.timeline(self._trace(key), where)
                fig.update_layout(title_text=f"{side}: " + (fig.layout.title.text or ""))
                figs.append(fig)
                items.append(fig)
            except Exception as e:
                items.append(_error(f"{side}: {e}"))
        self.timeline_figures = figs
        _show(self.timeline, *items)

    def show_timeline(self) -> None:
        """Same as clicking "show timeline"."""
        self._on_timeline()


def _fmt_table(df: pd.DataFrame, max_rows: int = 60) -> str:
    shown = df.head(max_rows).copy()
    if "gpu_time_ns" in shown:
        shown.insert(list(shown.columns).index("gpu_time_ns"), "gpu_time_us", (shown["gpu_time_ns"] / 1000).round(2))
        shown = shown.drop(columns=["gpu_time_ns"])
    for c in ("mean_ns", "min_ns", "max_ns"):
        if c in shown:
            shown[c.replace("_ns", "_us")] = (shown[c] / 1000).round(2)
            shown = shown.drop(columns=[c])
    if "kernels_per_instance" in shown:
        shown["kernels_per_instance"] = shown["kernels_per_instance"].round(2)
    body = shown.to_html(index=False, escape=True, border=0, classes="wb-table")
    more = f"<div style='color:#666'>\u2026 {len(df) - max_rows} more rows</div>" if len(df) > max_rows else ""
    return f"<div style='max-height:420px;overflow:auto;font-size:12px'>{body}</div>{more}"


class TraceExplorer(widgets.VBox):
    """One trace: kernel counts and GPU time grouped by range, layer, kernel, path or step
    (table and bars), and the timeline of a step, layer or range instance.

    ``trace``: a ``Trace``, a stored name, a trace directory or a capture file; ``None`` adds a
    dropdown over the store at ``root``.
    """

    def __init__(self, trace=None, root=None):
        self.root = Path(root) if root is not None else traces_root()
        self._cache: dict[str, Trace] = {}
        self.trace_select = None
        if trace is None:
            names = list_traces(self.root)
            if not names:
                raise ValueError(f"no stored traces under {self.root}")
            self.trace_select = widgets.Dropdown(options=names, value=names[0], description="trace")
            self.trace = self._open(names[0])
        else:
            self.trace = trace if isinstance(trace, Trace) else self._open(str(trace))
        self.by = widgets.ToggleButtons(options=list(BY), value="range", description="group by")
        self.metric = widgets.ToggleButtons(options=[("GPU time", "gpu_time"), ("kernels", "kernels")],
                                            value="gpu_time", description="metric")
        self.instance = widgets.Dropdown(description="instance", layout=widgets.Layout(width="60%"))
        self.timeline_button = widgets.Button(description="show timeline", icon="chart-bar", button_style="info")
        self.title = widgets.HTML()
        self.table = widgets.HTML()
        self.bars = widgets.Output()
        self.timeline = widgets.Output()
        self.figure = None
        self.timeline_figure = None
        head = [self.trace_select] if self.trace_select is not None else []
        super().__init__(head + [self.title, widgets.HBox([self.by]), widgets.HBox([self.metric]), self.bars, self.table,
                                 widgets.HBox([self.instance, self.timeline_button]), self.timeline])
        self.add_class("wb-trace-explorer")
        if self.trace_select is not None:
            self.trace_select.observe(self._on_trace, names="value")
        self.by.observe(lambda c: self._render(), names="value")
        self.metric.observe(lambda c: self._render(), names="value")
        self.timeline_button.on_click(lambda b: self.show_timeline())
        self._on_trace()

    def _open(self, key: str) -> Trace:
        return _open_cached(self._cache, self.root, key)

    def _on_trace(self, change=None) -> None:
        if self.trace_select is not None and change is not None:
            self.trace = self._open(self.trace_select.value)
        t = self.trace
        self.title.value = (f"<b>{_e(t.label)}</b>: {len(t.kernels):,} kernels, {len(t.ranges):,} ranges, "
                            f"{_e(str(t.meta.get('source', {}).get('format', '?')))} "
                            f"{_e(str(t.meta.get('env', {}).get('gpu', '')))}")
        self.instance.options = self.instance_options()
        self.timeline.outputs = ()
        self._render()

    def instance_options(self, limit: int = 300) -> list[tuple[str, int]]:
        r = self.trace.ranges
        if not len(r):
            return []
        steps = r[r["depth"] == 0].sort_values(["start", "id"], kind="stable")
        opts = [(str(x.path), int(x.id)) for x in steps.head(50).itertuples()]
        if len(steps):
            first = steps.iloc[0]
            inner = r[(r["depth"] > 0) & (r["pid"] == first["pid"]) & (r["tid"] == first["tid"])
                      & (r["start"] >= first["start"]) & (r["end"] <= first["end"])]
            inner = inner.sort_values(["start", "depth"], kind="stable")
            opts += [("\u2003" * int(x.depth) + str(x.path), int(x.id)) for x in inner.head(limit).itertuples()]
        return opts

    def _render(self) -> None:
        try:
            df = summary(self.trace, by=self.by.value)
            self.table.value = _fmt_table(df)
            self.figure = figures.summary_bars(self.trace, by=self.by.value, metric=self.metric.value)
            _show(self.bars, self.figure)
        except Exception as e:
            self.table.value = _error(str(e))
            self.bars.outputs = ()

    def show_timeline(self) -> None:
        try:
            self.timeline_figure = figures.timeline(self.trace, self.instance.value)
            _show(self.timeline, self.timeline_figure)
        except Exception as e:
            _show(self.timeline, _error(str(e)))
