"""Multi-rank views: what each rank of a job did per step and per layer, which rank the others
waited for, and what the collectives cost.

Per member (one rank's trace), :func:`rank_tables` makes small tables, so it can run where the
member is stored and only they travel; :func:`stragglers` and :func:`overview` work on those
tables merged over the ranks (the roles, ``rank`` first, added as columns: :func:`per_rank`).

**Collectives** are the work units whose name matches :data:`COLLECTIVE_REGEX`: NCCL kernels
(``ncclDevKernel_*``, ``ncclKernel_*``) on a GPU. On a CPU capture the c10d op on the calling
thread (``c10d::allreduce_``, a work unit) only hands the collective to the backend, which runs
it on a worker thread of its own, recorded as a range (``gloo:all_reduce``); there the ranges
matching the regex on threads that ran none of those ops are the collectives, each in the layer
and step of the last such op of its process that began before it.

**Per step** (decode steps, :mod:`.steps`, matched by their label; busy time from
:func:`.busy.busy_per_step`): ``wall_ns`` (the step range's length on this rank), ``busy_ns``
(union of its work units), ``collective_ns`` (union of its collectives), ``own_ns = wall_ns -
collective_ns`` (the part of the step the rank spent outside collectives: its own work, and
host time the device sat idle) and ``collective_share = collective_ns / wall_ns``.

**Straggler.** In a step that ends in collectives, a rank that arrives early waits inside the
collective until the last one arrives, so every rank's step lasts about as long and the wait
shows as collective time on the others. The straggler of a step is the rank with the largest
``own_ns``: the one the others waited for. Its ``lag_ns`` is its ``own_ns`` minus the median
``own_ns`` of the other ranks. This needs no clock shared between ranks (each rank's times are
differences on its own clock). In a step without collectives ``own_ns`` is the wall time: the
straggler is the rank whose step took longest.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.manifest import ATTRIBUTION, section, work_units
from ..trace.schema import Trace
from .busy import busy_per_step, union_lengths
from .projection import project
from .steps import NO_STEP, OTHER, PHASES, _matches

COLLECTIVE_REGEX = r"(?i)nccl|gloo|c10d::"

STEP_COLUMNS = ["step", "wall_ns", "busy_ns", "collective_ns", "own_ns", "collective_share", "kernels", "collectives"]
COLLECTIVE_COLUMNS = ["layer", "step", "collectives", "collective_ns", "share_of_step"]
_INTERVALS = ["start", "end", "layer", "step", "phase"]


def collective_intervals(trace: Trace, regex: str | None = None, layer_regex: str | None = None) -> pd.DataFrame:
    """One row per collective (see the module docstring): its ``start``, ``end``, ``layer``,
    ``step`` and ``phase``."""
    regex = regex or COLLECTIVE_REGEX
    mask = _matches(trace.columns("kernels", ["name"])["name"], regex)
    if not mask.any():
        return pd.DataFrame(columns=_INTERVALS)
    p = project(trace, layer_regex)
    ops = pd.DataFrame({"start": p["start"].to_numpy()[mask], "end": p["end"].to_numpy()[mask],
                        "layer": p["layer"].to_numpy()[mask], "step": p["step"].astype(str).to_numpy()[mask],
                        "phase": p["phase"].astype(str).to_numpy()[mask], "pid": p["pid"].to_numpy()[mask],
                        "tid": p["launch_tid"].to_numpy()[mask]})
    if work_units(trace.meta) == "cpu_op":
        worker = _worker_ranges(trace, regex, ops)
        if len(worker):
            return worker
    return ops[_INTERVALS]


def _worker_ranges(trace: Trace, regex: str, ops: pd.DataFrame) -> pd.DataFrame:
    """A CPU capture's collectives as its backend ran them: the matching ranges on threads that
    ran no collective op, each with the layer, step and phase of the last op of its process
    that began before it."""
    r = trace.columns("ranges", ["name", "start", "end", "pid", "tid"])
    callers = set(zip(ops["pid"].tolist(), ops["tid"].tolist()))
    rows = [i for i in np.flatnonzero(_matches(r["name"], regex))
            if (int(r["pid"].iat[i]), int(r["tid"].iat[i])) not in callers]
    found = r.iloc[rows][["start", "end", "pid"]].reset_index(drop=True)
    parts = []
    for pid, g in found.groupby("pid", sort=True):
        mine = ops[ops["pid"] == pid].sort_values("start", kind="stable")
        at = np.searchsorted(mine["start"].to_numpy(), g["start"].to_numpy(), side="right") - 1
        got = at >= 0
        pick = np.maximum(at, 0)
        parts.append(pd.DataFrame({
            "start": g["start"].to_numpy(), "end": g["end"].to_numpy(),
            "layer": np.where(got, mine["layer"].to_numpy()[pick], -1) if len(mine) else -1,
            "step": np.where(got, mine["step"].to_numpy()[pick], NO_STEP) if len(mine) else NO_STEP,
            "phase": np.where(got, mine["phase"].to_numpy()[pick], PHASES[OTHER]) if len(mine) else PHASES[OTHER]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=_INTERVALS)


def rank_steps(trace: Trace, collectives: pd.DataFrame) -> pd.DataFrame:
    """One row per decode step of one rank, in time order: :data:`STEP_COLUMNS` (see the
    module docstring); ``collectives``: :func:`collective_intervals` of the trace."""
    every = busy_per_step(trace)
    if not len(every):
        return pd.DataFrame(columns=STEP_COLUMNS)
    labels = every["step"].astype(str).to_numpy()
    index = {label: i for i, label in reversed(list(enumerate(labels)))}  # a repeated label: its first step
    c = collectives[collectives["phase"] == "decode"]
    row = c["step"].map(index)
    c, row = c[row.notna()], row[row.notna()].to_numpy(np.int64)
    collective = union_lengths(row, c["start"].to_numpy(np.int64), c["end"].to_numpy(np.int64), len(every))
    wall = every["wall_ns"].to_numpy(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(wall > 0, collective / np.maximum(wall, 1), np.nan)
    return pd.DataFrame({
        "step": labels, "wall_ns": wall, "busy_ns": every["gpu_busy_ns"].to_numpy(np.int64),
        "collective_ns": collective, "own_ns": wall - collective, "collective_share": share,
        "kernels": every["kernels"].to_numpy(np.int64), "collectives": np.bincount(row, minlength=len(every)),
    }, columns=STEP_COLUMNS)


def rank_collectives(collectives: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The collectives of one rank per (layer, step): how many, their summed time and that
    time's share of the step's wall time (``steps``: :func:`rank_steps`; NaN outside a decode
    step). Layer -1: outside every layer."""
    if not len(collectives):
        return pd.DataFrame(columns=COLLECTIVE_COLUMNS)
    c = collectives.assign(duration=collectives["end"] - collectives["start"])
    g = c.groupby(["layer", "step"], sort=True)["duration"]
    out = pd.DataFrame({"collectives": g.size(), "collective_ns": g.sum()}).reset_index()
    per_step = out["step"].map(dict(zip(steps["step"], steps["wall_ns"]))).astype(float)
    out["share_of_step"] = np.where(per_step > 0, out["collective_ns"] / per_step, np.nan)
    return out.astype({"layer": np.int64, "collectives": np.int64, "collective_ns": np.int64})[COLLECTIVE_COLUMNS]


def rank_tables(trace: Trace, collective_regex: str | None = None, layer_regex: str | None = None) -> dict:
    """Everything the multi-rank views need of one rank, as small tables: ``steps``
    (:func:`rank_steps`), ``collectives`` (:func:`rank_collectives`) and ``totals`` (one row:
    work units and their time, as the manifest's attribution counts them)."""
    found = collective_intervals(trace, collective_regex, layer_regex)
    steps = rank_steps(trace, found)
    totals = section(trace.meta, ATTRIBUTION)
    return {
        "steps": steps,
        "collectives": rank_collectives(found, steps),
        "totals": pd.DataFrame([{"kernels": sum(int(t["kernels"]) for t in totals.values()),
                                 "gpu_time_ns": sum(int(t["gpu_time_ns"]) for t in totals.values())}]),
    }


def per_rank(parts: list[tuple[dict, pd.DataFrame]]) -> pd.DataFrame:
    """Tables of several ranks as one: ``parts`` pairs each table with its member's roles
    (``rank``; ``run_id`` and ``variant`` too where a set holds several runs), which become
    its first columns."""
    if not parts:
        return pd.DataFrame(columns=["rank"])
    frames = [df.assign(**roles) for roles, df in parts]
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
    for col in frames[0].columns:  # categories that differ between ranks concatenate as objects
        was, now = frames[0][col].dtype, out[col].dtype
        if isinstance(was, pd.CategoricalDtype) and not isinstance(now, pd.CategoricalDtype):
            out[col] = out[col].astype("category")
    keys = list(parts[0][0])
    return out[keys + [c for c in out.columns if c not in keys]]


def _keys(df: pd.DataFrame) -> list[str]:
    """The role columns that tell runs apart (the rank aside)."""
    return [c for c in ("run_id", "variant") if c in df]


def stragglers(steps: pd.DataFrame) -> pd.DataFrame:
    """Per step (``steps``: :func:`rank_steps` of every rank, with its roles), in the order
    the steps first appear: ``ranks`` (how many ran it), ``straggler`` (the rank the others
    waited for: the largest ``own_ns``, see the module docstring; the first such rank on a
    tie), its ``own_ns``, the other ranks' median ``others_own_ns``, ``lag_ns`` (the
    difference) and the longest ``wall_ns`` of the step on any rank."""
    keys = _keys(steps) + ["step"]
    cols = keys + ["ranks", "straggler", "own_ns", "others_own_ns", "lag_ns", "wall_ns"]
    if not len(steps):
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in steps.groupby(keys, sort=False):
        own = g["own_ns"].to_numpy()
        at = int(np.argmax(own))
        others = np.delete(own, at)
        median = float(np.median(others)) if len(others) else float("nan")
        rows.append({**dict(zip(keys, key)), "ranks": len(g), "straggler": int(g["rank"].iloc[at]),
                     "own_ns": int(own[at]), "others_own_ns": median, "lag_ns": own[at] - median,
                     "wall_ns": int(g["wall_ns"].max())})
    return pd.DataFrame(rows, columns=cols)


def overview(totals: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per rank (``totals``: each rank's work units and their time, with its roles):
    its decode steps, their mean wall, busy and collective time, the mean collective share,
    and in how many steps it was the straggler."""
    keys = _keys(totals) + ["rank"]
    strag = stragglers(steps).groupby(_keys(steps) + ["straggler"]).size().rename("straggler_steps")
    strag.index = strag.index.set_names(keys)
    g = steps.groupby(keys)
    means = pd.DataFrame({"steps": g.size(), "step_wall_ns": g["wall_ns"].mean(), "busy_ns": g["busy_ns"].mean(),
                          "collective_ns": g["collective_ns"].mean(), "collective_share": g["collective_share"].mean()})
    out = totals.merge(means, left_on=keys, right_index=True, how="left")
    out = out.merge(strag, left_on=keys, right_index=True, how="left")
    for col in ("steps", "straggler_steps"):
        out[col] = out[col].fillna(0).astype(np.int64)
    return out.sort_values(keys, kind="stable").reset_index(drop=True)
