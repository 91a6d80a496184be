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
    """Kernels launched (and GPU time) inside each top-level step range, in time order."""
    import re

    r = trace.ranges
    p = project(trace)
    rx = re.compile(step_regex)
    tops = r[(r["depth"] == 0) & r["name"].astype(str).map(lambda s: bool(rx.search(s)))]
    rows = []
    inside = p[p["status"] == "range"]
    for step in tops.sort_values("start").itertuples():
        sel = inside["step"].astype(str) == str(step.name)
        sel &= (inside["launch_start"] >= step.start) & (inside["launch_start"] < step.end)
        rows.append({"step": str(step.name), "kernels": int(sel.sum()),
                     "gpu_time_ns": int(inside.loc[sel, "duration"].sum()), "wall_ns": int(step.end - step.start)})
    return pd.DataFrame(rows, columns=["step", "kernels", "gpu_time_ns", "wall_ns"])
