"""The time axis of a timeline: the window's own time, or GPU time alone.

In an eager engine's window the host sets the pace: kernels run as they are launched, a
microsecond or two each, with tens of microseconds of idle GPU between them, so at the
window's scale every kernel is a one-pixel sliver. The *GPU view* cuts the idle gaps: the
axis runs over the union of the window's kernels (their busy time), the gaps between busy
stretches shrunk to hairs (all of them together ``GAP`` of the busy time at most), so the
kernels take the width and two windows' GPU work compare by length. A timeline picks it on
its own when the GPU is busy less than ``HOST_DOMINATED`` of the window (:func:`host_dominated`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOST_DOMINATED = 0.25
GAP = 0.05  # the idle gaps of the GPU view together: at most this share of the busy time


@dataclass(frozen=True)
class Clock:
    """Where a time (ns, the trace's clock) lies on the axis (ns from its origin): piecewise
    linear through ``real`` -> ``axis``, clamped at both ends."""

    real: np.ndarray
    axis: np.ndarray
    gpu: bool
    busy: float = 0.0  # the GPU view's busy time (ns): the axis without its gaps

    @property
    def total(self) -> float:
        return float(self.axis[-1]) if len(self.axis) else 0.0

    def x(self, t) -> np.ndarray:
        return np.interp(np.asarray(t, dtype=np.float64), self.real, self.axis)


def busy_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals ``[start, end)`` as sorted, disjoint ``(starts, ends)``."""
    if not len(start):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(start, kind="stable")
    s, e = np.asarray(start)[order], np.asarray(end)[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]  # an interval that starts after everything before has ended
    first = np.flatnonzero(new)
    return s[first], np.r_[reach[first[1:] - 1], reach[-1]]


def window_clock(t0: int, t1: int) -> Clock:
    return Clock(np.array([t0, max(t1, t0 + 1)], dtype=np.float64), np.array([0.0, float(max(t1 - t0, 1))]), False)


def gpu_clock(start: np.ndarray, end: np.ndarray) -> Clock:
    """GPU busy time from the first kernel, idle gaps cut (see the module docstring)."""
    s, e = busy_intervals(start, end)
    lengths = (e - s).astype(np.float64)
    busy = float(lengths.sum())
    gap = GAP * max(busy, 1.0) / max(len(s) - 1, 1)
    real = np.column_stack([s, e]).ravel().astype(np.float64)
    # Axis length before each point: busy stretches at full length, each gap at most ``gap``.
    steps = np.column_stack([np.r_[0.0, np.minimum(s[1:] - e[:-1], gap)], lengths]).ravel()
    return Clock(real, np.cumsum(steps), True, busy)


def host_dominated(start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> bool:
    """Whether the kernels ``[start, end)`` keep the GPU busy less than ``HOST_DOMINATED`` of the
    window ``[t0, t1]``."""
    if not len(start) or t1 <= t0:
        return False
    s, e = busy_intervals(start, end)
    return float((e - s).sum()) < HOST_DOMINATED * (t1 - t0)
