"""``TraceExplorer``: one trace grouped by range, layer, kernel, path or step (table and
bars), and the timeline of a step, layer or range instance."""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as widgets
import pandas as pd

from ..analysis.tables import BY, summary
from ..trace import Trace, list_traces
from .notebook import traces_root
from .timelines import timeline
from .trace_figures import summary_bars
from .widgets import error, open_cached, show

_e = html.escape


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
        return open_cached(self._cache, self.root, key)

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
            self.figure = summary_bars(self.trace, by=self.by.value, metric=self.metric.value)
            show(self.bars, self.figure)
        except Exception as e:
            self.table.value = error(str(e))
            self.bars.outputs = ()

    def show_timeline(self) -> None:
        try:
            self.timeline_figure = timeline(self.trace, self.instance.value)
            show(self.timeline, self.timeline_figure)
        except Exception as e:
            show(self.timeline, error(str(e)))
