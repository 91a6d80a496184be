"""What the ipywidgets 8 widgets share (:class:`~workbench.viz.diff_widget.TraceDiffWidget`,
two traces; :class:`~workbench.viz.explorer.TraceExplorer`, one trace), and the aligned-kernel
table they and the notebooks show.

Figures are plotly ``go.Figure`` objects shown inside ``ipywidgets.Output`` as the plotly
mime type (``application/vnd.plotly.v1+json``), which JupyterLab renders through the plotly
extension bundled with the ``plotly`` package: no ``anywidget``, no CDN. Every
trace-supplied string that reaches HTML goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import json
import time
from contextlib import contextmanager

import ipywidgets as widgets

from ..analysis.diff import Alignment
from ..textfmt import num, us
from ..trace import Trace, open_trace
from .colors import STATUS, STATUS_TEXT
from .common import GPU, Units

_e = html.escape


def figure_output(fig) -> dict:
    """A display_data output holding ``fig`` as the plotly mime type (what an Output shows)."""
    data = json.loads(fig.to_json())
    data["config"] = {"displaylogo": False, "responsive": True}
    title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
    return {"output_type": "display_data", "metadata": {},
            "data": {"application/vnd.plotly.v1+json": data, "text/plain": f"<plotly figure: {title}>"}}


def show(out: widgets.Output, *figs_or_html) -> None:
    """Replace what ``out`` shows with these figures and HTML strings, in order."""
    items = []
    for x in figs_or_html:
        if isinstance(x, str):
            items.append({"output_type": "display_data", "metadata": {},
                          "data": {"text/html": x, "text/plain": html.unescape(x)}})
        else:
            items.append(figure_output(x))
    out.outputs = tuple(items)


def error(msg: str) -> str:
    """An error shown inside a widget: a callback's exception is easy to miss."""
    return f'<div style="color:{STATUS_TEXT["removed"]}"><b>error:</b> {_e(msg)}</div>'


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


def range_header(r, u: Units = GPU) -> str:
    """One line naming a diff row (a range): its work units and their time per step, A -> B,
    in the words ``u`` of the trace (:func:`~workbench.viz.units`)."""
    return (f"<div style='margin-top:6px'><b>{_e(str(r.range))}</b>: {u.works} per {u.decode_step} "
            f"{num(r.kernels_a)} \u2192 {num(r.kernels_b)}, {u.time} per {u.decode_step} {us(r.gpu_time_ns_a)} "
            f"\u2192 {us(r.gpu_time_ns_b)}</div>")


def open_cached(cache: dict[str, Trace], root, key: str) -> Trace:
    """A stored trace by name under ``root`` (or any path), opened once per widget."""
    if key not in cache:
        src = root / key if (root / key).is_dir() else key
        cache[key] = open_trace(str(src))
    return cache[key]


SPINNER = ("<style>@keyframes wb-spin{to{transform:rotate(360deg)}}</style>"
           "<span class='wb-working' style='color:#555'><span style='display:inline-block;width:11px;height:11px;"
           "border:2px solid #cfcfcf;border-top-color:#1f77b4;border-radius:50%;animation:wb-spin .8s linear infinite;"
           "vertical-align:-2px;margin-right:6px'></span>working\u2026</span>")


def status_line() -> widgets.HTML:
    """Where a widget says it is working (a spinner), then how long its last answer took."""
    return widgets.HTML(layout=widgets.Layout(min_width="110px", margin="0 0 0 8px"))


@contextmanager
def working(status: widgets.HTML):
    """Show the spinner in ``status`` while the block runs. The kernel sends the change at
    once, before the work starts, so the page shows it while the answer is computed."""
    status.value = SPINNER
    t0 = time.perf_counter()
    try:
        yield
    finally:
        status.value = (f"<span class='wb-done' style='color:#888'>answered in "
                        f"{(time.perf_counter() - t0) * 1000:,.0f} ms</span>")
