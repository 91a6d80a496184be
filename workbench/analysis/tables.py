"""Per-range, per-layer, per-kernel and per-step tables over a projected trace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import WorkbenchError
from ..trace.model import Trace
from .projection import NO_LAUNCH, NO_RANGE, _roots, project, range_layers

BY = ("range", "layer", "kernel", "path", "step")


def _group_sums(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sum of ``values`` per key in 0..n-1."""
    if not len(values) or int(np.abs(values).sum()) < 2**53:
        # float64 holds every partial sum exactly below 2**53 ns (104 days of GPU time).
        return np.rint(np.bincount(keys, weights=values, minlength=n)).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, keys, values)
    return out


def _labels(values) -> pd.Categorical:
    codes, uniq = pd.factorize(np.asarray(values, dtype=object), sort=True)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniq, dtype=object))


def summary(trace: Trace, by: str = "range", layer_regex: str | None = None) -> pd.DataFrame:
    """Kernel counts and GPU time grouped ``by``:

    - ``range``: innermost range name (``kv_write`` over all layers and steps), with the
      number of range instances that launched kernels and kernels per instance;
    - ``layer``: (layer index, innermost range name); kernels outside any layer are layer -1;
    - ``kernel``: kernel short name, with mean/min/max duration;
    - ``path``: full range path (``step_0/layer_03/kv_write``);
    - ``step``: outermost range (``step_0``, ``ProfilerStep#3``): launches per step.

    Unattributed kernels appear as ``(no range)`` / ``(no launch record)`` rows, never dropped.

    Computed per range and then per group, reading only the columns it needs: on a stored
    trace it never loads the whole kernel table.
    """
    if by not in BY:
        raise WorkbenchError(by, f"unknown grouping; choose one of {', '.join(BY)}")
    if by == "kernel":
        return _by_kernel(trace)
    k = trace.columns("kernels", ["start", "end", "launch_tid", "range_id"] + (["graph"] if by == "range" else []))
    rid = k["range_id"].to_numpy()
    dur = k["end"].to_numpy() - k["start"].to_numpy()
    nolaunch = k["launch_tid"].to_numpy() < 0
    has = rid >= 0
    n = trace.rows("ranges")
    cnt = np.bincount(rid[has], minlength=n)
    gpu = _group_sums(rid[has], dur[has], n)
    used = np.flatnonzero(cnt > 0)
    # One row per range that launched kernels, then one per unattributed kind.
    rows = {"kernels": cnt[used], "gpu_time_ns": gpu[used]}
    extra = []
    for label, mask in ((NO_RANGE, ~has & ~nolaunch), (NO_LAUNCH, nolaunch)):
        if mask.any():
            extra.append((label, mask))
    rows["kernels"] = np.r_[rows["kernels"], [int(m.sum()) for _, m in extra]].astype(np.int64)
    rows["gpu_time_ns"] = np.r_[rows["gpu_time_ns"], [int(dur[m].sum()) for _, m in extra]].astype(np.int64)
    labels = [lab for lab, _ in extra]
    if by == "range":
        names = _range_names(trace, used)
        rows["instances"] = np.r_[np.ones(len(used), np.int64), np.zeros(len(extra), np.int64)]
        graph = k["graph"].to_numpy()
        graph_r = np.bincount(rid[has & graph], minlength=n)[used]
        rows["graph_kernels"] = np.r_[graph_r, [int((graph & m).sum()) for _, m in extra]].astype(np.int64)
        keys = ["range"]
        frame = pd.DataFrame({"range": np.r_[names, labels], **rows})
    elif by == "layer":
        layer = _range_layers(trace, layer_regex)[used] if n else np.zeros(0, np.int64)
        frame = pd.DataFrame({"layer": np.r_[layer, [-1] * len(extra)].astype(np.int64),
                              "range": np.r_[_range_names(trace, used), labels], **rows})
        keys = ["layer", "range"]
    elif by == "path":
        paths = trace.columns("ranges", ["path"])["path"].to_numpy(dtype=object)[used] if n else np.zeros(0, object)
        frame = pd.DataFrame({"path": np.r_[paths, labels], **rows})
        keys = ["path"]
    else:
        r = trace.columns("ranges", ["parent"]) if n else None
        root = _roots(r["parent"].to_numpy())[used] if n else np.zeros(0, np.int64)
        frame = pd.DataFrame({"step": np.r_[_range_names(trace, root), labels], **rows})
        keys = ["step"]
    out = frame.groupby(keys, sort=True).sum().reset_index()
    for key in keys:
        if key != "layer":
            out[key] = _labels(out[key])
    if by == "range":
        out["kernels_per_instance"] = np.where(out["instances"] > 0, out["kernels"] / out["instances"].clip(lower=1), np.nan)
        out = out[["range", "kernels", "gpu_time_ns", "instances", "graph_kernels", "kernels_per_instance"]]
        return out.sort_values(["gpu_time_ns", "range"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def _range_names(trace: Trace, ids: np.ndarray) -> np.ndarray:
    if not len(ids):
        return np.zeros(0, dtype=object)
    name = trace.columns("ranges", ["name"])["name"]
    cats = np.asarray(name.cat.categories.astype(str), dtype=object)
    codes = name.cat.codes.to_numpy()[ids]
    return np.where(codes >= 0, cats[np.maximum(codes, 0)], "")


def _range_layers(trace: Trace, layer_regex: str | None) -> np.ndarray:
    return range_layers(trace.columns("ranges", ["name", "parent", "depth"]), layer_regex)


def _by_kernel(trace: Trace) -> pd.DataFrame:
    k = trace.columns("kernels", ["short_name", "start", "end"])
    d = pd.DataFrame({"short_name": k["short_name"], "duration": k["end"].to_numpy() - k["start"].to_numpy()})
    g = d.groupby("short_name", observed=True, sort=True)["duration"]
    out = pd.DataFrame({
        "kernels": g.size(), "gpu_time_ns": g.sum(), "mean_ns": g.mean(), "min_ns": g.min(), "max_ns": g.max(),
    }).reset_index().rename(columns={"short_name": "kernel"})
    out[["kernels", "gpu_time_ns", "min_ns", "max_ns"]] = out[["kernels", "gpu_time_ns", "min_ns", "max_ns"]].astype(np.int64)
    return out.sort_values(["gpu_time_ns", "kernel"], ascending=[False, True], kind="stable").reset_index(drop=True)


def launches_per_step(trace: Trace, step_regex: str = r"^(step|ProfilerStep)") -> pd.DataFrame:
    """Kernels launched (and their GPU time) inside each top-level step range, in time order."""
    import re

    r = trace.ranges
    p = project(trace)
    cols = ["step", "kernels", "gpu_time_ns", "wall_ns"]
    if not len(r):
        return pd.DataFrame(columns=cols)
    rx = re.compile(step_regex)
    is_step_name = np.array([bool(rx.search(str(c))) for c in r["name"].cat.categories], dtype=bool)
    codes = r["name"].cat.codes.to_numpy()
    is_step = (r["depth"].to_numpy() == 0) & np.where(codes >= 0, is_step_name[np.maximum(codes, 0)], False)
    steps = np.flatnonzero(is_step)
    if not len(steps):
        return pd.DataFrame(columns=cols)
    rid = p["range_id"].to_numpy()
    root = _roots(r["parent"].to_numpy())
    inside = rid >= 0
    k_root = root[rid[inside]]
    n = len(r)
    counts = np.bincount(k_root, minlength=n)
    times = np.bincount(k_root, weights=p["duration"].to_numpy()[inside], minlength=n)
    steps = steps[np.argsort(r["start"].to_numpy()[steps], kind="stable")]
    return pd.DataFrame({
        "step": r["name"].astype(str).to_numpy()[steps],
        "kernels": counts[steps].astype(np.int64),
        "gpu_time_ns": np.rint(times[steps]).astype(np.int64),
        "wall_ns": (r["end"].to_numpy() - r["start"].to_numpy())[steps],
    }, columns=cols)
