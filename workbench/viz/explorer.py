"""``TraceExplorer``: one trace grouped by range, layer, kernel, path or step (table and
bars), and the timeline of a step, layer or range instance.

Layout, top to bottom: the trace, the timeline's controls (instance, "show timeline", the
status line) with the timeline right under them, then the grouping controls, bars and table.
"""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as widgets
import pandas as pd

from ..analysis.tables import BY, summary
from ..trace import Trace, list_traces
from ..trace.manifest import ENV, section, source_format
from ..trace.store.catalog import traces_root
from .select import index
from .timelines import timeline
from .trace_figures import summary_bars
from .widgets import error, open_cached, show, status_line, working

_e = html.escape
WHOLE = -1  # the instance choice of a trace without ranges: its first kernels


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
        self._tables: dict[tuple[int, str], pd.DataFrame] = {}  # summary per (trace, grouping)
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
        self.status = status_line()
        self.title = widgets.HTML()
        self.table = widgets.HTML()
        self.bars = widgets.Output()
        self.timeline = widgets.Output()
        self.figure = None
        self.timeline_figure = None
        head = [self.trace_select] if self.trace_select is not None else []
        controls = widgets.HBox([self.instance, self.timeline_button, self.status],
                                layout=widgets.Layout(align_items="center"))
        controls.add_class("wb-controls")
        self.timeline.add_class("wb-timeline")
        super().__init__(head + [self.title, controls, self.timeline, widgets.HBox([self.by]), widgets.HBox([self.metric]),
                                 self.bars, self.table])
        self.add_class("wb-trace-explorer")
        if self.trace_select is not None:
            self.trace_select.observe(self._on_trace, names="value")
        self.by.observe(self._on_grouping, names="value")
        self.metric.observe(self._on_grouping, names="value")
        self.timeline_button.on_click(lambda b: self.show_timeline())
        self._on_trace()

    def _open(self, key: str) -> Trace:
        return open_cached(self._cache, self.root, key)

    def _on_trace(self, change=None) -> None:
        with working(self.status):
            if self.trace_select is not None and change is not None:
                self.trace = self._open(self.trace_select.value)
            t = self.trace
            index(t)  # made once, now: no timeline waits for it
            self.title.value = (f"<b>{_e(t.label)}</b>: {len(t.kernels):,} kernels, {len(t.ranges):,} ranges, "
                                f"{_e(source_format(t.meta, '?'))} "
                                f"{_e(str(section(t.meta, ENV).get('gpu', '')))}")
            opts = self.instance_options()
            # Options alone leave an ipywidgets 8 dropdown blank: the first step is selected.
            self.instance.options = opts
            self.instance.value = opts[0][1] if opts else None
            self.timeline.outputs = ()
            self._render()

    def _on_grouping(self, change=None) -> None:
        with working(self.status):
            self._render()

    def instance_options(self, limit: int = 300) -> list[tuple[str, int]]:
        """The top-level ranges (steps, windows), then every range inside the first, indented
        by depth; a trace without ranges has one choice, its first kernels (``WHOLE``)."""
        r = self.trace.ranges
        if not len(r):
            return [("whole trace (no ranges)", WHOLE)]
        steps = r[r["depth"] == 0].sort_values(["start", "id"], kind="stable")
        opts = [(str(x.path), int(x.id)) for x in steps.head(50).itertuples()]
        if len(steps):
            ids = index(self.trace).subtree(int(steps["id"].iloc[0]))  # by start, depth
            inner = r.iloc[ids[r["depth"].to_numpy()[ids] > 0]]
            opts += [("\u2003" * int(x.depth) + str(x.path), int(x.id)) for x in inner.head(limit).itertuples()]
        return opts

    def _render(self) -> None:
        try:
            key = (id(self.trace), self.by.value)
            if key not in self._tables:
                self._tables[key] = summary(self.trace, by=self.by.value)
            df = self._tables[key]
            self.table.value = _fmt_table(df)
            self.figure = summary_bars(self.trace, by=self.by.value, metric=self.metric.value)
            show(self.bars, self.figure)
        except Exception as e:
            self.table.value = error(str(e))
            self.bars.outputs = ()

    def show_timeline(self) -> None:
        """Draw the selected instance (same as clicking "show timeline")."""
        with working(self.status):
            try:
                where = None if self.instance.value == WHOLE else self.instance.value
                self.timeline_figure = timeline(self.trace, where)
                show(self.timeline, self.timeline_figure)
            except Exception as e:
                show(self.timeline, error(str(e)))
