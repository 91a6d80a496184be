"""Projection: each kernel belongs to the innermost range that encloses its launching API
call on the launching thread (found at import: ``kernels.range_id``), and through it to a
range path, a step and a layer.

The result keeps every kernel. ``status`` says how it was attributed:
``range`` (inside a range), ``no_range`` (launched outside any range), ``no_launch`` (no
launch record, e.g. the API call fell outside the capture). ``graph`` marks kernels launched
from a CUDA graph; they are attributed through their ``cudaGraphLaunch`` call.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.model import Trace, layer_pattern

NO_RANGE = "(no range)"
NO_LAUNCH = "(no launch record)"


def range_layers(ranges: pd.DataFrame, pattern: str | None = None) -> np.ndarray:
    """Layer index of each range: its own name's match, else the nearest enclosing match (-1)."""
    n = len(ranges)
    if not n:
        return np.full(0, -1, dtype=np.int64)
    rx = layer_pattern(pattern)
    cats = ranges["name"].cat.categories
    by_cat = np.array([int(m.group(1)) if (m := rx.search(str(c))) else -1 for c in cats], dtype=np.int64)
    codes = ranges["name"].cat.codes.to_numpy()
    own = np.where(codes >= 0, by_cat[np.maximum(codes, 0)], -1)
    # Each range points at itself if its name gives a layer, else at its parent; pointer
    # jumping then moves every pointer up past the ranges without a layer of their own, in
    # O(n log depth) (a level-by-level walk would cost a sort, or O(n * depth)).
    ptr = np.where(own >= 0, np.arange(n), ranges["parent"].to_numpy())
    active = np.flatnonzero(ptr >= 0)
    active = active[own[ptr[active]] < 0]
    while len(active):
        ptr[active] = ptr[ptr[active]]
        active = active[ptr[active] >= 0]
        active = active[own[ptr[active]] < 0]
    return np.where(ptr >= 0, own[np.maximum(ptr, 0)], -1)


def project(trace: Trace, layer_regex: str | None = None) -> pd.DataFrame:
    """Kernels with ``range_id``, ``range`` (innermost name), ``path``, ``layer``, ``status``,
    ``step`` (outermost range name) and ``duration``. Cached on the trace; also visible to
    ``trace.sql`` as the view ``projected``.
    """
    key = f"projected:{layer_regex}"
    cached = trace.memo.get(key)
    if cached is not None:
        trace.views["projected"] = cached
        return cached
    k = trace.kernels
    r = trace.ranges
    rid = k["range_id"].to_numpy()
    has = rid >= 0
    # The ranges of the kernels in one: rid itself when every kernel is in a range (the
    # usual case; a subset would be one more row-sized array).
    within = rid if has.all() else rid[has]
    nolaunch = k["launch_tid"].to_numpy() < 0
    # Strings are looked up per range and only their codes (int32) spread over the kernels:
    # a 10M-kernel trace never builds 10M-element object arrays.
    if len(r):
        names, inv = np.unique(np.asarray(r["name"].cat.categories.astype(str), dtype=object), return_inverse=True)
        codes = r["name"].cat.codes.to_numpy()
        name_codes = np.where(codes >= 0, inv.reshape(-1)[codes], -1).astype(np.int32)
        paths, path_codes = _sorted_distinct(r["path"])
        root = _roots(r["parent"].to_numpy())
    else:
        name_codes = path_codes = root = np.zeros(0, dtype=np.int32)
        names = paths = np.zeros(0, dtype=object)
    layers = np.full(len(k), -1, dtype=np.int64)
    if len(within):
        layers[has] = range_layers(r, layer_regex)[within]
    status = (~has).astype(np.int8)
    status[nolaunch] = 2
    out = k.copy(deep=False)  # range_id included
    out["duration"] = k["end"].to_numpy() - k["start"].to_numpy()
    out["range"] = _spread(name_codes, names, within, has, nolaunch)
    out["path"] = _spread(path_codes, paths, within, has, nolaunch)
    out["step"] = _spread(name_codes[root], names, within, has, nolaunch)
    out["layer"] = layers
    out["status"] = pd.Categorical.from_codes(status, categories=["range", "no_range", "no_launch"])
    trace.memo[key] = out
    trace.views["projected"] = out
    return out


def _sorted_distinct(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The distinct strings of ``values``, sorted, and each row's index into them. Arrow
    sorts them: a range per decode-step layer op makes millions of distinct paths, which
    numpy sorts as Python objects in seconds. (UTF-8 byte order is code point order, the
    order of Python's string comparison.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    # Sorted, then told apart from their neighbours (a hash of millions of strings costs
    # several times the sort).
    strings = pa.chunked_array([pa.array(values, pa.large_string())]).combine_chunks()
    order = pc.array_sort_indices(strings).to_numpy()
    ordered = strings.take(order)
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        first[1:] = pc.not_equal(ordered.slice(1), ordered.slice(0, len(order) - 1)).to_numpy(zero_copy_only=False)
    codes = np.empty(len(order), dtype=np.int32)
    codes[order] = np.cumsum(first, dtype=np.int32) - 1
    return ordered.filter(first).to_numpy(zero_copy_only=False).astype(object), codes


def _spread(codes_r: np.ndarray, values: np.ndarray, within: np.ndarray, has: np.ndarray, nolaunch: np.ndarray) -> pd.Categorical:
    """Categorical over kernels of a per-range string (``values[codes_r]``, -1 for ""), with
    the unattributed labels; ``within``: the range of each kernel where ``has``. Its
    categories are the values that occur, sorted. ``values`` are distinct and sorted: only
    the three labels are placed among them here, so the cost is per kernel and per label,
    with no sort of strings."""
    labels = ("", NO_RANGE, NO_LAUNCH)
    nv = len(values)
    # Code space: the values, then the labels. int32: each array here has a row per kernel.
    codes = np.full(len(has), nv + 1, dtype=np.int32)
    if len(within):
        c = codes_r[within]
        codes[has] = np.where(c >= 0, c, nv)
    codes[nolaunch] = nv + 2
    used = np.flatnonzero(np.bincount(codes, minlength=nv + len(labels)))
    kept = used[used < nv]
    cats = values[kept]
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
    return pd.Categorical.from_codes(remap[codes], categories=pd.Index(cats, dtype=object))


def _roots(parent: np.ndarray) -> np.ndarray:
    """Outermost ancestor of each range (pointer doubling: O(n log depth), not O(n depth))."""
    root = np.where(parent >= 0, parent, np.arange(len(parent)))
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            return root
        root = nxt


Trace.view_makers["projected"] = project
