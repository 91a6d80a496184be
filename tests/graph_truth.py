"""The expected range path of every CUDA-graph kernel in an Nsight Systems SQLite export, worked
out from the tables directly (sqlite3 and plain Python only, nothing from the workbench package),
so it can check the workbench's own attribution of graph kernels independently.

The rule ("capture-time attribution, re-rooted under the replaying step"), for a graph kernel K
(a CUPTI_ACTIVITY_KIND_KERNEL row with a graphNodeId, from a run with --cuda-graph-trace=node):

* Node: K's graphNodeId is a node of the instantiated (exec) graph. A CUDA_GRAPH_NODE_EVENTS row
  with that graphNodeId and a non-NULL originalGraphNodeId names the node it was made from;
  follow those links until a node with no original is reached. Its creation event C (the row
  for that node with originalGraphNodeId NULL) says on which thread T, at which time c, the
  node was made while a stream was being captured.
* Capture-time chain: b = start of the latest cudaStreamBeginCapture call on T with start <= c.
  The chain is the NVTX push/pop ranges on T with start <= c <= end and start > b, outermost
  first. Ranges opened before the capture began (its context: a "graph_capture" range, an
  enclosing step) are left out: they say where the capture happened, not what the kernel does.
* Launch path: L = the cudaGraphLaunch call with K's correlationId (thread T2, time l = its
  start). The launch path is the NVTX push/pop ranges on T2 with start <= l <= end, outermost
  first.
* K's expected path = launch path + capture-time chain, names joined by "/". A kernel whose node
  has no creation event, or no BeginCapture before it, keeps just its launch path.

Ids are scoped by process (graph node ids and correlation ids are per process): a thread's
process is its globalTid with the low 24 bits (the thread id) cleared, which is the kernel
table's globalPid. NVTX ranges that never ended (end NULL) enclose nothing.
"""

from __future__ import annotations

import sqlite3

PUSH_POP_RANGE_TYPES = (59, 70)  # ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange, NvtxtPushPopRange


def _process_of(global_tid: int) -> int:
    return global_tid & ~0xFFFFFF


def _table_names(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _strings(db: sqlite3.Connection) -> dict[int, str]:
    return {sid: value for sid, value in db.execute("SELECT id, value FROM StringIds")}


def _ranges_by_thread(db: sqlite3.Connection, strings: dict[int, str]) -> dict[int, list[tuple[int, int, str]]]:
    """thread -> [(start, end, name)] of its ended push/pop ranges."""
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    types = ", ".join(str(t) for t in PUSH_POP_RANGE_TYPES)
    rows = db.execute(f"SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS WHERE eventType IN ({types})")
    for start, end, text, text_id, global_tid in rows:
        if end is None:
            continue
        name = text if isinstance(text, str) else strings.get(text_id, "") if text_id is not None else ""
        by_thread.setdefault(global_tid, []).append((start, end, name))
    return by_thread


def _enclosing(ranges: list[tuple[int, int, str]], t: int, opened_after: int | None = None) -> list[str]:
    """Names of the ranges with start <= t <= end (and start > opened_after, if given), outermost
    first: by start, and of two starting together the longer one first."""
    hits = [r for r in ranges if r[0] <= t <= r[1] and (opened_after is None or r[0] > opened_after)]
    hits.sort(key=lambda r: (r[0], -r[1]))
    return [name for _, _, name in hits]


def expected_paths(sqlite_path) -> list[tuple[int, int, str]]:
    """(start, end, expected path) of every graph kernel in the export, in kernel start order."""
    return [(start, end, "/".join(launch + chain)) for start, end, launch, chain in expected_chains(sqlite_path)]


def expected_chains(sqlite_path) -> list[tuple[int, int, list[str], list[str]]]:
    """(start, end, ranges open at the graph launch, ranges opened inside the capture where the
    kernel's node was made) of every graph kernel in the export, in kernel start order."""
    db = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        tables = _table_names(db)
        strings = _strings(db)
        ranges = _ranges_by_thread(db, strings) if "NVTX_EVENTS" in tables else {}

        # Runtime calls: graph launches by (process, correlationId); capture begins by thread.
        launches: dict[tuple[int, int], tuple[int, int]] = {}  # -> (thread, start)
        capture_begins: dict[int, list[int]] = {}  # thread -> starts
        rows = db.execute("SELECT start, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
        for start, global_tid, correlation, name_id in rows:
            name = strings.get(name_id, "")
            if name.startswith("cudaGraphLaunch"):
                launches[(_process_of(global_tid), correlation)] = (global_tid, start)
            elif name.startswith("cudaStreamBeginCapture"):
                capture_begins.setdefault(global_tid, []).append(start)

        # Graph node events: node -> the node it was made from; node -> its creation event.
        original_of: dict[tuple[int, int], int] = {}  # (process, node) -> original node
        created: dict[tuple[int, int], tuple[int, int]] = {}  # (process, node) -> (thread, time)
        if "CUDA_GRAPH_NODE_EVENTS" in tables:
            rows = db.execute("SELECT start, globalTid, graphNodeId, originalGraphNodeId FROM CUDA_GRAPH_NODE_EVENTS")
            for start, global_tid, node, original in rows:
                key = (_process_of(global_tid), node)
                if original is not None:
                    original_of[key] = original
                elif key not in created or start < created[key][1]:
                    created[key] = (global_tid, start)

        result = []
        rows = db.execute("SELECT start, end, globalPid, correlationId, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL"
                          " WHERE graphNodeId IS NOT NULL ORDER BY start, end")
        for start, end, process, correlation, node in rows:
            process = _process_of(process)
            # Launch path.
            launch_path: list[str] = []
            if (process, correlation) in launches:
                launch_thread, launch_time = launches[(process, correlation)]
                launch_path = _enclosing(ranges.get(launch_thread, []), launch_time)
            # Back to the node made at capture time, however many instantiations away.
            seen = {node}
            while (process, node) in original_of:
                node = original_of[(process, node)]
                if node in seen:  # a loop in the links: stop rather than spin
                    break
                seen.add(node)
            capture_chain: list[str] = []
            if (process, node) in created:
                thread, made_at = created[(process, node)]
                begins = [b for b in capture_begins.get(thread, []) if b <= made_at]
                if begins:
                    capture_chain = _enclosing(ranges.get(thread, []), made_at, opened_after=max(begins))
            result.append((start, end, launch_path, capture_chain))
        return result
    finally:
        db.close()
