"""Where a step's time goes: how much of each decode step's wall time the device was busy.

Per decode step (:mod:`.steps`): ``gpu_busy_ns``, the length of the union of the ``[start,
end)`` intervals of the kernels launched in the step on one device (all its streams, so kernels
that overlap count once), on its busiest device; ``wall_ns``, the step's time: the longer of its
range's end - start on the host (``host_ns``) and the span of its kernels on the device (first
start to last end); ``busy_fraction``, their ratio, so never above 1. (The host range alone is
not the step's time: under CUDA graphs the host launches a step's graph and moves on while its
kernels run, queued behind the step before, past the range's end, and busy / range read 527%.
The span from the range's start would count that queueing twice.) ``host_ns``: the range's own;
``kernels``: how many. A kernel belongs to the step of the range its launch is attributed to
(``range_id``: for a CUDA-graph kernel, the range of its graph launch), as every per-step count
does. A low fraction means the step waited on the host (launch overhead, Python, sync), not on
the device: a wall-clock comparison of such captures measures the host more than the kernels.

For a CPU capture (``cpu_op`` work units) the same numbers are CPU-op busy time; callers
should not read them as a device's.

Vectorized: kernels sorted by (step, start), then one sweep with a per-step running maximum of
the ends seen so far; each kernel adds only the part of it past that maximum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.arrays import group_sums
from ..trace.schema import Trace
from .steps import DECODE, PHASES, step_rows, trace_steps_info

COLUMNS = ["step", "phase", "wall_ns", "gpu_busy_ns", "busy_fraction", "kernels", "host_ns"]


def union_lengths(group: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Per group 0..n-1: the total length of the union of its ``[start, end)`` intervals."""
    if not len(group):
        return np.zeros(n, dtype=np.int64)
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    # Running maximum of the ends within each group (pandas' grouped cummax is one pass).
    reach = pd.Series(e).groupby(g, sort=False).cummax().to_numpy()
    before = np.empty_like(reach)
    before[1:] = reach[:-1]
    first = np.r_[True, g[1:] != g[:-1]]
    before[first] = np.iinfo(np.int64).min
    added = np.maximum(e - np.maximum(s, before), 0)
    return group_sums(g, added, n)


def busy_per_step(trace: Trace, step_regex: str | None = None) -> pd.DataFrame:
    """One row per decode step, in time order: ``step, phase, wall_ns, gpu_busy_ns,
    busy_fraction, kernels`` (see the module docstring). A step that ran on several threads or
    ranks (one range each, one step key) is one row, as in
    :func:`~workbench.analysis.launches_per_step`: the union of all their kernels, over the wall
    time from the first range's start to the last one's end. Reads only the kernels' ``start``,
    ``end`` and ``range_id`` and the ranges' ``start`` and ``end``."""
    if not trace.rows("ranges"):
        return pd.DataFrame(columns=COLUMNS)
    info = trace_steps_info(trace, step_regex)
    steps = info.ids(DECODE)
    if not len(steps):
        return pd.DataFrame(columns=COLUMNS)
    r = trace.columns("ranges", ["start", "end"])
    codes, n, first, last, head = step_rows(info, steps, r["start"].to_numpy()[steps], r["end"].to_numpy()[steps])
    slot = np.full(len(info.step), -1, dtype=np.int64)  # range id -> its step's row, -1: no decode step
    slot[steps] = codes
    k = trace.columns("kernels", ["start", "end", "range_id", "device"])
    rid = k["range_id"].to_numpy()
    step_of = np.where(rid >= 0, info.step[np.maximum(rid, 0)], -1)
    row = np.where(step_of >= 0, slot[np.maximum(step_of, 0)], -1)
    mine = row >= 0
    row = row[mine]
    ks, ke = k["start"].to_numpy()[mine], k["end"].to_numpy()[mine]
    # The union per (step, device), then each step's busiest device.
    dev = pd.factorize(k["device"].to_numpy()[mine])[0].astype(np.int64)
    nd = int(dev.max()) + 1 if len(dev) else 1
    busy = union_lengths(row * nd + dev, ks, ke, n * nd).reshape(n, nd).max(axis=1) if n else np.zeros(0, np.int64)
    host = last - first
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, row, ks)
    np.maximum.at(hi, row, ke)
    wall = np.maximum(host, np.where(hi > lo, hi - lo, 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(wall > 0, busy / np.maximum(wall, 1), np.nan)
    order = np.argsort(first, kind="stable")
    return pd.DataFrame({
        "step": info.label[head].astype(str)[order],
        "phase": np.asarray(PHASES, dtype=object)[info.phase[head]][order],
        "wall_ns": wall[order],
        "gpu_busy_ns": busy[order],
        "busy_fraction": fraction[order],
        "kernels": np.bincount(row, minlength=n).astype(np.int64)[order],
        "host_ns": host[order],
    }, columns=COLUMNS)
