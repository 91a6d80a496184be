"""Graph nodes for a trace that records no node per kernel (torch.profiler): a replayed
kernel matched, by position, to the kernel launch its graph recorded at capture.

Kineto ties a replayed kernel only to its ``cudaGraphLaunch`` (by correlation id), but where
the graph was captured inside the recording it holds every API call made during the capture:
``cudaStreamBeginCapture`` ... ``cudaStreamEndCapture`` on the capturing thread, and between
them one kernel launch call (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cuLaunchKernel``,
...) per kernel node, in the order the nodes were made, inside the ranges open then. A graph
captured on one stream (``torch.cuda.graph``, CUDA-graph trees) replays its kernels in that
order, so the i-th kernel of a replay is the i-th launch of its capture.

Which capture a replay runs is not recorded. A replay is given the capture with as many
kernel launches as it has kernels, among those finished before it was launched; where several
qualify and their launches sit in differently named ranges, the replay is *ambiguous* and its
kernels stay under their launch (counted). Launch calls during a capture that ran at once (a
kernel bears their correlation id: a stream not being captured) are not nodes.

The result has the form of nsys's graph-node tables (each kernel's node, each node's creation
event), so ``graph_ranges.capture_ranges`` re-roots the capture-time ranges the same way for
both.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .graph_ranges import BEGIN_CAPTURE, capture_chains

END_CAPTURE = "cudaStreamEndCapture"
# Runtime and driver calls that make one kernel node each when called on a capturing stream
# (with their per-thread-stream and versioned spellings).
_KERNEL_LAUNCH = re.compile(r"^cu(?:da)?Launch(?:Cooperative)?Kernel(?:Ex|ExC)?(?:_ptsz|_v\d+)*$")


def captured_nodes(kernels: pd.DataFrame, graph: np.ndarray, ranges: pd.DataFrame, timelines: dict,
                   api: pd.DataFrame, launched: np.ndarray) -> tuple[np.ndarray, pd.DataFrame, int] | None:
    """Each kernel's node (-1: none) and the node events, as nsys gives them, from the
    launches recorded during graph captures; and how many graph kernels were left out as
    ambiguous. None where the trace holds no capture.

    ``graph`` marks the kernels a graph launched; ``launched`` holds the API rows some kernel
    was joined to (those calls ran at once, so they made no node).
    """
    if not graph.any() or not len(api):
        return None
    captures = _captures(api, launched)
    if not captures:
        return None
    # The names of the ranges each capture's launches sit in: replays of captures alike in
    # size are told apart by them, or not at all.
    created = api.iloc[np.concatenate([c[2] for c in captures])]
    chains = capture_chains(created, ranges, timelines, api)
    names = ranges["name"].astype(str).to_numpy()
    signatures, at = [], 0
    for _, _, rows in captures:
        signatures.append(tuple(tuple(names[list(ch)]) for ch in chains[at: at + len(rows)]))
        at += len(rows)
    node_of = np.full(len(kernels), -1, dtype=np.int64)
    ambiguous = 0
    g = np.flatnonzero(graph)
    # One replay per (pid, correlation): its kernels in the order they ran.
    col = kernels.__getitem__
    order = g[np.lexsort((col("start").to_numpy()[g], col("correlation").to_numpy()[g], col("pid").to_numpy()[g]))]
    keys = pd.MultiIndex.from_arrays([col("pid").to_numpy()[order], col("correlation").to_numpy()[order]])
    replay, _ = pd.factorize(keys)
    bounds = np.flatnonzero(np.diff(replay, prepend=-1, append=replay.max() + 1 if len(replay) else 0))
    launch_at = col("launch_start").to_numpy()
    pid = col("pid").to_numpy()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        members = order[lo:hi]
        first = members[0]
        fits = [i for i, (p, end, rows) in enumerate(captures)
                if p == pid[first] and len(rows) == len(members) and end <= launch_at[first]]
        if not fits:
            continue
        if len({signatures[i] for i in fits}) > 1:
            ambiguous += len(members)
            continue
        node_of[members] = captures[fits[-1]][2]  # the latest such capture: the graph in use
    rows = np.concatenate([c[2] for c in captures])
    nodes = pd.DataFrame({"node": rows, "original": np.full(len(rows), -1, dtype=np.int64),
                          "start": api["start"].to_numpy()[rows], "pid": api["pid"].to_numpy()[rows],
                          "tid": api["tid"].to_numpy()[rows]})
    return node_of, nodes, ambiguous


def _captures(api: pd.DataFrame, launched: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """Each recorded capture as (pid, its end, its kernel-node launch rows in order): a
    ``cudaStreamBeginCapture`` paired with the next ``cudaStreamEndCapture`` on its thread."""
    name = api["name"]
    cats = name.cat.categories.astype(str)
    code = name.cat.codes.to_numpy()
    is_launch = np.array([bool(_KERNEL_LAUNCH.match(c)) for c in cats] + [False])[code]
    begin = _code_of(cats, BEGIN_CAPTURE)
    end = _code_of(cats, END_CAPTURE)
    if begin is None or end is None:
        return []
    is_launch[launched[launched >= 0]] = False
    out = []
    pid, tid, start = api["pid"].to_numpy(), api["tid"].to_numpy(), api["start"].to_numpy()
    stop = api["end"].to_numpy()
    marks = np.flatnonzero((code == begin) | (code == end) | is_launch)
    frame = pd.DataFrame({"row": marks, "pid": pid[marks], "tid": tid[marks], "start": start[marks]})
    for (p, _), calls in frame.sort_values(["pid", "tid", "start"], kind="stable").groupby(["pid", "tid"], sort=False):
        open_at, inside = None, []
        for row in calls["row"].tolist():
            if code[row] == begin:
                open_at, inside = row, []
            elif code[row] == end:
                if open_at is not None and inside:
                    out.append((int(p), int(stop[row]), np.array(inside, dtype=np.int64)))
                open_at = None
            elif open_at is not None:
                inside.append(row)
    return out


def _code_of(categories: pd.Index, value: str) -> int | None:
    at = categories.get_indexer([value])[0]
    return int(at) if at >= 0 else None
