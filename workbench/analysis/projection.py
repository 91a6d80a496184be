"""Projection: each kernel belongs to the innermost range that encloses its launching API
call on the launching thread.

The result keeps every kernel. ``status`` says how it was attributed:
``range`` (inside a range), ``no_range`` (launched outside any range), ``no_launch`` (no
launch record, e.g. the API call fell outside the capture). ``graph`` marks kernels launched
from a CUDA graph; they are attributed through their ``cudaGraphLaunch`` call.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.model import Trace, layer_pattern
from ..trace.names import category_values
from ..trace.nesting import nest

NO_RANGE = "(no range)"
NO_LAUNCH = "(no launch record)"


def _innermost(trace: Trace) -> np.ndarray:
    """Range id of the innermost range around each kernel's launch (-1: none)."""
    k, r = trace.kernels, trace.ranges
    out = np.full(len(k), -1, dtype=np.int64)
    if not len(r) or not len(k):
        return out
    kp, kt, ks = k["pid"].to_numpy(), k["launch_tid"].to_numpy(), k["launch_start"].to_numpy()
    rp, rt = r["pid"].to_numpy(), r["tid"].to_numpy()
    rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
    # Ranges are stored sorted by (pid, tid, start): each thread is one contiguous block.
    bounds = np.flatnonzero((np.diff(rp) != 0) | (np.diff(rt) != 0)) + 1
    blocks = {(int(rp[lo]), int(rt[lo])): (lo, hi) for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(r)])}
    launched = kt >= 0
    keys = pd.DataFrame({"p": kp[launched], "t": kt[launched]})
    idx = np.flatnonzero(launched)
    for (p, t), grp in keys.groupby(["p", "t"], sort=False).indices.items():
        block = blocks.get((int(p), int(t)))
        if block is None:
            continue
        lo, hi = block
        _, _, timeline = nest(rs[lo:hi], re_[lo:hi])
        rows = idx[grp]
        local = timeline.innermost_at(ks[rows])
        out[rows] = np.where(local >= 0, local + lo, -1)
    return out


def range_layers(ranges: pd.DataFrame, pattern: str | None = None) -> np.ndarray:
    """Layer index of each range: its own name's match, else the nearest enclosing match (-1)."""
    n = len(ranges)
    layer = np.full(n, -1, dtype=np.int64)
    if not n:
        return layer
    rx = layer_pattern(pattern)
    cats = ranges["name"].cat.categories
    by_cat = np.array([int(m.group(1)) if (m := rx.search(str(c))) else -1 for c in cats], dtype=np.int64)
    codes = ranges["name"].cat.codes.to_numpy()
    own = np.where(codes >= 0, by_cat[np.maximum(codes, 0)], -1)
    parent = ranges["parent"].to_numpy()
    depth = ranges["depth"].to_numpy()
    order = np.argsort(depth, kind="stable")
    cuts = np.flatnonzero(np.diff(depth[order])) + 1
    for level in np.split(order, cuts):
        inherited = np.where(parent[level] >= 0, layer[np.maximum(parent[level], 0)], -1)
        layer[level] = np.where(own[level] >= 0, own[level], inherited)
    return layer


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
    rid = _innermost(trace)
    has = rid >= 0
    nolaunch = k["launch_tid"].to_numpy() < 0
    layers = np.full(len(k), -1, dtype=np.int64)
    # Strings are looked up per range and only their codes spread over the kernels: a
    # 10M-kernel trace never builds 10M-element object arrays.
    rn = category_values(r["name"]) if len(r) else np.zeros(0, dtype=object)
    rpath = r["path"].astype(str).to_numpy(dtype=object) if len(r) else rn
    root = _roots(r["parent"].to_numpy()) if len(r) else np.zeros(0, dtype=np.int64)
    if has.any():
        layers[has] = range_layers(r, layer_regex)[rid[has]]
    status = np.where(has, 0, 1).astype(np.int8)
    status[nolaunch] = 2
    out = k.copy()
    out["duration"] = k["end"].to_numpy() - k["start"].to_numpy()
    out["range_id"] = rid
    out["range"] = _spread(rn, rid, has, nolaunch)
    out["path"] = _spread(rpath, rid, has, nolaunch)
    out["step"] = _spread(rn[root] if len(r) else rn, rid, has, nolaunch)
    out["layer"] = layers
    out["status"] = pd.Categorical.from_codes(status, categories=["range", "no_range", "no_launch"])
    trace.memo[key] = out
    trace.views["projected"] = out
    return out


def _spread(per_range: np.ndarray, rid: np.ndarray, has: np.ndarray, nolaunch: np.ndarray) -> pd.Categorical:
    """Categorical over kernels of a per-range string, with the unattributed labels; its
    categories are the values that occur, sorted."""
    codes_r, uniq = pd.factorize(per_range, sort=False)
    cats = sorted(set(uniq.tolist()) | {NO_RANGE, NO_LAUNCH})
    pos = {c: i for i, c in enumerate(cats)}
    remap = np.array([pos[c] for c in uniq.tolist()], dtype=np.int64)
    codes = np.full(len(rid), pos[NO_RANGE], dtype=np.int64)
    if has.any():
        codes[has] = remap[codes_r[rid[has]]]
    codes[nolaunch] = pos[NO_LAUNCH]
    cat = pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object))
    return cat.remove_unused_categories()


def _roots(parent: np.ndarray) -> np.ndarray:
    """Outermost ancestor of each range (pointer doubling: O(n log depth), not O(n depth))."""
    root = np.where(parent >= 0, parent, np.arange(len(parent)))
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            return root
        root = nxt
