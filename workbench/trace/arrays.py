"""Array helpers over a trace's tables that the trace layer and the analysis both use: exact
per-group sums, the climb of a forest given as a parent array, and steps that queued behind
the one before."""

from __future__ import annotations

import numpy as np


def group_sums(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sum of ``values`` per key in 0..n-1."""
    # float64 holds every partial sum exactly below 2**53 ns (104 days of GPU time); the
    # bound from the extremes needs no row-sized temporary (|values| would).
    if not len(values) or max(-int(values.min()), int(values.max())) * len(values) < 2**53:
        return np.rint(np.bincount(keys, weights=values, minlength=n)).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, keys, values)
    return out


def climb(parent: np.ndarray, stop: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each node of a forest given as a parent array (-1 for roots): the nearest node at
    or above it where ``stop`` holds (the roots, when ``stop`` is None; -1 where no such node
    is above it), and the number of edges up to that node (a root's depth, with ``stop``
    None).

    Pointer doubling: O(n log d) for depth d (plain climbing is O(n d), minutes for a
    100,000-deep chain). ``dist[i]`` counts the edges from ``i`` up to ``up[i]``.
    """
    stop = parent < 0 if stop is None else stop
    up = np.where(stop, np.arange(len(parent)), parent).astype(np.int64, copy=False)
    dist = (~stop).astype(np.int64)
    active = np.flatnonzero(~stop & (up >= 0))
    active = active[~stop[up[active]]]
    while len(active):
        nxt = up[active]
        dist[active] += dist[nxt]
        up[active] = up[nxt]
        active = active[up[active] >= 0]
        active = active[~stop[up[active]]]
    return up, dist


def queued_starts(start: np.ndarray, end: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
    """Each interval's start, or the latest end of the intervals that start before it in its
    ``group`` (one sequence when None), where that is later: a step launched while the one
    before still ran starts, on the device, when that one ends. Groups are few (GPUs)."""
    key = np.zeros(len(start), np.int64) if group is None else np.asarray(group)
    out = start.copy()
    for g in np.unique(key):
        o = np.flatnonzero(key == g)
        o = o[np.argsort(start[o], kind="stable")]
        before = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(end[o])[:-1]]
        out[o] = np.maximum(start[o], before)
    return out
