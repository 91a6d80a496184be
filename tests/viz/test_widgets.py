"""The widgets' layout and status line, the trace index behind their selections (the same
instances and kernels as a scan of every row), and the notebooks' one-line store summary.
No browser: ``tests/viz/test_jupyterlab_browser.py`` checks what a page shows."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from helpers import TRACES  # noqa: E402
import workbench as wb  # noqa: E402
from workbench import viz  # noqa: E402
from workbench.analysis.projection import project  # noqa: E402
from workbench.viz import select  # noqa: E402

NAMES = ("ref-h200-kvwrite-unfused-nsys", "h200-hf-attn-eager-static-nsys", "h200-kvwrite-fused-cudagraph-nsys",
         "h200-user-mlp-window-torch")


def _scan(trace, rid):
    """Range ``rid``'s descendants (by parent links: a CUDA graph's captured ranges all span its
    replay, so time alone would put every layer's inside each) and kernels, found by scanning
    every range and kernel."""
    r = trace.ranges
    parent = r["parent"].tolist()

    def below(i):
        while i >= 0:
            if i == rid:
                return True
            i = parent[i]
        return False

    inside = np.array([below(i) for i in range(len(r))], dtype=bool)
    ids = r[inside].sort_values(["start", "depth", "id"], kind="stable")["id"].to_numpy()
    p = project(trace)
    k = p[np.isin(p["range_id"].to_numpy(), ids)].sort_values(["start", "end"], kind="stable")
    return ids, k.index.to_numpy()


@pytest.mark.parametrize("name", [n for n in NAMES if (TRACES / n).is_dir()])
def test_index_finds_what_a_scan_finds(name):
    t = wb.open_trace(str(TRACES / name))
    ix = select.index(t)
    assert select.index(t) is ix  # made once, kept on the trace
    p = project(t)
    for rid in range(0, len(t.ranges), max(1, len(t.ranges) // 60)):
        ids, rows = _scan(t, rid)
        w = select.window(t, rid)
        assert w.ranges["id"].tolist() == ids.tolist()
        assert p.loc[rows, "start"].tolist() == w.kernels["start"].tolist()
        assert p.loc[rows, "name"].astype(str).tolist() == w.kernels["name"].astype(str).tolist()
    keys = select.range_keys(t)
    for key in sorted(set(keys))[:40]:
        want = t.ranges[(keys == key).to_numpy()].sort_values(["start", "id"], kind="stable")["id"].tolist()
        assert select.instances(t, key)["id"].tolist() == want
    path = str(t.ranges["path"].iloc[-1])  # a full path (with its step level) is found too
    assert int(t.ranges["id"].iloc[-1]) in select.instances(t, path)["id"].tolist()


def test_window_keeps_the_first_kernels_and_is_reused():
    t = wb.open_trace(str(TRACES / "ref-h200-kvwrite-unfused-nsys"))
    full = select.window(t, "layer_03/kv_write")
    first = select.window(t, "layer_03/kv_write", max_kernels=4)
    assert len(full.kernels) == 15 and first.kernels["start"].tolist() == full.kernels["start"].tolist()[:4]
    assert select.window(t, "layer_03/kv_write") is full


def test_diff_widget_layout_and_status():
    w = viz.TraceDiffWidget(a="ref-h200-kvwrite-unfused-nsys", b="ref-h200-kvwrite-fused-nsys", root=TRACES)
    controls = w.children[0]
    assert "wb-controls" in controls._dom_classes and w.children[1] is w.timeline  # the timeline right under them
    assert w.status in controls.children[1].children and w.timeline_button in controls.children[1].children
    seen = []
    w.status.observe(lambda c: seen.append(c["new"]), names="value")
    w.scope.value = "layer:2"
    w.show_timeline()
    assert [v.startswith("<style>@keyframes wb-spin") for v in seen] == [True, False, True, False]
    assert "answered in" in seen[-1] and len(w.timeline_figures) == 2


def test_explorer_layout_and_a_chosen_instance():
    e = viz.TraceExplorer(root=TRACES)
    assert e.instance.value is not None and e.instance.value == e.instance.options[0][1]  # never a blank dropdown
    i = e.children.index(e.timeline)
    assert "wb-controls" in e.children[i - 1]._dom_classes and e.instance in e.children[i - 1].children
    other = next(v for v in e.trace_select.options if v != e.trace_select.value and v.startswith("ref-"))
    e.trace_select.value = other
    assert e.instance.value == e.instance.options[0][1]
    e.show_timeline()
    assert e.timeline_figure is not None and "answered in" in e.status.value


def test_store_summary_is_one_line(monkeypatch):
    from workbench.viz import store_summary

    monkeypatch.setenv("WORKBENCH_PREFER_LIVE", "0")
    line = store_summary(TRACES)
    n = len(wb.list_traces(TRACES))
    assert "\n" not in line and f": {n} traces (" in line and "references preferred" in line


def test_explorer_of_a_trace_without_ranges_offers_the_whole_trace():
    from workbench.trace import Trace

    t = wb.open_trace(str(TRACES / "ref-h200-kvwrite-unfused-nsys"))
    k = t.kernels.copy()
    k["range_id"] = -1
    bare = Trace({**t.tables, "kernels": k, "ranges": t.ranges.iloc[:0]}, dict(t.meta), name="bare")
    e = viz.TraceExplorer(bare)
    assert len(e.instance.options) == 1 and e.instance.value == e.instance.options[0][1]
    e.show_timeline()
    assert "whole trace" in e.timeline_figure.layout.title.text
