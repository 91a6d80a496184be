"""Timelines of a named range draw that range's kernels in a typical instance (a decode step's,
of median duration), on every committed CUDA-graph trace: ``layer_03/kv_write``, ``("layer", 3)``
and the diff widget's selections. Before: the captured ranges of a graph replay all span the
replay, so ``layer_03/attention`` drew ``step_0/layer_00/qkv — 576 kernels`` and ``("layer", 3)``
the 0-kernel ``graph_capture`` instance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("plotly")

import workbench as wb  # noqa: E402
from workbench import viz  # noqa: E402
from workbench.analysis.projection import project  # noqa: E402
from workbench.analysis.steps import DECODE, trace_steps_info  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402
from workbench.viz.select import window  # noqa: E402

TRACES = Path(__file__).resolve().parents[2] / "traces"
GRAPHS = sorted(p.name for p in TRACES.iterdir() if "cudagraph" in p.name and (p / "manifest.json").is_file())


def _per_step(trace, prefix: str) -> float:
    """Kernels per decode step under the decode ranges whose step-free path starts ``prefix``
    (from the projection alone)."""
    p = project(trace)
    dec = p[p["phase"] == "decode"]
    inner = dec["path"].astype(str).str.replace(r"^step_\d+/", "", regex=True)
    hit = (inner == prefix) | inner.str.startswith(prefix + "/")
    return hit.sum() / dec["step"].nunique()


def _count(fig) -> int:
    return int(re.search(r"\u2014 ([\d,]+)(?:<br>| )kernels?", fig.layout.title.text).group(1).replace(",", ""))


@pytest.mark.parametrize("name", GRAPHS)
def test_a_named_range_draws_its_own_kernels(name):
    t = wb.open_trace(TRACES / name)
    phase = trace_steps_info(t).phase
    layer3 = t.ranges["path"].astype(str).str.contains(r"(^|/)(layer_03|model\.layers\.3)$")
    decode_layer3 = t.ranges.loc[layer3 & (phase == DECODE), "path"].astype(str)
    for where, prefix in (("layer_03/kv_write", "layer_03/kv_write"),
                          (("layer", 3), decode_layer3.iloc[0].split("/", 1)[1] if len(decode_layer3) else None)):
        if prefix is None or not (t.ranges["path"].astype(str).str.endswith("/" + prefix)).any():
            # No decode range of that name: one clear line, never an empty or wrong timeline.
            with pytest.raises(WorkbenchError):
                viz.timeline(t, where)
            continue
        w = window(t, where)
        expected = _per_step(t, prefix)
        assert expected > 0 and len(w.kernels) == expected, (where, w.title, len(w.kernels), expected)
        assert phase[w.range_id] == DECODE and w.title.endswith(prefix), w.title
        # Every kernel drawn is the named range's own (or its sub-ranges').
        assert w.kernels["path"].astype(str).str.contains(re.escape(prefix)).all()
        assert _count(viz.timeline(t, where)) == expected


def test_the_typical_instance_is_a_decode_step_of_median_duration():
    t = wb.open_trace(TRACES / "h200-kvwrite-fused-eager-nsys")
    inst = t.ranges[t.ranges["path"].astype(str).str.fullmatch(r"step_\d/layer_00/kv_write")]
    dur = (inst["end"] - inst["start"]).sort_values()
    w = window(t, "layer_00/kv_write")
    assert w.range_id == dur.index[(len(dur) - 1) // 2]  # not step_0's, the slowest (warm-up)
    assert w.title != "step_0/layer_00/kv_write"


def test_the_diff_widget_draws_the_selected_layer_of_a_graph_pair():
    pytest.importorskip("ipywidgets")
    a, b = "h200-phi4-cache-full-ctx2048-cudagraph-nsys", "h200-phi4-cache-bucketed-ctx2048-cudagraph-nsys"
    w = viz.TraceDiffWidget(a=a, b=b, root=TRACES)
    for scope, prefix in (("layer:17", "layer_17"), ("range:layer_17/attention", "layer_17/attention")):
        w.scope.value = scope
        w.show_timeline()
        counts = [_count(f) for f in w.timeline_figures]
        expected = [_per_step(wb.open_trace(TRACES / n), prefix) for n in (a, b)]
        assert len(counts) == 2 and counts == expected and min(counts) > 0, (scope, counts, expected)
