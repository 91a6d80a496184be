"""The decode step's latency from the trace itself, for captures the workbench did not time
(``workbench capture`` of any command, a trace made elsewhere).

One sample per decode step: from the step's start to its last kernel's end. A step's start is
its range's start where the trace has step ranges (:mod:`..steps`: the same steps every view
counts), else, for steps inferred from the kernel stream (:mod:`.structure`), its first
kernel's launch (a CUDA graph's launch, for a replayed step; the kernel's own start where no
launch was recorded); or the previous step's last kernel's end where that is later: a
program that does not wait for each token (gpt-fast's decode loop) launches steps ahead of
the GPU, and from launch to end would count the queue too (the samples would overlap). Steps
on several threads or ranks are one step: the earliest start, the latest end. Two such
sample sets are compared by the one comparison of timed phases
(:func:`..stats.compare_samples`), and the comparison says where its samples came from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...trace.arrays import queued_starts
from ...trace.schema import Trace
from ..stats import Comparison, compare_samples, compare_timing
from ..steps import DECODE, step_rows, trace_steps_info
from ...trace.inferred.structure import infer

METRIC = "decode_step_ms"
# What a comparison's ``method`` ends with when its samples are the trace's own.
FROM_TRACE = "from the trace"


@dataclass(frozen=True)
class StepTimes:
    """One trace's decode steps timed from the trace: ``samples`` (ms, one per step) and how
    each is measured."""

    samples: list[float]
    measure: str

    @property
    def label(self) -> str:
        return f"{FROM_TRACE} ({len(self.samples)} steps)"


def step_times(trace: Trace, layers: int | None = None) -> StepTimes | None:
    """The decode steps of a trace, timed from the trace (see the module docstring); None when
    it has none (no step ranges, and no step repeating in its kernel stream)."""
    k = trace.columns("kernels", ["start", "end", "launch_start", "range_id"])
    end = k["end"].to_numpy()
    info = trace_steps_info(trace)
    steps = info.ids(DECODE)
    if len(steps):
        r = trace.columns("ranges", ["start", "end"])
        codes, n, first, last, _ = step_rows(info, steps, r["start"].to_numpy()[steps], r["end"].to_numpy()[steps])
        row = np.full(len(info.step), -1, np.int64)
        row[steps] = codes
        rid = k["range_id"].to_numpy()
        of = np.where(rid >= 0, info.step[np.maximum(rid, 0)], -1)
        of = np.where(of >= 0, row[np.maximum(of, 0)], -1)
        last_kernel = np.full(n, np.iinfo(np.int64).min)
        np.maximum.at(last_kernel, of[of >= 0], end[of >= 0])
        return _spans(first, np.maximum(last, last_kernel), "step range's start")
    found = infer(trace, layers)
    sel = found.step >= 0
    if not sel.any():
        return None
    launch = k["launch_start"].to_numpy()
    begin = np.where(launch >= 0, np.minimum(launch, k["start"].to_numpy()), k["start"].to_numpy())
    # Inferred steps are numbered per GPU: one step on several GPUs is one sample.
    g = pd.DataFrame({"step": found.step[sel], "begin": begin[sel], "end": end[sel]}).groupby("step")
    return _spans(g["begin"].min().to_numpy(), g["end"].max().to_numpy(), "inferred step's first launch")


def _spans(first: np.ndarray, stop: np.ndarray, start_is: str) -> StepTimes:
    """Steps from ``first`` (or the step before's ``stop``, where later) to ``stop``, ns."""
    begin = queued_starts(first, stop)
    queued = int((begin > first).sum())
    measure = f"{start_is}, or the step before's end where the host ran ahead ({queued} steps), to its last kernel's end" \
        if queued else f"{start_is} to its last kernel's end"
    return StepTimes(((stop - begin) / 1e6).tolist(), measure)


def timing(a: Trace, b: Trace) -> list[Comparison]:
    """Every timed phase A and B recorded, compared (:func:`..stats.compare_timing`); and where
    they recorded no timing in common (a capture without the workbench's own timing), their
    decode steps timed from the traces, the comparison's ``method`` saying so."""
    out = compare_timing(a.meta, b.meta)
    if out:
        return out
    ta, tb = step_times(a), step_times(b)
    if ta is None or tb is None:
        return out
    c = compare_samples(METRIC, ta.samples, tb.samples)
    note = f"{FROM_TRACE} (A: {len(ta.samples)} steps, B: {len(tb.samples)} steps; {ta.measure})"
    # After what the traces recorded: a recorded timing (a call's) stays the first a view reads.
    return [*out, dataclasses.replace(c, method=f"{c.method}; {note}")]


def source(c: Comparison) -> str | None:
    """``from the trace (A: 3 steps, B: 3 steps; ...)`` for a comparison of samples taken from
    the traces, None for one of recorded timing."""
    _, _, tail = c.method.partition(f"; {FROM_TRACE}")
    return f"{FROM_TRACE}{tail}" if tail else None
