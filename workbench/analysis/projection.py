"""Projection: each kernel belongs to the innermost range that encloses its launching API
call on the launching thread (found at import: ``kernels.range_id``), and through it to a
range path, a step and a layer.

Columns added to the kernels': ``range`` (the innermost range's label: its name with the layer
taken out, ``model.layers.3.self_attn`` -> ``self_attn``, see :mod:`.layers`), ``path`` (its
path, ``decode/step_2/layer_03/kv_write``), ``step`` (the label of the kernel's step, see
:mod:`.steps`: ``step_2``, or ``prefill`` / ``step_i`` for a model call; for a kernel in no
step, the name of its top-level range, so a trace without steps groups by its top-level
ranges), ``display_name`` (the kernel's readable name: :func:`kernel_display`), ``layer`` (see
:func:`range_layers`, -1 for none), ``phase`` (``prefill``, ``decode`` or
``other``: see :mod:`.steps`), ``status`` and ``duration`` (end - start, ns). A kernel outside every range has the
label ``(no range)`` as its range, path and step, one without a launch record
``(no launch record)``.

The result keeps every kernel. ``status`` says how it was attributed:
``range`` (inside a range), ``no_range`` (launched outside any range), ``no_launch`` (no
launch record, e.g. the API call fell outside the capture). ``graph`` marks kernels launched
from a CUDA graph; they are attributed through their ``cudaGraphLaunch`` call.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.arrays import climb
from ..trace.names import code_dtype, display_names
from ..trace.options import DEFAULT
from ..trace.schema import Trace
from .layers import label_parts, trace_label_parts
from .steps import PHASES, step_groups, trace_steps_info

NO_RANGE = "(no range)"
NO_LAUNCH = "(no launch record)"


def range_layers(ranges: pd.DataFrame, pattern: str | None = None) -> np.ndarray:
    """Layer index of each range: its own name's match, else the nearest enclosing match (-1)."""
    if not len(ranges):
        return np.full(0, -1, dtype=np.int64)
    return _inherited(ranges, label_parts(ranges["name"].cat.categories.astype(str), pattern)[0])


def _inherited(ranges: pd.DataFrame, by_cat: np.ndarray) -> np.ndarray:
    """Per range, the layer of its name (``by_cat``: per category of the name column) or,
    for a name with none, of its nearest ancestor's that has one (-1)."""
    codes = ranges["name"].cat.codes.to_numpy()
    own = np.where(codes >= 0, by_cat[np.maximum(codes, 0)], -1)
    # A range without a layer of its own takes that of its nearest ancestor with one.
    ptr = climb(ranges["parent"].to_numpy(), own >= 0)[0]
    return np.where(ptr >= 0, own[np.maximum(ptr, 0)], -1)


def trace_layers(trace: Trace, pattern: str | None = None) -> np.ndarray:
    """:func:`range_layers` of the trace's ranges, computed once per pattern (projection and
    the per-layer summary both need it)."""
    key = f"range_layers:{pattern}"
    if key not in trace.memo:
        trace.memo[key] = _inherited(trace.columns("ranges", ["name", "parent"]), trace_label_parts(trace, pattern)[0])
    return trace.memo[key]


def trace_labels(trace: Trace, pattern: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per range: its label's code (-1: a range with no name) into the distinct labels,
    sorted (see :mod:`.layers`); computed once per pattern."""
    key = f"range_labels:{pattern}"
    if key not in trace.memo:
        name = trace.columns("ranges", ["name"])["name"]
        labels, inv = np.unique(trace_label_parts(trace, pattern)[1], return_inverse=True)
        # A missing name (code -1) reads the -1 put last.
        by_code = np.append(inv.reshape(-1), -1).astype(np.int32)
        trace.memo[key] = (by_code[name.cat.codes.to_numpy()], labels.astype(object))
    return trace.memo[key]


def kernel_display(trace: Trace) -> pd.Categorical:
    """Each kernel's readable name (:func:`~workbench.trace.names.display_names`: the short
    name, with the template arguments that tell same-named kernels apart), worked out once
    per distinct name."""
    key = "display_names"
    if key not in trace.memo:
        name = trace.columns("kernels", ["name"])["name"]
        shown = display_names(name.cat.categories)
        codes, uniq = pd.factorize(np.asarray(shown + [""], dtype=object), sort=True)
        # Per name code (a missing name, -1, reads the "" put last), in the dtype the
        # categorical keeps: one gather over the kernels, no kernel-sized temporary.
        by_code = codes.astype(code_dtype(len(uniq)))
        trace.memo[key] = pd.Categorical.from_codes(by_code[name.cat.codes.to_numpy()],
                                                    categories=pd.Index(uniq, dtype=object), validate=False)
    return trace.memo[key]


def project(trace: Trace, layer_regex: str | None = None) -> pd.DataFrame:
    """Kernels with ``range_id``, ``range`` (innermost name), ``path``, ``layer``, ``status``,
    ``step`` (step range name, else top-level range name) and ``duration``: see the module
    docstring. Cached on the trace; also visible to ``trace.sql`` as the view ``projected``.
    """
    key = f"projected:{layer_regex}"
    cached = trace.memo.get(key)
    if cached is not None:
        trace.views["projected"] = cached
        return cached
    # Only the columns used here: a fresh import may still be making the ranges' paths and
    # the kernels' launch names, which are waited for where they are needed.
    k = trace.columns("kernels", ["range_id", "launch_tid", "start", "end"])
    r = trace.columns("ranges", ["parent"])
    rid = k["range_id"].to_numpy()
    has = rid >= 0
    # The ranges of the kernels in one: rid itself when every kernel is in a range (the
    # usual case; a subset would be one more row-sized array).
    within = rid if has.all() else rid[has]
    nolaunch = k["launch_tid"].to_numpy() < 0
    nolaunch_any = nolaunch.any()
    # Per range, its kernels that show its strings (a no-launch label replaces them).
    shown = np.bincount(rid[has & ~nolaunch] if nolaunch_any else within, minlength=len(r))
    # Strings are looked up per range and only their codes (int32) spread over the kernels:
    # a 10M-kernel trace never builds 10M-element object arrays.
    # The per-range tables, read here: the stored trace's columns are read on one thread only.
    name_codes, names = trace_labels(trace, layer_regex)
    group_codes, group_labels = step_groups(trace)
    layers_r = trace_layers(trace, layer_regex)
    phase_r = trace_steps_info(trace).phase
    path_column = trace.columns("ranges", ["path"])["path"]
    with DEFAULT.pool(1, "workbench-paths") as pool:
        # Arrow sorts the paths (only those a kernel shows) without the GIL while the rest
        # is made here.
        sorting = pool.submit(_sorted_distinct, path_column, shown > 0)
        if len(within) == len(k):
            layers, phase = layers_r[within], phase_r[within]
        else:
            layers = np.full(len(k), -1, dtype=np.int64)
            phase = np.zeros(len(k), dtype=np.int8)
            if len(within):
                layers[has], phase[has] = layers_r[within], phase_r[within]
        status = (~has).astype(np.int8)
        if nolaunch_any:
            status[nolaunch] = 2
        in_range = _spread(name_codes, names, within, has, nolaunch, shown)
        step = _spread(group_codes, group_labels, within, has, nolaunch, shown)
        paths, path_codes = sorting.result()
    added = {
        "duration": k["end"].to_numpy() - k["start"].to_numpy(),
        "range": in_range,
        "path": _spread(path_codes, paths, within, has, nolaunch, shown),
        "step": step,
        "layer": layers,
        "status": pd.Categorical.from_codes(status, categories=["range", "no_range", "no_launch"]),
        "phase": pd.Categorical.from_codes(phase, categories=list(PHASES)),
        "display_name": kernel_display(trace),
    }
    # The kernels' columns (range_id included) shared, not copied, and the new arrays taken as
    # they are (assigning a column would copy each).
    kernels = trace.kernels
    out = pd.DataFrame({**{c: kernels[c] for c in kernels.columns}, **added}, copy=False)
    trace.memo[key] = out
    trace.views["projected"] = out
    return out


def _sorted_distinct(values: pd.Series, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct strings of ``values`` where ``keep``, sorted, and each row's index into
    them (-1 where not kept). Arrow sorts them: a range per decode-step layer op makes
    millions of distinct paths, which numpy sorts as Python objects in seconds. (UTF-8 byte
    order is code point order, the order of Python's string comparison.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    # Sorted, then told apart from their neighbours (a hash of millions of strings costs
    # several times the sort).
    strings = pa.chunked_array([pa.array(values, pa.large_string())]).combine_chunks()
    rows = np.flatnonzero(keep)
    if len(rows) < len(strings):
        strings = strings.take(rows)
    order = pc.array_sort_indices(strings).to_numpy()
    ordered = strings.take(order)
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        first[1:] = pc.not_equal(ordered.slice(1), ordered.slice(0, len(order) - 1)).to_numpy(zero_copy_only=False)
    codes = np.full(len(keep), -1, dtype=np.int32)
    codes[rows[order]] = np.cumsum(first, dtype=np.int32) - 1
    return ordered.filter(first).to_numpy(zero_copy_only=False).astype(object), codes


def _spread(codes_r: np.ndarray, values: np.ndarray, within: np.ndarray, has: np.ndarray, nolaunch: np.ndarray,
            shown: np.ndarray) -> pd.Categorical:
    """Categorical over kernels of a per-range string (``values[codes_r]``, -1 for ""), with
    the unattributed labels; ``within``: the range of each kernel where ``has``; ``shown``:
    per range, its kernels that show its string. Its categories are the values that occur,
    sorted. ``values`` are distinct and sorted: only the three labels are placed among them
    here, with no sort of strings; the codes are made per range and then spread over the
    kernels in one gather, in the dtype they keep."""
    labels = ("", NO_RANGE, NO_LAUNCH)
    nv = len(values)
    # Code space: the values, then the labels.
    code_r = np.where(codes_r >= 0, codes_r, nv)
    occurs = np.zeros(nv + len(labels), dtype=bool)
    occurs[code_r[shown > 0]] = True
    occurs[nv + 1] = (~has & ~nolaunch).any()
    occurs[nv + 2] = nolaunch.any()
    used = np.flatnonzero(occurs)
    kept = used[used < nv]
    cats = values if len(kept) == nv else values[kept]  # often all are: no copy
    remap = np.zeros(nv + len(labels), dtype=np.int32)
    remap[kept] = np.arange(len(kept))
    for code in sorted(used[used >= nv], key=lambda c: labels[c - nv]):
        label = labels[code - nv]
        pos = int(np.searchsorted(cats, label))
        if pos < len(cats) and cats[pos] == label:  # a range of that very name: one category
            remap[code] = pos
            continue
        cats = np.insert(cats, pos, label)
        remap[remap >= pos] += 1  # placed labels move too: they are sorted, so only if after
        remap[code] = pos
    remap = remap.astype(code_dtype(len(cats)))
    if len(within) == len(has):  # every kernel in a range (the usual case): no row-sized fill
        codes = remap[code_r][within]
    else:
        codes = np.full(len(has), remap[nv + 1])
        codes[has] = remap[code_r][within]
    if occurs[nv + 2]:  # a masked assignment scans every row, even when none is chosen
        codes[nolaunch] = remap[nv + 2]
    return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object), validate=False)


Trace.view_makers["projected"] = project
