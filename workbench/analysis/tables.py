"""Per-range, per-layer, per-kernel and per-step tables over a projected trace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import textfmt as fmt
from ..errors import WorkbenchError
from ..trace.arrays import group_sums
from ..trace.display import Table
from ..trace.manifest import ATTRIBUTION, section
from ..trace.schema import Trace
from ..trace.words import trace_words
from .gpu_projection import STATS, projection_stats, range_projection
from .projection import NO_LAUNCH, NO_RANGE, kernel_display, trace_labels, trace_layers
from .steps import PHASES, step_groups, step_rows, trace_steps_info

BY = ("range", "layer", "kernel", "path", "step", "phase")


def _labels(values) -> pd.Categorical:
    codes, uniq = pd.factorize(np.asarray(values, dtype=object), sort=True)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniq, dtype=object))


def summary(trace: Trace, by: str = "range", layer_regex: str | None = None, projection: bool = False) -> Table:
    """Kernel counts and GPU time grouped ``by``, as a DataFrame (a :class:`~workbench.trace.display.Table`:
    in a notebook it shows formatted, its headline the trace's totals):

    - ``range``: innermost range label (``kv_write`` over all layers and steps; a name with a
      layer in it counts without it, ``model.layers.3.self_attn`` as ``self_attn``: see
      :mod:`.layers`), with the number of range instances that launched kernels and kernels
      per instance;
    - ``layer``: (layer index, innermost range label); kernels outside any layer are layer -1;
    - ``kernel``: kernel readable name (the short name, with the template arguments that tell
      same-named kernels apart), with mean/min/max duration;
    - ``path``: full range path (``step_0/layer_03/kv_write``);
    - ``step``: the step range (``step_0``, ``ProfilerStep#3``, at any depth: see
      :mod:`.steps`; ``prefill`` / ``step_i`` for model calls), else the top-level range:
      launches per step;
    - ``phase``: ``prefill``, ``decode`` (kernels in decode steps) and ``other``.

    Unattributed kernels appear as ``(no range)`` / ``(no launch record)`` rows, never dropped.

    ``projection``: also Nsight Systems' GPU projection of the group's range instances (count,
    sum, mean, median: :mod:`.gpu_projection`; for ``step`` and ``phase``, of the step ranges
    themselves), with a row for a group whose ranges launched no kernel themselves but hold
    ranges that did (``layer_03`` around its ops). Not for ``kernel``. It reads the kernels'
    times and range ids, which the rest of the summary does not.

    Computed per range and then per group, reading only the columns it needs: on a stored
    trace it never loads the whole kernel table.
    """
    if by not in BY:
        raise WorkbenchError(by, f"unknown grouping; choose one of {', '.join(BY)}")
    if by == "kernel":
        return _shown(trace, by, _by_kernel(trace))
    own = trace.columns("ranges", ["kernels", "gpu_time_ns", "graph_kernels"])
    used = np.flatnonzero(own["kernels"].to_numpy() > 0)
    # One row per range that launched kernels, then one per kind of unattributed kernel.
    totals = section(trace.meta, ATTRIBUTION)
    extra = [(label, totals[status]) for label, status in ((NO_RANGE, "no_range"), (NO_LAUNCH, "no_launch"))
             if totals[status]["kernels"]]

    sums = ["kernels", "gpu_time_ns"] + (["graph_kernels"] if by == "range" else [])
    keys = _range_keys(trace, by, layer_regex, used)
    group_keys, group = _grouped(keys)
    frame = {k: (codes[group_keys] if values is None else values[codes[group_keys]]) for k, (codes, values) in keys.items()}
    for col in sums:
        frame[col] = group_sums(group, own[col].to_numpy()[used], len(group_keys))
    if by == "range":
        frame["instances"] = np.bincount(group, minlength=len(group_keys)).astype(np.int64)
    frame = pd.DataFrame(frame)
    if extra:  # one row per kind of unattributed kernel, merged with a range of that name if any
        rows = pd.DataFrame([{**{k: {"layer": -1, "phase": PHASES[0]}.get(k, label) for k in keys}, **{c: t[c] for c in sums},
                              **({"instances": 0} if by == "range" else {})} for label, t in extra])
        frame = pd.concat([frame, rows], ignore_index=True).groupby(list(keys), sort=False).sum().reset_index()
    out = frame.astype({c: np.int64 for c in frame.columns if c not in keys or c == "layer"})
    for key in keys:
        if key != "layer":
            out[key] = _labels(out[key])
    if projection:
        out = _with_projection(trace, out, by, layer_regex, [c for c in frame if c not in keys])
    if by == "range":
        out["kernels_per_instance"] = np.where(out["instances"] > 0, out["kernels"] / out["instances"].clip(lower=1), np.nan)
        out = out[["range", "kernels", "gpu_time_ns", "instances", "graph_kernels", "kernels_per_instance"]
                  + (STATS if projection else [])]
        out = out.sort_values(["gpu_time_ns", "range"], ascending=[False, True], kind="stable")
    else:
        out = out.sort_values(list(keys), kind="stable")
    return _shown(trace, by, out.reset_index(drop=True))


def _shown(trace: Trace, by: str, out: pd.DataFrame) -> Table:
    """The summary with its display: a headline of the trace's totals, in its own words (a
    CPU-only trace's ``kernels`` are CPU ops)."""
    w = trace_words(trace.meta)
    notes = () if w.unit == "kernel" else (f"the kernels and gpu_time_ns columns count {w.units} and their {w.time}",)
    return Table(out, headline=f"{trace.label} by {by}: {fmt.num(out['kernels'].sum())} {w.units}, "
                               f"{fmt.duration(out['gpu_time_ns'].sum())} {w.time}", notes=notes)


def _range_keys(trace: Trace, by: str, layer_regex: str | None, rows: np.ndarray) -> dict:
    """What the ranges ``rows`` are grouped on: key column -> (integer codes, their values;
    None: the codes are the values). Integer keys first (a name's category code, a layer, a
    path's factor code): strings are only looked up for the groups, not for millions of ranges."""
    if by == "path":
        codes, paths = pd.factorize(trace.columns("ranges", ["path"])["path"].to_numpy(dtype=object)[rows])
        return {"path": (codes, np.asarray(paths, dtype=object))}
    if by == "step":
        group_codes, group_labels = step_groups(trace)
        return {"step": (group_codes[rows], group_labels)}
    if by == "phase":
        return {"phase": (trace_steps_info(trace).phase[rows].astype(np.int64), np.asarray(PHASES, dtype=object))}
    label_codes, labels = trace_labels(trace, layer_regex)
    names = np.r_[labels, [""]]
    name_codes = np.where(label_codes >= 0, label_codes, len(names) - 1).astype(np.int64)
    if by == "layer":
        return {"layer": (trace_layers(trace, layer_regex)[rows], None), "range": (name_codes[rows], names)}
    return {"range": (name_codes[rows], names)}


def _grouped(keys: dict) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_groups` of the rows' packed key codes."""
    codes_list = [codes for codes, _ in keys.values()]
    packed = np.zeros(len(codes_list[0]), dtype=np.int64)
    for codes in codes_list:
        packed = packed * (int(codes.max(initial=-1)) + 2) + (codes + 1)
    return _groups(packed)


def _with_projection(trace: Trace, out: pd.DataFrame, by: str, layer_regex: str | None, sums: list[str]) -> pd.DataFrame:
    """``out`` with the GPU projection's statistics of each group's range instances (see
    :func:`summary`), and a row (no kernels of its own) for each group only they have."""
    proj = range_projection(trace)["gpu_proj_ns"].to_numpy()
    rows = trace_steps_info(trace).ids() if by in ("step", "phase") else np.flatnonzero(proj >= 0)
    rows = rows[proj[rows] >= 0]
    keys = _range_keys(trace, by, layer_regex, rows)
    group_keys, group = _grouped(keys)
    stats = projection_stats(group, proj[rows], len(group_keys))
    for k, (codes, values) in keys.items():
        stats[k] = codes[group_keys] if values is None else values[codes[group_keys]]
    on = list(keys)
    merged = out.astype({k: object for k in on if k != "layer"}).merge(stats, on=on, how="outer", sort=False)
    for col in sums:
        merged[col] = merged[col].fillna(0).astype(np.int64)
    merged[STATS[0]] = merged[STATS[0]].fillna(0).astype(np.int64)
    for key in on:
        if key != "layer":
            merged[key] = _labels(merged[key])
    return merged


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First row of each distinct key (in key order) and each row's group number."""
    space = int(keys.max(initial=0)) + 1
    if space > 4 * len(keys) + (1 << 20):
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)
    # Small key space (the usual case): a counting pass instead of a sort.
    first = np.full(space, -1, dtype=np.int64)
    first[keys[::-1]] = np.arange(len(keys) - 1, -1, -1)
    present = first >= 0
    rank = np.cumsum(present) - 1
    return first[present], rank[keys]


def _by_kernel(trace: Trace) -> pd.DataFrame:
    k = trace.columns("kernels", ["start", "end"])
    d = pd.DataFrame({"kernel": kernel_display(trace), "duration": k["end"].to_numpy() - k["start"].to_numpy()})
    g = d.groupby("kernel", observed=True, sort=True)["duration"]
    out = pd.DataFrame({
        "kernels": g.size(), "gpu_time_ns": g.sum(), "mean_ns": g.mean().round(), "min_ns": g.min(), "max_ns": g.max(),
    }).reset_index()
    ints = ["kernels", "gpu_time_ns", "mean_ns", "min_ns", "max_ns"]
    out[ints] = out[ints].astype(np.int64)
    return out.sort_values(["gpu_time_ns", "kernel"], ascending=[False, True], kind="stable").reset_index(drop=True)


def launches_per_step(trace: Trace, step_regex: str | None = None, phase: str | None = None) -> pd.DataFrame:
    """Kernels launched (and their GPU time) in each step (see :mod:`.steps`: the outermost
    step-named range on its branch, at any depth, else each model call), in time order, with
    its ``phase`` (``prefill`` or ``decode``); ``phase`` keeps only that one. A step that ran on
    several threads or ranks (one range each, one key) is one row, their kernels summed and its
    wall time from the first start to the last end: the steps the diff divides by. A step that
    launched nothing is a row too. Summed from the per-range totals: no kernel row is read."""
    cols = ["step", "phase", "kernels", "gpu_time_ns", "wall_ns"]
    if not trace.rows("ranges"):
        return pd.DataFrame(columns=cols)
    info = trace_steps_info(trace, step_regex)
    steps = info.ids(None if phase is None else PHASES.index(phase))
    if not len(steps):
        return pd.DataFrame(columns=cols)
    step = info.step
    r = trace.columns("ranges", ["start", "end", "kernels", "gpu_time_ns"])
    inside = step >= 0
    n = len(r)
    counts = group_sums(step[inside], r["kernels"].to_numpy()[inside], n)[steps]
    times = group_sums(step[inside], r["gpu_time_ns"].to_numpy()[inside], n)[steps]
    codes, k, first, last, head = step_rows(info, steps, r["start"].to_numpy()[steps], r["end"].to_numpy()[steps])
    order = np.argsort(first, kind="stable")
    return pd.DataFrame({
        "step": info.label[head].astype(str)[order],
        "phase": np.asarray(PHASES, dtype=object)[info.phase[head]][order],
        "kernels": group_sums(codes, counts, k)[order],
        "gpu_time_ns": group_sums(codes, times, k)[order],
        "wall_ns": (last - first)[order],
    }, columns=cols)
