"""Attribution: each kernel's innermost range (around its launch, on the launching thread),
and what each range's kernels add up to.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import STATUSES
from ..arrays import group_sums
from .nesting import nest_threads


def attribute(kernels: pd.DataFrame, n_ranges: int) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
    """What the per-range tables are made of, computed once per trace: for each range the
    kernels whose innermost range it is (count, GPU time, CUDA-graph launched), and the same
    totals for kernels in a range, outside any range and without a launch record.

    Stored with the trace, so a per-layer summary of a stored trace needs no kernel rows.
    """
    rid = kernels["range_id"].to_numpy()
    start, end = kernels["start"].to_numpy(), kernels["end"].to_numpy()
    graph = kernels["graph"].to_numpy()
    graphed = graph.any()
    args = (rid, start, end, graph if graphed else None, n_ranges)
    per_range = _range_totals(*args)
    if int(per_range["kernels"].sum()) == len(rid):  # every kernel in a range (so launched): no mask per status
        zero = {"kernels": 0, "gpu_time_ns": 0, "graph_kernels": 0}
        inside = {"kernels": len(rid), "gpu_time_ns": int(per_range["gpu_time_ns"].sum()),
                  "graph_kernels": int(per_range["graph_kernels"].sum())}
        return per_range, {status: inside if status == "range" else dict(zero) for status in STATUSES}
    dur, has = end - start, rid >= 0
    nolaunch = kernels["launch_tid"].to_numpy() < 0
    totals = {
        status: {"kernels": int(m.sum()), "gpu_time_ns": int(_masked(dur, m).sum()),
                 "graph_kernels": int((graph & m).sum()) if graphed else 0}
        for status, m in zip(STATUSES, (has, ~has & ~nolaunch, nolaunch))
    }
    return per_range, totals


def _range_totals(rid: np.ndarray, start: np.ndarray, end: np.ndarray, graph: np.ndarray | None, n: int):
    """Each range's kernel count, GPU time and CUDA-graph kernels, ranges 0..n-1."""
    has = rid >= 0
    within = _masked(rid, has)
    return {
        "kernels": np.bincount(within, minlength=n).astype(np.int64),
        "gpu_time_ns": group_sums(within, _masked(end - start, has), n),
        "graph_kernels": (np.bincount(rid[has & graph], minlength=n).astype(np.int64) if graph is not None
                          else np.zeros(n, dtype=np.int64)),
    }


def _masked(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``a[mask]``, or ``a`` itself where the mask holds for every row (the usual case): no
    row-sized copy."""
    return a if mask.all() else a[mask]


def innermost_ranges(kernels: pd.DataFrame, ranges: pd.DataFrame, timelines: dict | None = None) -> np.ndarray:
    """Range id of the innermost range around each kernel's launch on its thread (-1: none).

    ``ranges`` must be in ``nesting.nested`` order: sorted by (pid, tid, start), ids 0..n-1;
    ``timelines`` is what ``nesting.nested`` gives with them (computed here when not given).
    """
    def none() -> np.ndarray:
        return np.full(len(kernels), -1, dtype=np.int64)

    if not len(ranges) or not len(kernels):
        return none()
    kp, kt = kernels["pid"].to_numpy(), kernels["launch_tid"].to_numpy()
    ks = kernels["launch_start"].to_numpy()
    if timelines is None:
        timelines = nest_threads(ranges)[2]
    launched = kt >= 0
    out = None  # one int64 per kernel: made only where kernels of several threads fill it
    for rows in _by_thread(kp, kt, None if launched.all() else np.flatnonzero(launched)) if launched.any() else ():
        first = 0 if rows is None else rows[0]
        found = timelines.get((int(kp[first]), int(kt[first])))
        if found is None:
            continue
        lo, timeline = found
        local = timeline.innermost_at(ks if rows is None else ks[rows])
        if lo:
            local[local >= 0] += lo
        if rows is None:  # every kernel, launched on one thread
            return local
        if out is None:
            out = none()
        out[rows] = local
    return none() if out is None else out


def _by_thread(pid: np.ndarray, tid: np.ndarray, rows: np.ndarray | None) -> list[np.ndarray | None]:
    """``rows`` (None: all rows) split by (pid, tid), each part in row order: hashing, then a
    radix sort of the small group numbers, or nothing at all for the usual single launching
    thread (all rows stay None: no index array)."""
    if rows is None:
        if pid.min() == pid.max() and tid.min() == tid.max():
            return [None]
        rows = np.arange(len(pid))
    cp, up = pd.factorize(pid[rows])
    ct, ut = pd.factorize(tid[rows])
    groups = cp.astype(np.int64) * len(ut) + ct
    if len(up) * len(ut) > 1:
        sort = np.argsort(groups.astype(np.int16) if len(up) * len(ut) < 2**15 else groups, kind="stable")
        rows, groups = rows[sort], groups[sort]
    cuts = np.flatnonzero(groups[1:] != groups[:-1]) + 1
    return np.split(rows, cuts)
