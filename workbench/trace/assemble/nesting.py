"""Range nesting on one thread: parents, depths, and "which range is innermost at time t".

Ranges are half-open intervals [start, end). Two ranges that touch ([a, b) and [b, c)) are
siblings. When ranges cross (one starts inside another and ends after it), the innermost
range at a time is the most recently started range still open: the same answer a stack of
push/pop calls gives, and the documented tolerant result for malformed traces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..arrays import climb
from ..schema import set_column


@dataclass
class Timeline:
    """The innermost open range after each boundary event of one thread."""

    times: np.ndarray  # int64, sorted boundary times (ends before starts at equal times)
    state: np.ndarray  # int64, local range index open after that boundary, -1 for none

    def innermost_at(self, t: np.ndarray) -> np.ndarray:
        """Local index of the innermost range open at each time in ``t`` (-1: none)."""
        if not len(self.times):
            return np.full(len(t), -1, dtype=np.int64)
        # The last boundary at or before each time; -1 before the first.
        idx = np.searchsorted(self.times, t, side="right")
        idx -= 1
        out = self.state[idx]  # an idx of -1 reads the last state: replaced
        out[idx < 0] = -1
        return out


def thread_blocks(pid: np.ndarray, tid: np.ndarray):
    """(lo, hi) of each run of equal (pid, tid) in rows sorted by thread."""
    bounds = np.flatnonzero((np.diff(pid) != 0) | (np.diff(tid) != 0)) + 1
    return zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(pid)].tolist())


def _events(start: np.ndarray, end: np.ndarray, live: np.ndarray):
    """Boundary events of the ranges in ``live`` (non-empty ranges), in processing order.

    At equal times: ends first (half-open), then starts. Among starts the longer (outer)
    range first, then the lower index; among ends the later-started (inner) range first, then
    the higher index. Starts and ends are sorted apart and merged, a fraction of the work of
    sorting all events by four keys; the starts are not sorted at all when they come in that
    order already (as :func:`nested` gives them).
    """
    ids = np.flatnonzero(live)
    s, e = start[ids], end[ids]
    in_order = np.all((s[1:] > s[:-1]) | ((s[1:] == s[:-1]) & (e[1:] <= e[:-1])))
    starts = ids if in_order else ids[np.lexsort((-e, s))]  # a stable sort: lower index first
    # The starts backwards are by later start, then shorter, then higher index: a stable sort
    # by end keeps that order among equal ends.
    back = starts[::-1]
    ends = back[np.argsort(end[back], kind="stable")]
    # Merged by a stable sort of the two sorted runs, which is one merge: ends first at equal times.
    times = np.concatenate([end[ends], start[starts]])
    order = np.argsort(times, kind="stable")
    return times[order], order >= len(ends), np.concatenate([ends, starts])[order]


def _walk(times, is_start, rid, n):
    """Plain stack walk: handles crossing ranges and any depth, in O(n).

    A crossing range that ends below the top of the stack is only marked closed; closed
    entries are dropped when they reach the top (removing them in place would make 10,000
    mutually crossing ranges cost O(n^2)).
    """
    parent = np.full(n, -1, dtype=np.int64)
    state = np.empty(len(times), dtype=np.int64)
    stack: list[int] = []
    closed: set[int] = set()
    for k, (s, r) in enumerate(zip(is_start.tolist(), rid.tolist())):
        if s:
            parent[r] = stack[-1] if stack else -1
            stack.append(r)
        else:
            if stack and stack[-1] == r:
                stack.pop()
                while stack and stack[-1] in closed:
                    closed.discard(stack.pop())
            else:  # crossing range: close it where it sits
                closed.add(r)
        state[k] = stack[-1] if stack else -1
    return parent, state


def _vector(times, is_start, rid, n):
    """``_walk``'s parents and states for properly nested ranges, in O(n log n) at any depth;
    None if the events cannot nest at all. The caller checks the nesting with the parents,
    which hold for any ranges: a range's parent is the range started last before it one
    level up (a start's level: the ranges open after it), found by a binary search over the
    starts sorted by (level, event). Properly nested, the range open after an end is the
    ended range's parent.
    """
    level = np.cumsum(np.where(is_start, 1, -1))
    if level.min(initial=0) < 0:
        return None
    m = len(times)
    starts = np.flatnonzero(is_start)
    # Keys level * m + event, sorted: a start's parent is the start keyed last below its key
    # less m (searched in order, so the search runs through memory once). In place: each
    # array here is a range's worth.
    keys = level[starts]
    keys *= m
    keys += starts
    keys.sort()
    last = np.searchsorted(keys, keys - m)
    last -= 1
    above = keys[last] % m  # for level 1: any, dropped
    parent = np.full(n, -1, dtype=np.int64)
    parent[rid[keys % m]] = np.where(keys >= 2 * m, rid[above], -1)
    return parent, np.where(is_start, rid, parent[rid])


def nest(start: np.ndarray, end: np.ndarray):
    """Parent (local index, -1 for none) and depth of each range, plus the thread's timeline.

    ``start``/``end`` are int64 arrays of one thread's ranges, any order.
    """
    start = np.ascontiguousarray(start, dtype=np.int64)
    end = np.ascontiguousarray(end, dtype=np.int64)
    live = end > start
    parent, depth, times, state = _nest_any(start, end, live)
    timeline = Timeline(times, state)
    # Empty ranges contain nothing and parent nothing; they sit inside whatever is open then
    # (a range that is not empty), one level below it.
    empty = np.flatnonzero(~live)
    if len(empty):
        up = timeline.innermost_at(start[empty])
        parent[empty] = up
        depth[empty] = np.where(up >= 0, depth[np.maximum(up, 0)] + 1, 0)
    return parent, depth, timeline


def _nest_any(start: np.ndarray, end: np.ndarray, live: np.ndarray):
    """(parent, depth, times, state) of ranges in any order, crossing or not; empty ranges
    get no parent and depth 0 here."""
    n = len(start)
    times, is_start, rid = _events(start, end, live)
    result = _vector(times, is_start, rid, n)
    if result is not None:
        parent, state = result
        # Proper nesting means every child ends no later than its parent; else fall back.
        has_parent = parent >= 0
        if np.any(end[has_parent] > end[parent[has_parent]]):
            result = None
    if result is None:
        parent, state = _walk(times, is_start, rid, n)
    return parent, climb(parent)[1], times, state


def _is_sorted(keys: list[np.ndarray], ascending: list[bool]) -> bool:
    """Whether the rows are in the order a stable sort by ``keys`` would give them."""
    tied = None
    for k, up in zip(keys, ascending):
        a, b = k[:-1], k[1:]
        wrong = b < a if up else b > a
        if (wrong if tied is None else wrong & tied).any():
            return False
        tied = b == a if tied is None else tied & (b == a)
        if not tied.any():
            return True
    return True


def nest_threads(ranges: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, dict]:
    """Parent (range id) and depth of each range, and each thread's first range and timeline
    keyed by (pid, tid), for ranges sorted by (pid, tid, start)."""
    n = len(ranges)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    pid, tid = ranges["pid"].to_numpy(), ranges["tid"].to_numpy()
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    timelines = {}
    for lo, hi in thread_blocks(pid, tid):
        p, d, timeline = nest(start[lo:hi], end[lo:hi])
        parent[lo:hi] = np.where(p >= 0, p + lo, -1)
        depth[lo:hi] = d
        timelines[(int(pid[lo]), int(tid[lo]))] = (int(lo), timeline)
    return parent, depth, timelines


def nested(ranges: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, dict]:
    """Ranges sorted by (pid, tid, start) with their id, parent and depth per thread (the
    path is left to :func:`paths.range_paths`), those two arrays, and each thread's first range and
    timeline keyed by (pid, tid)."""
    if not len(ranges):
        return ranges, np.zeros(0, np.int64), np.zeros(0, np.int64), {}
    keys, ascending = ["pid", "tid", "start", "end"], [True, True, True, False]
    if not _is_sorted([ranges[k].to_numpy() for k in keys], ascending):  # often they are
        ranges = ranges.sort_values(keys, ascending=ascending, kind="stable").reset_index(drop=True)
    parent, depth, timelines = nest_threads(ranges)
    set_column(ranges, "id", np.arange(len(ranges), dtype=np.int64))
    set_column(ranges, "parent", parent)
    set_column(ranges, "depth", depth)
    return ranges, parent, depth, timelines
