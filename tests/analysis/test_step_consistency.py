"""One meaning of "step" in every view: the diff, the report's launches per decode step, the
per-step summary and launches_per_step count the same steps and the same kernels per step, on
every pair of the real reference and external traces (H200 captures of the reference decoder,
HTA's and nsys-ai's test traces: several ranks, ProfilerStep ranges, NCCL calls, aten ranges).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import workbench
from workbench.analysis.steps import trace_steps_info
from workbench.reporting.inputs import Input
from workbench.reporting.results import launches

from helpers import EXTERNAL, REFERENCE

NAMES = [REFERENCE / n for n in ("nsys-kvwrite-unfused.sqlite.gz", "nsys-kvwrite-fused.sqlite.gz",
                                 "kineto-kvwrite-unfused-cache-full.json.gz", "kineto-kvwrite-fused-cache-bucketed.json.gz",
                                 "nsys-cudagraph-nodes.sqlite.gz")] + \
        [EXTERNAL / n for n in ("hta-trace-diff-control.json.gz", "hta-trace-diff-test.json.gz",
                                "nsys-ai-mfu-2gpu-before.sqlite.gz", "nsys-ai-mfu-2gpu-after.sqlite.gz")]


@pytest.fixture(scope="module")
def traces():
    present = [p for p in NAMES if p.exists()]
    if len(present) < 2:
        pytest.skip("the shared reference and external traces are not available")
    return {p.name: workbench.import_file(p) for p in present}


def _steps_of(t) -> tuple[int, float | None]:
    """(decode steps, mean kernels per decode step) as launches_per_step gives them."""
    lp = workbench.launches_per_step(t, phase="decode")
    return len(lp), (float(lp["kernels"].mean()) if len(lp) else None)


def test_every_view_counts_the_same_steps(traces):
    for name, t in traces.items():
        n, per_step = _steps_of(t)
        info = trace_steps_info(t)
        assert info.count() == n, name
        report = launches(Input("base", name, t, name, "", "file sha256", t.meta))
        assert (report is None) == (n == 0), name
        if report is not None:
            assert report["steps"] == n and sorted(report["kernels"]) == sorted(
                int(k) for k in workbench.launches_per_step(t, phase="decode")["kernels"]), name
        by_step = workbench.summary(t, by="step").set_index("step")["kernels"]
        lp = workbench.launches_per_step(t, phase="decode")
        for step, kernels in lp.groupby("step")["kernels"].sum().items():
            assert by_step.get(step, 0) == kernels, (name, step)  # a step without kernels has no row
        # Only steps are steps: no other top-level range becomes a row of its own.
        assert set(by_step.index) <= set(lp["step"]) | {"prefill", "(no step)", "(no range)", "(no launch record)"}, name


def test_diff_and_report_agree_on_every_pair(traces):
    for (na, a), (nb, b) in itertools.combinations(traces.items(), 2):
        d = workbench.diff(a, b)
        for side, t in (("a", a), ("b", b)):
            n, per_step = _steps_of(t)
            assert d.steps[side] == max(n, 1), (na, nb, side)
            if n:
                assert d.totals[f"kernels_per_step_{side}"] == pytest.approx(per_step), (na, nb, side)
        # "Unchanged" only when the kernels are: a range whose count moved lists what moved.
        for row in d.ranges.itertuples():
            al = d.alignments.get(row.range)
            if row.delta_kernels != 0 and al is not None:
                assert al.removed or al.added, (na, nb, row.range)
        assert set(d.ranges["changed"]) <= {"", "kernels", "time"}


def test_same_vs_same_changes_nothing(traces):
    t = next(iter(traces.values()))
    d = workbench.diff(t, t)
    assert (d.ranges["changed"] == "").all()
    assert all(c.verdict == "no evidence of a change" or not c.interval for c in d.timing)
    assert np.allclose(d.ranges["delta_kernels"], 0)
