"""Per-range, per-layer, per-kernel and per-step tables over a projected trace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import WorkbenchError
from ..trace.model import Trace
from .projection import project

BY = ("range", "layer", "kernel", "path", "step")


def _agg(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = df.groupby(keys, observed=True, sort=True, dropna=False)["duration"]
    out = pd.DataFrame({"kernels": g.size(), "gpu_time_ns": g.sum()}).reset_index()
    out["kernels"] = out["kernels"].astype(np.int64)
    out["gpu_time_ns"] = out["gpu_time_ns"].astype(np.int64)
    return out


def summary(trace: Trace, by: str = "range", layer_regex: str | None = None) -> pd.DataFrame:
    """Kernel counts and GPU time grouped ``by``:

    - ``range``: innermost range name (``kv_write`` over all layers and steps), with the
      number of range instances that launched kernels and kernels per instance;
    - ``layer``: (layer index, innermost range name); kernels outside any layer are layer -1;
    - ``kernel``: kernel short name, with mean/min/max duration;
    - ``path``: full range path (``step_0/layer_03/kv_write``);
    - ``step``: outermost range (``step_0``, ``ProfilerStep#3``): launches per step.

    Unattributed kernels appear as ``(no range)`` / ``(no launch record)`` rows, never dropped.
    """
    if by not in BY:
        raise WorkbenchError(by, f"unknown grouping; choose one of {', '.join(BY)}")
    p = project(trace, layer_regex)
    if by == "range":
        out = _agg(p, ["range"])
        inst = p[p["range_id"] >= 0].groupby("range", observed=True)["range_id"].nunique()
        out["instances"] = out["range"].map(inst).fillna(0).astype(np.int64)
        # CUDA-graph kernels are attributed through cudaGraphLaunch: say how many they are.
        graph = p[p["graph"]].groupby("range", observed=True).size()
        out["graph_kernels"] = out["range"].map(graph).fillna(0).astype(np.int64)
        out["kernels_per_instance"] = np.where(out["instances"] > 0, out["kernels"] / out["instances"].clip(lower=1), np.nan)
        return out.sort_values(["gpu_time_ns", "range"], ascending=[False, True], kind="stable").reset_index(drop=True)
    if by == "layer":
        out = _agg(p, ["layer", "range"])
        return out.sort_values(["layer", "range"], kind="stable").reset_index(drop=True)
    if by == "kernel":
        g = p.groupby("short_name", observed=True, sort=True)["duration"]
        out = pd.DataFrame({
            "kernels": g.size(), "gpu_time_ns": g.sum(), "mean_ns": g.mean(), "min_ns": g.min(), "max_ns": g.max(),
        }).reset_index().rename(columns={"short_name": "kernel"})
        out[["kernels", "gpu_time_ns", "min_ns", "max_ns"]] = out[["kernels", "gpu_time_ns", "min_ns", "max_ns"]].astype(np.int64)
        return out.sort_values(["gpu_time_ns", "kernel"], ascending=[False, True], kind="stable").reset_index(drop=True)
    if by == "path":
        return _agg(p, ["path"]).sort_values("path", kind="stable").reset_index(drop=True)
    out = _agg(p, ["step"])
    return out.sort_values("step", kind="stable").reset_index(drop=True)


def launches_per_step(trace: Trace, step_regex: str = r"^(step|ProfilerStep)") -> pd.DataFrame:
    """Kernels launched (and their GPU time) inside each top-level step range, in time order."""
    import re

    from .projection import _roots

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
