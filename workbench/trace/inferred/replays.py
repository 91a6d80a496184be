"""Decode steps as CUDA-graph replays: a program that captured its decode step replays one
graph per step, so each replay of the commonest graph is a step, exactly; no period needs
guessing from the tokens (inductor's generated kernels differ between layers, and the eager
kernels between replays, a sampler's or an input copy's, vary in number).
"""

from __future__ import annotations

import numpy as np

# The commonest replay must hold this share of the graph-replayed kernels at least: else the
# graphs are pieces of a step (graph breaks), not steps.
HOLDS = 0.5


def replay_steps(first: np.ndarray, graph: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(starts, ends)`` of the steps of one GPU's kernels (in start order): each replay of
    the commonest graph size, from its first kernel to the next replay's first (the eager
    kernels after a replay, a sampler's, are its step's). ``first``: the positions of each
    replay's first kernel; ``graph``: per kernel, replayed or not. None where fewer than two
    replays of one size hold half the replayed kernels."""
    n = len(graph)
    if len(first) < 2:
        return None
    in_graph = np.cumsum(np.r_[0, graph.astype(np.int64)])
    bounds = np.r_[first, n]
    sizes = in_graph[bounds[1:]] - in_graph[bounds[:-1]]
    vals, counts = np.unique(sizes, return_counts=True)
    common = int(vals[np.argmax(counts)])
    keep = np.flatnonzero(sizes == common)
    if len(keep) < 2 or common * len(keep) < HOLDS * graph.sum():
        return None
    starts = first[keep]
    ends = bounds[keep + 1].copy()
    typical = int(np.median(ends[:-1] - starts[:-1]))
    # The last replay's step ends as the others do, its eager tail as long as theirs.
    ends[-1] = min(n, starts[-1] + typical)
    # A stretch after a replay longer than two steps is work of its own, not the replay's
    # tail: a step the program ran eagerly between two replays (torch.compile's CUDA-graph
    # trees run one so when they record anew). The replay's step ends as the others do; the
    # rest is a step of its own, whose layers the search reads by themselves.
    long = ends - starts > 2 * typical
    if long.any():
        cut = starts[long] + typical
        starts, ends = np.r_[starts, cut], np.r_[np.where(long, starts + typical, ends), ends[long]]
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    return starts.astype(np.int64), ends.astype(np.int64)
