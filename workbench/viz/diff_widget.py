"""``TraceDiffWidget``: two stored traces side by side, per layer and per range, with their
aligned kernel sequences and (on request) the timelines of one range instance.

Layout, top to bottom: the controls (A, B; layer / range, "show timeline" and the status
line), the timelines right under them, the summary, the bars, the aligned sequences. Each trace
is indexed once (:func:`~workbench.viz.select.index`) when it is picked, so a selection only
touches the rows it shows.
"""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as widgets

from ..analysis.diff import TraceDiff, diff
from ..analysis.inferred.timing import source
from ..analysis.per_step import time_moved
from ..analysis.projection import NO_LAUNCH, NO_RANGE
from ..textfmt import natural_key, num, pct, us
from ..trace import Trace, list_traces
from ..trace.store.catalog import traces_root
from .colors import STATUS, STATUS_TEXT
from .common import TRT, fmt_ns, units
from .diff_figures import diff_bars
from .notebook import default_pair
from .select import index
from .timelines import timeline, timeline_pair
from .widgets import _STYLE, alignment_table, error, open_cached, range_header, show, status_line, working

_e = html.escape


def _marked(status: str) -> str:
    """The inline style of kernels ``removed`` or ``added`` (as the alignment table marks them)."""
    return f"background:{STATUS[status]};color:{STATUS_TEXT[status]}"


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
            pair = default_pair(self.root) or (None, None)
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
        self.status = status_line()
        self.summary = widgets.HTML()
        self.bars = widgets.Output(layout=widgets.Layout(width="100%"))
        self.table = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.timeline = widgets.Output(layout=widgets.Layout(width="100%"))
        self.diff: TraceDiff | None = None
        self.figure = None
        self.timeline_figures: list = []
        controls = widgets.VBox([
            widgets.HBox([self.a_select, self.b_select]),
            widgets.HBox([self.scope, self.timeline_button, self.status], layout=widgets.Layout(align_items="center")),
        ])
        controls.add_class("wb-controls")
        self.timeline.add_class("wb-timeline")
        super().__init__([
            controls, self.timeline, self.summary, self.bars,
            widgets.HTML("<b>Aligned kernel sequences</b> (first instance of each range; "
                         f"<span style='{_marked('removed')}'>&minus; removed in B</span>, "
                         f"<span style='{_marked('added')}'>+ added in B</span>)"),
            self.table,
        ])
        self.add_class("wb-trace-diff")
        self.a_select.observe(self._on_traces, names="value")
        self.b_select.observe(self._on_traces, names="value")
        self.scope.observe(self._on_scope, names="value")
        self.timeline_button.on_click(self._on_timeline)
        self._on_traces()

    # -- data ------------------------------------------------------------------------------
    def _trace(self, key: str) -> Trace:
        return open_cached(self._traces, self.root, key)

    def _diff(self) -> TraceDiff:
        pair = (self.a_select.value, self.b_select.value)
        if pair not in self._diffs:
            a, b = self._trace(pair[0]), self._trace(pair[1])
            self._diffs[pair] = diff(a, b)
            index(a), index(b)  # made now, with the diff, so that no selection waits for them
        return self._diffs[pair]

    def scope_options(self, d: TraceDiff) -> list[tuple[str, str]]:
        u = units(d)
        opts = [("every engine layer" if u is TRT else "all layers", "all")]
        steps = d.per_step()  # a layer's numbers are per decode step: prefill is not added in
        for layer in sorted(int(x) for x in steps["layer"].unique() if x >= 0):
            sub = steps[steps["layer"] == layer]
            opts.append((f"layer {layer}  ({u.works} per {u.decode_step} {num(sub['kernels_a'].sum())} \u2192 "
                         f"{num(sub['kernels_b'].sum())})", f"layer:{layer}"))
        ranges = d.ranges
        if len(ranges) > self.max_ranges:  # a long dropdown is unusable: the ranges that changed most
            order = ranges.assign(_w=ranges["delta_gpu_time_ns"].abs()).sort_values(["_w", "range"], ascending=[False, True],
                                                                                     kind="stable")
            ranges = order.head(self.max_ranges)
        for r in sorted(ranges.itertuples(), key=lambda r: natural_key(r.range)):
            tag = {"only_a": "  [only in A]", "only_b": "  [only in B]"}.get(r.status, "")
            opts.append((f"{r.range}  ({num(r.kernels_a)} \u2192 {num(r.kernels_b)}){tag}", f"range:{r.range}"))
        return opts

    # -- events ----------------------------------------------------------------------------
    def _on_traces(self, change=None) -> None:
        with working(self.status):
            self._load()

    def _load(self) -> None:
        self.timeline.outputs = ()
        self.timeline_figures = []
        if self.a_select.value is None or self.b_select.value is None:
            self.summary.value = error(f"no stored traces under {self.root}: pass a= and b= (names, paths or Trace "
                                        "objects) or root=")
            return
        try:
            d = self._diff()
        except Exception as e:  # show it in the widget: a callback's exception is easy to miss
            self.diff = None
            self.summary.value = error(str(e))
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
        with working(self.status):
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
        u = units(d)
        steps = "" if u is TRT else f"{t['steps_a']} vs {t['steps_b']} captured decode steps; "
        head = (f"<div class='wb-summary'><b>A</b> {_e(d.a)} \u2192 <b>B</b> {_e(d.b)}: {u.works} per {u.decode_step} "
                f"<b>{num(t['kernels_per_step_a'])} \u2192 {num(t['kernels_per_step_b'])}</b>, {u.time} per "
                f"{u.decode_step} <b>{us(t['gpu_time_per_step_ns_a'])} \u2192 {us(t['gpu_time_per_step_ns_b'])}</b> "
                f"({steps}{d.common} {u.range}s in common)</div>")
        for c in d.timing:  # recorded timing, else the decode steps timed from the traces
            where = source(c)
            head += f"<div class='wb-timing'>{_e(c.line())}{f' <i>[{_e(where)}]</i>' if where else ''}</div>"
        if none := d.nothing_in_common():
            head += f"<div style='color:{STATUS_TEXT['removed']}'>{_e(none[0].upper() + none[1:])}.</div>"
        self.summary.value = head
        v = self.scope.value
        try:
            if v == "all":
                fig = diff_bars(d, None)
            elif v.startswith("layer:"):
                fig = diff_bars(d, int(v.split(":", 1)[1]))
            else:
                fig = diff_bars(d, v.split(":", 1)[1])
        except Exception as e:
            self.figure = None
            self.bars.outputs = ()
            self.table.value = error(str(e))
            return
        self.figure = fig
        show(self.bars, fig)
        self.table.value = self._alignments_html(d, v)

    def _precisions(self) -> tuple[dict, dict] | None:
        """Per side, a TensorRT engine's layer name -> precision; None for other traces."""
        if units(self.diff) is not TRT:
            return None
        from ..analysis.trt_layers import engine_layers

        out = []
        for key in (self.a_select.value, self.b_select.value):
            layers = engine_layers(self._trace(key))
            out.append(dict(zip(layers["name"].astype(str), layers["precision"].astype(str))))
        return out[0], out[1]

    @staticmethod
    def _change(d: TraceDiff, row, precisions) -> tuple:
        """What kind of change a range had: the kernels its alignment removed and added; else
        its kernels per step, its precision change (a TensorRT layer) and which way its time
        moved (0: it did not). Ranges of one kind are listed together."""
        al = d.alignments.get(row.range)
        if al is not None and (al.removed or al.added):
            return ("kernels", tuple((op, tuple(ks)) for op, ks in al.ops))
        prec = None
        if precisions is not None:
            pa, pb = precisions[0].get(str(row.name), ""), precisions[1].get(str(row.name), "")
            prec = (pa, pb) if pa != pb else None
        a, b = float(row.gpu_time_ns_a), float(row.gpu_time_ns_b)
        sign = ((b > a) - (b < a)) if bool(time_moved(a, b)) else 0
        return ("same", float(row.kernels_a), float(row.kernels_b), prec, sign)

    @staticmethod
    def _describe(d: TraceDiff, rows: list, kind: tuple) -> str:
        """What changed in the ranges ``rows`` of one kind (:meth:`_change`): the kernels removed
        and added, else the precision and the time where they moved (the mean over the ranges);
        "unchanged" only when nothing did."""
        if kind[0] == "kernels":
            return d.alignments[rows[0].range].describe()
        u = units(d)
        _, _, _, prec, sign = kind
        parts = [] if u is TRT else [f"same {u.works}"]  # a TensorRT range is one layer
        if prec:
            parts.append(f"precision {prec[0] or '?'} \u2192 {prec[1] or '?'}")
        if sign:
            ta = sum(float(r.gpu_time_ns_a) for r in rows) / len(rows)
            tb = sum(float(r.gpu_time_ns_b) for r in rows) / len(rows)
            each = " each on average" if len(rows) > 1 else ""
            parts.append(f"{u.time} {fmt_ns(ta)} \u2192 {fmt_ns(tb)}{each} ({pct(tb, ta)})")
        return ", ".join(parts) if prec or sign else "unchanged"

    def _alignments_html(self, d: TraceDiff, v: str) -> str:
        r = d.per_step()
        r = r[r["status"] == "both"]
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
        u = units(d)
        precisions = self._precisions()
        parts = []
        if v == "all":
            # The ranges whose kernels changed; where none did, those whose time (or precision)
            # moved, largest move first; ranges with the same aligned sequences and the same
            # change (every layer's kv_write) are shown once.
            changed = r[r["kernels_a"] != r["kernels_b"]]
            if not len(changed):
                changed = r[r["changed"] != ""] if (r["changed"] != "").any() else r
            groups: dict[tuple, list] = {}
            for row in sorted(changed.itertuples(), key=lambda x: natural_key(x.range)):
                groups.setdefault(self._change(d, row, precisions), []).append(row)
            ordered = sorted(groups.items(), key=lambda g: (-abs(sum(x.delta_kernels for x in g[1])),
                                                            -abs(sum(x.delta_gpu_time_ns for x in g[1])),
                                                            natural_key(g[1][0].range)))
            for kind, rows in ordered[: self.max_groups]:
                first = rows[0]
                al = d.alignments.get(first.range)
                names = ", ".join(_e(str(x.range)) for x in rows[:6]) + (f", \u2026 ({len(rows)} {u.range}s)"
                                                                         if len(rows) > 6 else "")
                parts.append(f"<div style='margin-top:6px'><b>{names}</b>: {u.works} per {u.decode_step} "
                             f"{num(first.kernels_a)} \u2192 {num(first.kernels_b)} each; "
                             f"{_e(self._describe(d, rows, kind))}</div>")
                if al:
                    parts.append(alignment_table(al))
            if len(ordered) > self.max_groups:
                parts.append(f"<div>\u2026 {len(ordered) - self.max_groups} more groups; pick a layer or range.</div>")
        else:
            for row in sorted(r.itertuples(), key=lambda x: natural_key(x.range)):
                al = d.alignments.get(row.range)
                what = _e(self._describe(d, [row], self._change(d, row, precisions)))
                parts.append(range_header(row, u) + f"<div style='color:#555'>{what}</div>")
                if al:
                    parts.append(alignment_table(al))
        return _STYLE + "<div class='wb-alignments'>" + "".join(parts) + "</div>"

    def _on_timeline(self, button=None) -> None:
        with working(self.status):
            self._draw_timelines()

    def _draw_timelines(self) -> None:
        d = self.diff
        if d is None:
            return
        where = self._where()
        items, figs = [], []
        if where in (NO_RANGE, NO_LAUNCH):
            self.timeline_figures = []
            show(self.timeline, f"<div>{_e(where)}: these kernels have no range instance to draw; "
                                 "pick a layer or a range.</div>")
            return
        sides = (("A", self.a_select.value), ("B", self.b_select.value))
        try:  # both at once: one kernel colour map for the two
            drawn = list(timeline_pair([self._trace(key) for _, key in sides], where))
        except Exception:  # a side without this range: each drawn alone, the failing one says why
            drawn = []
            for side, key in sides:
                try:
                    drawn.append(timeline(self._trace(key), where))
                except Exception as e:
                    drawn.append(error(f"{side}: {e}"))
        for (side, _), fig in zip(sides, drawn):
            if not isinstance(fig, str):
                fig.update_layout(title_text=f"{side}: " + (fig.layout.title.text or ""))
                figs.append(fig)
            items.append(fig)
        self.timeline_figures = figs
        show(self.timeline, *items)

    def show_timeline(self) -> None:
        """Same as clicking "show timeline"."""
        self._on_timeline()
