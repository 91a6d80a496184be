"""GPU projection of each range instance, as Nsight Systems defines it (``nvtx_gpu_proj_trace``,
``nvtx_gpu_proj_sum``, the GUI's projected NVTX rows): the span from the start of the first to
the end of the last GPU operation launched inside the range, on any stream.

nsys's rules, followed here: a GPU operation (kernel, memcpy, memset) belongs to every range
around the API call that launched it on the launching thread, the innermost and all that enclose
it, so a range's projection covers its children's; a range that launched no GPU work has none
(nsys leaves it out). Overlaps and gaps are not subtracted: a host-bound eager layer's projection
is far above its summed kernel time (:func:`~workbench.analysis.summary`'s ``gpu_time_ns``).
Kernels get their range at import (``kernels.range_id``: the innermost range around the launch);
memcpy and memset are matched here to their API call by (process, correlation id) and placed
the same way.

Where the workbench and nsys part: under CUDA graphs nsys projects a replayed kernel onto the
ranges open when its graph node was *captured*, each kernel of an innermost captured range a
projected instance of its own (``kv_write``: one per kernel per replay, their sum the summed
kernel time) and an enclosing captured range one span from the first replay to the last; the
workbench re-roots the captured ranges under each replay's launch (``trace/assemble/
graph_ranges.py``), so each replay's ``layer_03/kv_write`` is one instance spanning its kernels.
Ranges around the launch (the step) agree. nsys's hierarchy columns (stack level, parent) nest
the projected spans and drop ranges whose work ran on other streams; the workbench keeps the
ranges' CPU nesting.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.arrays import group_sums
from ..trace.assemble.attribution import innermost_ranges
from ..trace.assemble.launches import match_first
from ..trace.schema import Trace
from .steps import DECODE, step_rows, trace_steps_info

COLUMNS = ["gpu_start", "gpu_end", "gpu_ops", "gpu_proj_ns"]
# What the columns are called where people read them: an nsys user's word for the figure.
TITLE = "GPU projection (nvtx_gpu_proj)"
STATS = ["gpu_proj_instances", "gpu_proj_sum_ns", "gpu_proj_mean_ns", "gpu_proj_median_ns"]
NOTE = (f"gpu_proj_*: {TITLE}, per range instance the first start to the last end of the GPU work launched "
        "inside it (children's too), as nsys's nvtx_gpu_proj_sum counts it; gpu_time_ns: kernel time summed")
_NONE_START, _NONE_END = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def copy_ranges(trace: Trace) -> np.ndarray:
    """Innermost range of each memcpy, then each memset, around its API call on the calling
    thread (-1: none, or no call recorded)."""
    parts = []
    api = trace.columns("api", ["pid", "tid", "start", "correlation"]) if trace.rows("api") else None
    for table in ("memcpy", "memset"):
        if not trace.rows(table):
            continue
        ops = trace.columns(table, ["pid", "correlation"])
        if api is None or not trace.rows("ranges"):
            parts.append(np.full(len(ops), -1, dtype=np.int64))
            continue
        q_pid = ops["pid"].to_numpy()
        # A source that does not know an op's process (-1) matches on the correlation id alone.
        known = q_pid.min() >= 0
        row = match_first(api["pid"].to_numpy() if known else None, api["correlation"].to_numpy(),
                          q_pid if known else None, ops["correlation"].to_numpy())
        hit = np.maximum(row, 0)
        calls = pd.DataFrame({
            "pid": np.where(row >= 0, api["pid"].to_numpy()[hit], -1),
            "launch_tid": np.where(row >= 0, api["tid"].to_numpy()[hit], -1),
            "launch_start": np.where(row >= 0, api["start"].to_numpy()[hit], -1),
        })
        ranges = trace.columns("ranges", ["pid", "tid", "start", "end"])
        parts.append(innermost_ranges(calls, ranges))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def range_projection(trace: Trace) -> pd.DataFrame:
    """One row per range (by id): ``gpu_start``, ``gpu_end`` (-1: no GPU work), ``gpu_ops`` (the
    kernels, memcpys and memsets launched inside it, children's included) and ``gpu_proj_ns``
    (end - start, -1 for none). See the module docstring; computed once per trace."""
    key = "gpu_projection"
    if key in trace.memo:
        return trace.memo[key]
    n = trace.rows("ranges")
    k = trace.columns("kernels", ["start", "end", "range_id"])
    rid = [k["range_id"].to_numpy()]
    start, end = [k["start"].to_numpy()], [k["end"].to_numpy()]
    copies = copy_ranges(trace)
    if len(copies):
        for table in ("memcpy", "memset"):
            if trace.rows(table):
                c = trace.columns(table, ["start", "end"])
                start.append(c["start"].to_numpy())
                end.append(c["end"].to_numpy())
        rid.append(copies)
    rid, start, end = (np.concatenate(x) for x in (rid, start, end))
    inside = rid >= 0
    rid, start, end = rid[inside], start[inside], end[inside]
    first = np.full(n, _NONE_START, dtype=np.int64)
    last = np.full(n, _NONE_END, dtype=np.int64)
    np.minimum.at(first, rid, start)
    np.maximum.at(last, rid, end)
    ops = np.bincount(rid, minlength=n).astype(np.int64)
    if n:
        # Each range's span and count passed up to its parent, deepest ranges first, so every
        # range holds those of all the ranges inside it.
        r = trace.columns("ranges", ["parent", "depth"])
        parent = r["parent"].to_numpy()
        for ids in _levels(parent, r["depth"].to_numpy()):
            np.minimum.at(first, parent[ids], first[ids])
            np.maximum.at(last, parent[ids], last[ids])
            np.add.at(ops, parent[ids], ops[ids])
    has = ops > 0
    out = pd.DataFrame({
        "gpu_start": np.where(has, first, -1), "gpu_end": np.where(has, last, -1), "gpu_ops": ops,
        "gpu_proj_ns": np.where(has, last - first, -1),
    })
    trace.memo[key] = out
    return out


def projection_stats(codes: np.ndarray, proj: np.ndarray, n: int) -> pd.DataFrame:
    """Per group 0..n-1 of range instances (``codes``, -1: left out; ``proj``: each
    instance's projection, -1 for none): nsys's Count, Sum, Mean and Median over the instances
    that launched GPU work. A group with none has count 0 and NaN statistics."""
    keep = (codes >= 0) & (proj >= 0)
    c, p = codes[keep], proj[keep]
    count = np.bincount(c, minlength=n).astype(np.int64)
    total = group_sums(c, p, n)
    median = np.full(n, np.nan)
    if len(c):
        s = pd.Series(p).groupby(c).median()
        median[s.index.to_numpy()] = s.to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    # nsys's precision: whole nanoseconds for the sum, a tenth for the mean.
    return pd.DataFrame({STATS[0]: count, STATS[1]: pd.array(np.where(count > 0, total, 0), dtype="Int64"),
                         STATS[2]: np.round(mean, 1), STATS[3]: median}).assign(
        **{STATS[1]: lambda d: d[STATS[1]].where(d[STATS[0]] > 0)})


def projection_by_name(trace: Trace) -> pd.DataFrame:
    """``nvtx_gpu_proj_sum``'s table from the workbench's projection: per range name (as
    written, ``layer_03`` not ``layer``), its instances that launched GPU work (``count``), the
    projection's sum, mean, median, min and max (ns), and beside them the summed kernel time
    of the same instances and their ranges' own (CPU) duration. Sorted by name, as nsys sorts."""
    p = range_projection(trace)
    r = trace.columns("ranges", ["name", "start", "end", "depth", "parent"])
    kernel_ns = _subtree_sums(trace.columns("ranges", ["gpu_time_ns"])["gpu_time_ns"].to_numpy(),
                              r["parent"].to_numpy(), r["depth"].to_numpy())
    has = p["gpu_ops"].to_numpy() > 0
    d = pd.DataFrame({"range": r["name"].astype(str).to_numpy()[has], "proj": p["gpu_proj_ns"].to_numpy()[has],
                      "kernel": kernel_ns[has], "cpu": (r["end"] - r["start"]).to_numpy()[has]})
    g = d.groupby("range", sort=True)
    out = pd.DataFrame({
        "count": g.size(), "gpu_proj_sum_ns": g["proj"].sum(), "gpu_proj_mean_ns": g["proj"].mean(),
        "gpu_proj_median_ns": g["proj"].median(), "gpu_proj_min_ns": g["proj"].min(),
        "gpu_proj_max_ns": g["proj"].max(), "kernel_time_ns": g["kernel"].sum(), "cpu_time_ns": g["cpu"].sum(),
    })
    return out.reset_index()


def _subtree_sums(values: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Per range: ``values`` summed over it and every range inside it."""
    out = values.astype(np.int64, copy=True)
    for ids in _levels(parent, depth):
        np.add.at(out, parent[ids], out[ids])
    return out


def _levels(parent: np.ndarray, depth: np.ndarray) -> list[np.ndarray]:
    """The ranges that have a parent, one array per depth, deepest first: folding each level
    into its parents in this order passes every range's value up to all its ancestors."""
    order = np.argsort(-depth, kind="stable")
    levels = (ids[parent[ids] >= 0] for ids in np.split(order, np.flatnonzero(np.diff(depth[order])) + 1))
    return [ids for ids in levels if len(ids)]


def step_projection(trace: Trace, step_regex: str | None = None) -> float:
    """The mean GPU projection of a decode step (NaN: no decode step launched GPU work): per
    step key (one step on several threads or ranks is one), its ranges' first GPU start to last
    GPU end. Beside the diff's summed kernel time per step (``gpu_time_per_step_ns``)."""
    if not trace.rows("ranges"):
        return float("nan")
    info = trace_steps_info(trace, step_regex)
    p = range_projection(trace)
    steps = info.ids(DECODE)
    steps = steps[p["gpu_ops"].to_numpy()[steps] > 0]
    if not len(steps):
        return float("nan")
    _, _, first, last, _ = step_rows(info, steps, p["gpu_start"].to_numpy()[steps], p["gpu_end"].to_numpy()[steps])
    return float(np.mean(last - first))
