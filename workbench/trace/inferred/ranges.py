"""The steps and layers inferred from the kernel stream (:mod:`.structure`), put in a trace as
ranges, for a trace whose program gave almost none (an engine nobody instrumented, a capture
made elsewhere with ``cudaProfilerStart/Stop`` and no NVTX).

Each inferred step is a range ``step_<i>`` (numbered per GPU, as the workbench's runner names
its steps: every view then counts them as decode steps), the prefill found before them one
named ``prefill``, from its first kernel's launch (a CUDA
graph's launch for a replayed step), or the step before's last kernel's end where that is later
(a program that does not wait for each token launches steps ahead of the GPU: the step's time
is its own, not the queue's, in every view), to its last kernel's end; each of its layers a
child range ``inferred_layer_<NN>`` over its kernels' GPU span. A step's prologue and epilogue kernels are in the step,
in no layer; kernels before the first step stay in no range. The ranges' domain is
``inferred``, and the manifest's ``inferred`` section says what they rest on.

Real ranges always win: only kernels no real range holds are searched (a library's own ranges,
CUB's around a scan, aside: those go under the inferred layer that holds them), and only where
they are nearly all of the trace's kernels. A search whose confidence is low adds nothing and says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..arrays import climb, queued_starts
from .structure import COLUMNS, gpus, infer_kernels

# The prefill's range (boundaries.PREFILL_STEP), named as the workbench's runner names its own:
# every view counts it as the prefill phase.
PREFILL = "prefill"

DOMAIN = "inferred"
# Layer ranges are named `inferred_layer_<NN>`: every per-layer view reads the layer number and the
# label `inferred_layer`, so no table or diff can pass an inferred layer off as a measured one.
LAYER = "inferred_layer"
# The share of kernels outside every real range above which a trace is searched: a handful of
# kernels in a library's own range (a cub scan) does not make a trace instrumented.
UNRANGED = 0.9
# NVTX domains of libraries that annotate their own calls (CUB and Thrust: CCCL; NCCL): their
# ranges do not make a program instrumented.
LIBRARY_DOMAINS = frozenset({"CCCL", "NCCL"})
# Below this confidence (the share of step kernels in the commonest step sequence, times the
# share in layers: :class:`.structure.Structure`) nothing is added.
MIN_CONFIDENCE = 0.5
# A "step" of fewer kernels than this is a repeat of one or two ops, not a model's step: not
# reported at all (a CPU-only trace's op pairs would otherwise print a note in every view).
MIN_STEP = 4


def inferred_ranges(kernels: pd.DataFrame, ranges: pd.DataFrame, layers: int | None = None):
    """``(added, range_id, section, ranges)``: the inferred ranges (columns of the nested
    ranges table, ids after ``ranges``'), every kernel's innermost range with them, the
    manifest's ``inferred`` section, and ``ranges`` with each library's range that the
    inferred ones hold under them (:func:`_library`); ``added`` and ``range_id`` are None
    where nothing is added (the section then says why; None where the trace was not searched
    or no step repeats)."""
    rid = kernels["range_id"].to_numpy()
    lib = _library(ranges)
    free = np.flatnonzero((rid < 0) | lib[np.maximum(rid, 0)] & (rid >= 0) if lib.any() else rid < 0)
    if len(free) < 2 or len(free) < UNRANGED * len(rid):
        return None, None, None, ranges
    k = kernels[[*COLUMNS, "launch_tid"]].take(free).reset_index(drop=True)
    found = infer_kernels(k, layers)
    if found.steps == 0 or found.period < MIN_STEP:
        return None, None, None, ranges
    section = {**found.as_dict(), "hint_layers": layers}
    if found.steps < 2 or found.confidence < MIN_CONFIDENCE:
        return None, None, {**section, "applied": False}, ranges
    added, of = _ranges(k, found.step, found.layer, len(ranges))
    range_id = rid.copy()
    plain = rid[free] < 0
    range_id[free[plain]] = of[plain]
    if not plain.all():
        ranges = _under(ranges, lib, rid[free[~plain]], of[~plain], added)
    return added, range_id, {**section, "applied": True}, ranges


def _library(ranges: pd.DataFrame) -> np.ndarray:
    """Per range (rows of the nested table, ids their positions): whether it and every range
    above it are a library's own (``LIBRARY_DOMAINS``). A program's kernels inside them are
    still uninstrumented: they are searched, and keep those ranges as their innermost."""
    if not len(ranges) or "domain" not in ranges:
        return np.zeros(len(ranges), bool)
    domain = ranges["domain"].astype("category")  # as the schema has it: no copy then
    # Each distinct domain looked at once; a range with none (code -1) reads the False put last.
    lib = np.append(domain.cat.categories.astype(str).isin(LIBRARY_DOMAINS), False)[domain.cat.codes.to_numpy()]
    if not lib.any():
        return lib
    above, _ = climb(ranges["parent"].to_numpy(), ~lib)  # the nearest range at or above that is none
    return above < 0


def _under(ranges: pd.DataFrame, lib: np.ndarray, inner: np.ndarray, of: np.ndarray, added: pd.DataFrame) -> pd.DataFrame:
    """``ranges`` with each top library range moved under the inferred range its first kernel is
    in (``inner``: those kernels' innermost ranges, ``of``: their inferred ranges), it and the
    ranges inside it one level deeper than that range."""
    parent, depth = ranges["parent"].to_numpy().copy(), ranges["depth"].to_numpy().copy()
    top, _ = climb(parent)  # each library range's top one (its root: library ranges all up)
    roots, first = np.unique(top[inner], return_index=True)
    new_parent = of[first]
    keep = new_parent >= 0
    roots, new_parent = roots[keep], new_parent[keep]
    depth_of = pd.Series(added["depth"].to_numpy(), index=added["id"].to_numpy())
    shift = np.zeros(len(ranges), np.int64)
    shift[roots] = depth_of.reindex(new_parent).to_numpy() + 1
    moved = lib & (shift[top] > 0)
    out = ranges.copy()
    parent[roots] = new_parent
    depth[moved] += shift[top[moved]]
    out["parent"], out["depth"] = parent, depth
    return out


def _ranges(k: pd.DataFrame, step: np.ndarray, layer: np.ndarray, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The step and layer ranges of kernels ``k`` (their inferred ``step``/``layer``, numbered
    per GPU), ids from ``n``, and each kernel's range id (-1: in no step)."""
    gpu = gpus(k)
    start, end = k["start"].to_numpy(), k["end"].to_numpy()
    launch = k["launch_start"].to_numpy()
    begin = np.where(launch >= 0, np.minimum(launch, start), start)
    frame = pd.DataFrame({"gpu": gpu, "step": step, "layer": layer, "begin": begin, "start": start, "end": end,
                          "pid": k["pid"].to_numpy(), "tid": k["launch_tid"].to_numpy(), "row": np.arange(len(k))})
    in_step = frame[frame["step"] != -1]  # the decode steps' kernels and the prefill's
    steps = in_step.sort_values("start", kind="stable").groupby(["gpu", "step"], sort=True).agg(
        start=("begin", "min"), end=("end", "max"), pid=("pid", "first"), tid=("tid", "first"))
    # Per GPU: no step starts before the one before it ended.
    steps["start"] = queued_starts(steps["start"].to_numpy(), steps["end"].to_numpy(),
                                   steps.index.get_level_values(0).to_numpy())
    steps["id"] = np.arange(n, n + len(steps), dtype=np.int64)
    in_layer = in_step[in_step["layer"] >= 0]
    lay = in_layer.groupby(["gpu", "step", "layer"], sort=True).agg(
        start=("start", "min"), end=("end", "max"), pid=("pid", "first"))
    lay["id"] = np.arange(n + len(steps), n + len(steps) + len(lay), dtype=np.int64)
    parent_of = steps["id"]
    of_step = lay.index.droplevel(2)  # each layer's (gpu, step)
    lay_parent = parent_of.reindex(of_step).to_numpy()
    lay_tid = steps["tid"].reindex(of_step).to_numpy()
    width = max(2, len(str(int(in_layer["layer"].max())))) if len(in_layer) else 2
    names = [f"step_{s}" if s >= 0 else PREFILL for s in steps.index.get_level_values(1)]
    names += [f"{LAYER}_{j:0{width}d}" for j in lay.index.get_level_values(2)]
    added = pd.DataFrame({
        "name": pd.Categorical(names), "start": np.r_[steps["start"].to_numpy(), lay["start"].to_numpy()],
        "end": np.r_[steps["end"].to_numpy(), lay["end"].to_numpy()],
        "pid": np.r_[steps["pid"].to_numpy(), lay["pid"].to_numpy()],
        "tid": np.r_[steps["tid"].to_numpy(), lay_tid],
        "domain": pd.Categorical([DOMAIN] * (len(steps) + len(lay))),
        "id": np.r_[steps["id"].to_numpy(), lay["id"].to_numpy()],
        "parent": np.r_[np.full(len(steps), -1, np.int64), lay_parent].astype(np.int64),
        "depth": np.r_[np.zeros(len(steps), np.int64), np.ones(len(lay), np.int64)],
    })
    of = np.full(len(k), -1, np.int64)
    s_rows = in_step["row"].to_numpy()
    of[s_rows] = parent_of.reindex(pd.MultiIndex.from_arrays([in_step["gpu"], in_step["step"]])).to_numpy()
    l_rows = in_layer["row"].to_numpy()
    of[l_rows] = lay["id"].reindex(pd.MultiIndex.from_arrays([in_layer["gpu"], in_layer["step"],
                                                               in_layer["layer"]])).to_numpy()
    return added, of
