"""Steps at any depth: a program that marks its capture window with a range (``decode``) and
its steps inside it (``decode > step_i > layer_NN``) has its steps found, counted and matched
the same as one whose steps are the top-level ranges.

The traces are real torch.profiler captures made here (CPU activities: the work units are the
top-level ``cpu_op`` events), of a model of three Linear layers. Per step: one ``aten::mul``
launched directly in the step, then one ``aten::linear`` per layer; trace B has three steps to
A's two and one more op (``aten::relu``) in ``layer_01`` of every step.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from helpers import TRACES  # noqa: E402
import workbench  # noqa: E402
from workbench.analysis.steps import step_of_ranges  # noqa: E402
from workbench.instrument.ranges import annotate, torch_ranges  # noqa: E402

LAYERS = 3


def _capture(path: Path, steps: int, *, window: str | None = "decode", extra_layer: int | None = None) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(LAYERS)])
    x = torch.ones(2, 8)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, \
            torch_ranges():
        with annotate(window) if window else nullcontext():
            for i in range(steps):
                with annotate(f"step_{i}"):
                    h = x * 2  # launched directly in the step
                    for j, layer in enumerate(model):
                        with annotate(f"layer_{j:02d}"):
                            h = layer(h)
                            if j == extra_layer:
                                h = torch.relu(h)
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("steps")
    return {
        "a": workbench.import_file(_capture(d / "a.json", 2)),
        "b": workbench.import_file(_capture(d / "b.json", 3, extra_layer=1)),
        "flat": workbench.import_file(_capture(d / "flat.json", 2, window=None)),
    }


def test_the_traces_nest_steps_inside_the_window(traces):
    r = traces["a"].ranges
    steps = r[r["name"].astype(str).str.startswith("step_")]
    assert list(steps["path"].astype(str)) == ["decode/step_0", "decode/step_1"]
    assert (steps["depth"] == 1).all()


def test_launches_per_step_counts_each_step_under_the_window(traces):
    a, b = workbench.launches_per_step(traces["a"]), workbench.launches_per_step(traces["b"])
    assert list(a["step"]) == ["step_0", "step_1"] and list(a["kernels"]) == [1 + LAYERS] * 2
    assert list(b["step"]) == ["step_0", "step_1", "step_2"] and list(b["kernels"]) == [2 + LAYERS] * 3
    # Each step's time is its ops' (the window's own time is no step's).
    p = workbench.project(traces["b"])
    per_step = p.groupby(p["step"].astype(str))["duration"].sum()
    assert list(b["gpu_time_ns"]) == [int(per_step[s]) for s in b["step"]]


def test_the_projection_names_the_step_not_the_window(traces):
    p = workbench.project(traces["a"])
    assert sorted(p["step"].astype(str).unique()) == ["step_0", "step_1"]
    by_step = workbench.summary(traces["a"], by="step")
    assert list(by_step["step"].astype(str)) == ["step_0", "step_1"]
    assert list(by_step["kernels"]) == [1 + LAYERS] * 2


def test_diff_matches_ranges_across_step_counts_and_shows_only_the_extra_op(traces):
    d = workbench.diff(traces["a"], traces["b"])
    assert d.steps == {"a": 2, "b": 3}
    keys = [f"decode/layer_{j:02d}" for j in range(LAYERS)]
    assert sorted(d.ranges["range"]) == ["(step)", *keys]
    assert (d.ranges["status"] == "both").all()
    counts = d.ranges.set_index("range")[["kernels_a", "kernels_b"]]
    assert counts.loc["(step)"].tolist() == [1, 1]
    changed = counts[counts["kernels_a"] != counts["kernels_b"]]
    assert changed.index.tolist() == ["decode/layer_01"] and changed.iloc[0].tolist() == [1, 2]
    assert d.alignments["decode/layer_01"].added == ["aten::relu"]
    assert all(not al.removed and (k == "decode/layer_01" or not al.added) for k, al in d.alignments.items())
    assert (d.totals["kernels_per_step_a"], d.totals["kernels_per_step_b"]) == (1 + LAYERS, 2 + LAYERS)


def test_the_report_counts_launches_per_step(traces, tmp_path):
    root = tmp_path / "traces"
    workbench.save(traces["a"], "nested-a", root)
    workbench.save(traces["b"], "nested-b", root)
    a, b = workbench.open_trace("nested-a", root=root), workbench.open_trace("nested-b", root=root)
    md = workbench.report(a, b, md=tmp_path / "r.md").markdown
    assert (tmp_path / "r.md").read_text() == md
    row = next(line for line in md.splitlines() if line.startswith("|") and "CPU ops per decode step" in line)
    assert "n/a (no step ranges)" not in md
    assert f"{1 + LAYERS} (2 steps)" in row and f"{2 + LAYERS} (3 steps)" in row
    assert f"CPU ops per decode step **{1 + LAYERS} → {2 + LAYERS}**" in md  # the headline (CPU ops: a CPU trace)


def test_top_level_steps_count_and_match_as_before(traces):
    """Without the window the steps are the roots: same counts, keys without the window."""
    flat, nested = workbench.launches_per_step(traces["flat"]), workbench.launches_per_step(traces["a"])
    assert flat[["step", "kernels"]].equals(nested[["step", "kernels"]])
    d = workbench.diff(traces["flat"], traces["flat"])
    assert sorted(d.ranges["range"]) == ["(step)", *[f"layer_{j:02d}" for j in range(LAYERS)]]
    assert d.steps == {"a": 2, "b": 2}


def test_steps_numbered_afresh_in_each_window_are_counted_apart(tmp_path):
    """``prefill > step_0`` and ``decode > step_0``: two steps of one name, and their layers
    matched per window; the step in the prefill window is prefill, not a decode step."""
    path = tmp_path / "windows.json"
    lin, x = torch.nn.Linear(8, 8), torch.ones(2, 8)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, \
            torch_ranges():
        for window, steps in (("prefill", 1), ("decode", 2)):
            with annotate(window):
                for i in range(steps):
                    with annotate(f"step_{i}"), annotate("layer_00"):
                        lin(x)
    prof.export_chrome_trace(str(path))
    t = workbench.import_file(path)
    lp = workbench.launches_per_step(t)
    assert list(lp["kernels"]) == [1, 1, 1] and list(lp["phase"]) == ["prefill", "decode", "decode"]
    d = workbench.diff(t, t)
    assert d.steps == {"a": 2, "b": 2}
    ranges = d.ranges.set_index("range")
    assert ranges["kernels_total_a"].to_dict() == {"decode/layer_00": 2, "prefill/layer_00": 1}
    assert ranges["kernels_a"].to_dict() == {"decode/layer_00": 1.0, "prefill/layer_00": 1.0}
    assert ranges["phase"].to_dict() == {"decode/layer_00": "decode", "prefill/layer_00": "prefill"}
    assert d.totals["kernels_per_step_a"] == 1.0 and d.totals["prefill_kernels_a"] == 1


def test_a_trace_without_ranges_has_no_steps(tmp_path):
    path = tmp_path / "bare.json"
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.nn.Linear(8, 8)(torch.ones(2, 8))
    prof.export_chrome_trace(str(path))
    t = workbench.import_file(path)
    assert not len(workbench.launches_per_step(t))
    d = workbench.diff(t, t)
    assert d.ranges["range"].tolist() == ["(no range)"] and d.steps == {"a": 1, "b": 1}
    assert set(workbench.project(t)["step"].astype(str)) == {"(no range)"}


def test_committed_top_level_trace_is_unchanged():
    """Computed on the code before steps could nest; the trace's steps are its roots."""
    t = workbench.open_trace(TRACES / "h200-kvwrite-fused-eager-torch")
    expected = pd.DataFrame({
        "step": ["step_0", "step_1", "step_2"],
        "phase": ["decode"] * 3,
        "kernels": [125, 125, 125],
        "gpu_time_ns": [318806, 312507, 315675],
        "wall_ns": [7009545, 6050876, 5710684],
    })
    got = workbench.launches_per_step(t)
    pd.testing.assert_frame_equal(got.astype({"step": object}), expected, check_dtype=False)


def test_step_of_ranges_takes_the_outermost_step_named_range_at_any_depth():
    names = ["generate", "ProfilerStep#3", "step_0", "layer_00", "other", "decode", "step_1", "x", "step_2"]
    parent = [-1, 0, 1, 2, -1, -1, 5, 6, -1]
    ranges = pd.DataFrame({"name": pd.Categorical(names), "parent": np.array(parent, dtype=np.int64)})
    # ProfilerStep#3 under generate is the step of itself, step_0 and layer_00; step_1 is the
    # step of its branch of decode; step_2 is a top-level step; generate, other and decode are
    # in no step.
    assert step_of_ranges(ranges).tolist() == [-1, 1, 1, 1, -1, -1, 6, 6, 8]
    assert step_of_ranges(ranges, r"^step_").tolist() == [-1, -1, 2, 2, -1, -1, 6, 6, 8]
    assert step_of_ranges(ranges.iloc[:0]).tolist() == []
