"""Kernels replayed from CUDA graphs, given the ranges that were open when their nodes were
captured.

A replayed kernel is launched by ``cudaGraphLaunch``, so the launch rule alone puts it in the
range around that call (the step). Where the trace also holds the graph's capture (nsys with
``--cuda-graph-trace=node``: each kernel's graph node, and each node's creation on the
capturing thread, an instantiated node pointing back at the captured one), the kernel's node
is followed back to its creation and the ranges open on that thread then, opened after the
capture began (``cudaStreamBeginCapture``), are its capture-time path. Those ranges are
re-rooted under the launch: one range per (graph launch, capture-time range), named as the
captured one, child of the range around the launch, spanning the launch call. So a replayed
kernel of ``layer_03 > kv_write`` lands in ``step_7 > layer_03 > kv_write`` and per-layer
tables, diffs and steps need nothing graph-specific.

Ranges opened before the capture began (``graph_capture``, the step that captured lazily) are
the capture's context and are left out: they were not replayed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BEGIN_CAPTURE = "cudaStreamBeginCapture"
# Instantiated graphs copy nodes; a copy of a copy is followed this many links at most (a
# damaged table's cycle ends here).
MAX_LINKS = 16


def capture_ranges(kernels: pd.DataFrame, node_of: np.ndarray, ranges: pd.DataFrame, timelines: dict,
                   api: pd.DataFrame, nodes: pd.DataFrame) -> tuple[pd.DataFrame | None, np.ndarray | None, dict]:
    """The ranges with those added for graph kernels replayed under their capture-time
    ranges (None: none added), each kernel's innermost range id in them, and how many graph
    kernels were attributed by capture (``by_capture``).

    ``ranges`` are in ``nesting.nested`` order with its ``timelines``; ``node_of`` is each
    kernel's graph node (-1: none), ``nodes`` the graph node events (node, original, start,
    pid, tid). A kernel keeps its range where the capture was not recorded or held no range of
    its own (renumbered with the rest where ranges were added).
    """
    graph = np.flatnonzero((node_of >= 0) & (kernels["launch_tid"].to_numpy() >= 0))
    counts = {"by_capture": 0}
    if not len(graph) or not len(nodes) or not len(ranges):
        return None, None, counts
    kp = kernels["pid"].to_numpy()[graph]
    made = _creations(kp, node_of[graph], nodes)
    found = made >= 0
    graph, made = graph[found], made[found]
    if not len(graph):
        return None, None, counts
    # The capture-time chain of each distinct creation event, numbered by distinct chain.
    chain_ids: dict[tuple, int] = {}
    uniq, inverse = np.unique(made, return_inverse=True)
    chain_of = np.array([chain_ids.setdefault(c, len(chain_ids))
                         for c in capture_chains(nodes.iloc[uniq], ranges, timelines, api)], dtype=np.int64)[inverse]
    chains = list(chain_ids)
    inner = np.array([len(c) > 0 for c in chains])[chain_of]
    graph, chain_of = graph[inner], chain_of[inner]
    # Only kernels that got capture-time ranges count: a node created with no range open has
    # none to give (compiled code, which opens none).
    counts["by_capture"] = int(len(graph))
    if not len(graph):
        return None, None, counts
    # One replay of the chain per graph launch: the launch is the kernels' (pid, correlation).
    launch, _ = pd.factorize(pd.MultiIndex.from_arrays([kernels["pid"].to_numpy()[graph],
                                                        kernels["correlation"].to_numpy()[graph]]))
    combos, which = np.unique(launch.astype(np.int64) * len(chains) + chain_of, return_inverse=True)
    first = np.zeros(len(combos), dtype=np.int64)
    first[which[::-1]] = graph[::-1]  # a kernel of each (launch, chain): its launch and step
    added, leaf = _replayed(combos // len(chains), combos % len(chains), first, chains, kernels, ranges)
    range_id = kernels["range_id"].to_numpy().copy()
    range_id[graph] = leaf[which]
    return (*merged(ranges, added, range_id), counts)


def merged(ranges: pd.DataFrame, added: pd.DataFrame, range_id: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """``ranges`` and ``added`` as one table in the order every trace's ranges keep (by pid,
    tid, start; the longer first; a parent before its child at the same times), ids and
    parents renumbered, and ``range_id`` with them."""
    both = pd.concat([ranges, added], ignore_index=True)
    col = both.__getitem__
    order = np.lexsort((col("depth").to_numpy(), -col("end").to_numpy(), col("start").to_numpy(),
                        col("tid").to_numpy(), col("pid").to_numpy()))
    new_id = np.empty(len(order), dtype=np.int64)
    new_id[order] = np.arange(len(order))
    both = both.take(order).reset_index(drop=True)
    parent = both["parent"].to_numpy()
    both["id"] = np.arange(len(both), dtype=np.int64)
    both["parent"] = np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1)
    return both, np.where(range_id >= 0, new_id[np.maximum(range_id, 0)], -1)


def _creations(pid: np.ndarray, node: np.ndarray, nodes: pd.DataFrame) -> np.ndarray:
    """Row in ``nodes`` of the creation of each kernel node's captured original (-1: none)."""
    n_pid, n_node = nodes["pid"].to_numpy(), nodes["node"].to_numpy()
    original = nodes["original"].to_numpy()
    copies = original >= 0
    links = pd.Series(original[copies], index=pd.MultiIndex.from_arrays([n_pid[copies], n_node[copies]]))
    links = links[~links.index.duplicated()]
    node = node.copy()
    for _ in range(MAX_LINKS):
        up = links.index.get_indexer(pd.MultiIndex.from_arrays([pid, node]))
        if not (up >= 0).any():
            break
        node[up >= 0] = links.to_numpy()[up[up >= 0]]
    # The earliest event of a node that copies nothing is its creation.
    made = np.flatnonzero(~copies)
    made = made[np.argsort(nodes["start"].to_numpy()[made], kind="stable")]
    index = pd.MultiIndex.from_arrays([n_pid[made], n_node[made]])
    keep = ~index.duplicated()
    at = index[keep].get_indexer(pd.MultiIndex.from_arrays([pid, node]))
    return np.where(at >= 0, made[keep][np.maximum(at, 0)], -1)


def capture_chains(created: pd.DataFrame, ranges: pd.DataFrame, timelines: dict, api: pd.DataFrame) -> list[tuple]:
    """For each creation event, the ids of the ranges open on its thread then and opened
    after the capture began there, outermost first (empty: no capture begin recorded, or no
    range of its own)."""
    begins = api[api["name"] == BEGIN_CAPTURE] if len(api) else api
    begin_at = {key: np.sort(g["start"].to_numpy()) for key, g in begins.groupby(["pid", "tid"], observed=True)}
    parent, start = ranges["parent"].to_numpy(), ranges["start"].to_numpy()
    out = []
    for p, t, c in zip(created["pid"].tolist(), created["tid"].tolist(), created["start"].tolist()):
        b, found = begin_at.get((p, t)), timelines.get((p, t))
        if b is None or found is None or b[0] > c:
            out.append(())
            continue
        began = b[np.searchsorted(b, c, side="right") - 1]
        lo, timeline = found
        r = int(timeline.innermost_at(np.array([c], dtype=np.int64))[0])
        chain = []
        r = r + lo if r >= 0 else -1
        while r >= 0 and start[r] > began:
            chain.append(r)
            r = int(parent[r])
        out.append(tuple(reversed(chain)))
    return out


def _replayed(launch: np.ndarray, chain: np.ndarray, kernel: np.ndarray, chains: list[tuple],
              kernels: pd.DataFrame, ranges: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The ranges replaying each (launch, chain) pair (shared prefixes made once per launch),
    and the id of each pair's innermost one. ``kernel`` is a kernel of each pair."""
    n = len(ranges)
    depth = ranges["depth"].to_numpy()
    step = kernels["range_id"].to_numpy()[kernel]
    tid = kernels["launch_tid"].to_numpy()[kernel]
    pid = kernels["pid"].to_numpy()[kernel]
    t0, t1 = kernels["launch_start"].to_numpy()[kernel], kernels["launch_end"].to_numpy()[kernel]
    made: dict[tuple, int] = {}
    rows: list[tuple] = []  # (captured range, parent id, depth, pair)
    leaf = np.empty(len(launch), dtype=np.int64)
    for i, (g, c) in enumerate(zip(launch.tolist(), chain.tolist())):
        up = int(step[i])
        below = int(depth[up]) + 1 if up >= 0 else 0
        for k, r in enumerate(chains[c]):
            key = (g, chains[c][: k + 1])
            if key not in made:
                made[key] = n + len(rows)
                rows.append((r, up, below + k, i))
            up = made[key]
        leaf[i] = up
    r, up, d, i = (np.array(x, dtype=np.int64) for x in zip(*rows))
    name, domain = ranges["name"], ranges["domain"]
    added = pd.DataFrame({
        "name": pd.Categorical.from_codes(name.cat.codes.to_numpy()[r], dtype=name.dtype),
        "start": t0[i], "end": t1[i], "pid": pid[i], "tid": tid[i],
        "domain": pd.Categorical.from_codes(domain.cat.codes.to_numpy()[r], dtype=domain.dtype),
        "id": np.arange(n, n + len(r), dtype=np.int64), "parent": up, "depth": d,
    })
    return added, leaf


def replayed_ranges(trace) -> np.ndarray:
    """Which of a finished trace's ranges were added here (a graph's capture-time ranges
    re-rooted under a launch): exactly those spanning a graph kernel's launch call on its
    thread, to the nanosecond, as no range a program opens does."""
    r = trace.columns("ranges", ["pid", "tid", "start", "end"])
    k = trace.columns("kernels", ["graph", "pid", "launch_tid", "launch_start", "launch_end"])
    k = k[k["graph"].to_numpy()]
    if not len(r) or not len(k):
        return np.zeros(len(r), dtype=bool)
    keys = ["pid", "tid", "start", "end"]
    launches = pd.MultiIndex.from_frame(k.drop(columns="graph").set_axis(keys, axis=1).drop_duplicates())
    return pd.MultiIndex.from_frame(r[keys]).isin(launches)
