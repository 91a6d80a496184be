"""Pick one range instance of a trace and the kernels it launched: what a timeline shows.

A *range key* is a range path with the step level removed, as :func:`workbench.diff` matches
ranges (``step_2/layer_03/kv_write`` has key ``layer_03/kv_write``). A key names a range in
every step; :func:`instances` lists its instances in time order, :func:`window` returns one
instance's sub-ranges and kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.diff import step_free
from ..analysis.steps import step_parts, trace_steps
from ..analysis.projection import project, trace_layers
from ..errors import WorkbenchError
from ..analysis.layers import label_parts
from ..trace.schema import Trace


def range_keys(trace: Trace, step_regex: str | None = None) -> pd.Series:
    """The step-free key of every range (indexed like ``trace.ranges``)."""
    r = trace.ranges
    if not len(r):
        return pd.Series([], dtype=object)
    paths = r["path"].astype(str).to_numpy(dtype=object)
    # The diff's keys: each range's step level cut out wherever its step range sits.
    codes, keys = step_free(paths, trace_steps(trace, step_regex) >= 0, step_parts(trace, step_regex) - 1)
    return pd.Series(keys[codes], index=r.index)


def instances(trace: Trace, key: str, step_regex: str | None = None) -> pd.DataFrame:
    """Ranges (rows of ``trace.ranges``) whose key or full path is ``key``, earliest first."""
    r = trace.ranges
    if not len(r):
        return r
    keys = range_keys(trace, step_regex)
    sel = (keys == key).to_numpy() | (r["path"].astype(str) == key).to_numpy()
    return r[sel].sort_values(["start", "id"], kind="stable")


def layer_instance(trace: Trace, layer: int, layer_regex: str | None = None) -> int | None:
    """Range id of the first range that *is* layer ``layer`` (its own name matches the layer
    pattern), or None."""
    r = trace.ranges
    if not len(r):
        return None
    own_by_name = label_parts(r["name"].cat.categories.astype(str), layer_regex)[0] >= 0
    codes = r["name"].cat.codes.to_numpy()
    own = np.where(codes >= 0, own_by_name[np.maximum(codes, 0)], False) if len(own_by_name) else np.zeros(len(codes), dtype=bool)
    lay = trace_layers(trace, layer_regex)
    sel = r[own & (lay == int(layer))].sort_values(["start", "depth"], kind="stable")
    return int(sel["id"].iloc[0]) if len(sel) else None


def first_step(trace: Trace, step_regex: str | None = None) -> int | None:
    """Range id of the first step: the earliest step range (``step_0``, ``ProfilerStep#3``, at
    any depth), else the longest top-level range; None without ranges."""
    r = trace.ranges
    if not len(r):
        return None
    top = r[r["depth"] == 0]
    step = trace_steps(trace, step_regex)
    steps = r[step == np.arange(len(r))]
    if len(steps):
        return int(steps.sort_values(["start", "id"], kind="stable")["id"].iloc[0])
    longest = top.assign(_d=top["end"] - top["start"]).sort_values(["_d", "start", "id"], ascending=[False, True, True],
                                                                  kind="stable")
    return int(longest["id"].iloc[0]) if len(longest) else None


def resolve(trace: Trace, where=None, step_regex: str | None = None) -> int | None:
    """A range id from ``where``: an int range id, ``("layer", n)``, or a key/path string
    (first instance). ``None`` means the first step (or None for a trace without ranges)."""
    if where is None:
        return first_step(trace, step_regex)
    if isinstance(where, (int, np.integer)):
        if not 0 <= int(where) < len(trace.ranges):
            raise WorkbenchError(trace.label, f"no range with id {where}")
        return int(where)
    if isinstance(where, tuple) and len(where) == 2 and where[0] == "layer":
        rid = layer_instance(trace, int(where[1]))
        if rid is None:
            raise WorkbenchError(trace.label, f"no range for layer {where[1]}")
        return rid
    inst = instances(trace, str(where), step_regex)
    if not len(inst):
        raise WorkbenchError(trace.label, f"no range {where!s:.200}")
    return int(inst["id"].iloc[0])


@dataclass
class Window:
    """One range instance: the range itself, its descendants and the kernels they launched."""

    range_id: int | None
    ranges: pd.DataFrame   # the range and its descendants, by start
    kernels: pd.DataFrame  # projected kernels launched inside, by start
    t0: int                # window start (ns), the origin of the timeline's time axis
    t1: int

    @property
    def title(self) -> str:
        if self.range_id is None or not len(self.ranges):
            return "whole trace"
        return str(self.ranges["path"].iloc[0])


def window(trace: Trace, where=None, *, max_kernels: int = 20000, step_regex: str | None = None) -> Window:
    """The range instance named by ``where`` (see :func:`resolve`) with its descendants and
    kernels. A trace without ranges gives its first ``max_kernels`` kernels."""
    p = project(trace)
    rid = resolve(trace, where, step_regex)
    r = trace.ranges
    if rid is None:
        k = p.sort_values(["start", "end"], kind="stable").head(max_kernels)
        sub = r.iloc[:0]
    else:
        row = r.iloc[rid]
        same = (r["pid"].to_numpy() == row["pid"]) & (r["tid"].to_numpy() == row["tid"])
        inside = same & (r["start"].to_numpy() >= row["start"]) & (r["end"].to_numpy() <= row["end"]) \
            & (r["depth"].to_numpy() >= row["depth"])
        sub = r[inside].sort_values(["start", "depth", "id"], ascending=[True, True, True], kind="stable")
        k = p[np.isin(p["range_id"].to_numpy(), sub["id"].to_numpy())]
        k = k.sort_values(["start", "end"], kind="stable").head(max_kernels)
    starts = [int(x) for x in (sub["start"].min() if len(sub) else None, k["start"].min() if len(k) else None)
              if x is not None and not pd.isna(x)]
    ends = [int(x) for x in (sub["end"].max() if len(sub) else None, k["end"].max() if len(k) else None)
            if x is not None and not pd.isna(x)]
    t0 = min(starts) if starts else 0
    t1 = max(ends) if ends else t0
    return Window(rid, sub.reset_index(drop=True), k.reset_index(drop=True), t0, t1)
