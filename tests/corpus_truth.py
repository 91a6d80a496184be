"""Per-range kernel counts of a real trace, worked out from the file directly (json, sqlite3
and plain Python only, nothing from the workbench package), so that the corpus test can check
the workbench's import and attribution independently.

The rule, for each kernel K:

* Launch: the API call with K's correlation id. Kineto: the ``cuda_runtime``/``cuda_driver``
  event (``Runtime`` in 2021-era files) whose ``args.correlation`` equals K's; nsys: the
  CUPTI_ACTIVITY_KIND_RUNTIME row with K's correlationId in K's process (correlation ids
  repeat across processes), or in the whole export where kernels carry no globalPid. Where
  an id is given to several calls, the first in the file wins. No such call: K has no launch
  record.
* Ranges: Kineto ``user_annotation`` events (complete ``X`` events, and ``B``/``E`` pairs on
  one thread), and in 2021-era files, which wrote record_function scopes as ``Operator``
  events like any op, the ``ProfilerStep#N`` ones; nsys NVTX push/pop and start/end ranges
  (event types 59, 70, 60, 71), each on the thread that opened it, named by its text or its
  registered string.
* K's path: the ranges on the launching thread with start <= launch time < end, outermost
  first (by start; of two starting together, the longer first), names joined by "/". None of
  them: K was launched outside every range.

A Kineto trace without kernels, copies or sets (a CPU-only capture, or one whose GPU work is
recorded only as other activity) is counted, as the workbench counts it, in its top-level CPU
ops: ``cpu_op`` (``Operator``) events inside no other on their thread, each launched by
itself at its start.

Times are compared exactly: Kineto's microseconds are read as decimals and turned into
integer nanoseconds.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from decimal import Decimal

NO_RANGE = "(no range)"
NO_LAUNCH = "(no launch record)"

# Kineto categories, lower-cased: 2021-era files write Kernel, Runtime, Operator.
KINETO_KERNEL = {"kernel"}
KINETO_LAUNCH = {"cuda_runtime", "cuda_driver", "runtime"}
KINETO_GPU = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}
KINETO_CPU_OP = {"cpu_op", "operator"}
PUSH_POP_START_END = (59, 70, 60, 71)


def _ns(us) -> int:
    return int(Decimal(us) * 1000)


def _thread(pid, tid) -> tuple[str, str]:
    # The same thread is written as 25738 in one event and "25738" in another.
    return str(pid).strip(), str(tid).strip()


def _open(path) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _open_at(ranges: list[tuple[int, int, str]], times: list[int]) -> list[tuple[int, ...]]:
    """For each time, the ranges (indices) holding it (start <= t < end), outermost first.

    A sweep over the thread's time line: at one instant ranges end first, then begin, then
    the times are looked at, so a range holds its start and not its end. Of ranges beginning
    together the longer begins first (it is the outer one), and of two alike the first given."""
    points = []
    for i, (start, end, _) in enumerate(ranges):
        if end > start:  # an empty range holds nothing
            points.append((start, 1, -end, i))
            points.append((end, 0, 0, i))
    points += [(t, 2, 0, j) for j, t in enumerate(times)]
    points.sort()
    open_ranges: list[int] = []  # in the order they began
    out: list[tuple[int, ...]] = [()] * len(times)
    for _, what, _, i in points:
        if what == 1:
            open_ranges.append(i)
        elif what == 0:
            open_ranges.remove(i)
        else:
            out[i] = tuple(open_ranges)
    return out


def _counts(launched: list[tuple[object, int] | None], ranges: dict) -> Counter:
    """Kernels per path, from each kernel's launch (thread, time) or None."""
    counts = Counter()
    by_thread: dict[object, list[tuple[int, int]]] = {}
    for k, launch in enumerate(launched):
        if launch is None:
            counts[NO_LAUNCH] += 1
        else:
            by_thread.setdefault(launch[0], []).append((k, launch[1]))
    for thread, items in by_thread.items():
        mine = ranges.get(thread, [])
        for held in _open_at(mine, [t for _, t in items]):
            counts["/".join(mine[r][2] for r in held) if held else NO_RANGE] += 1
    return counts


def _top_level(ops: dict[object, list[tuple[int, int, str]]]) -> list[tuple[object, int]]:
    """(thread, start) of each CPU op inside no other on its thread: an op that takes time is
    the outermost of those open at its start; one that takes none has none open then."""
    out = []
    for thread, mine in ops.items():
        for i, held in enumerate(_open_at(mine, [start for start, _, _ in mine])):
            start, end, _ = mine[i]
            if (held[:1] == (i,)) if end > start else not held:
                out.append((thread, start))
    return out


def kineto_counts(path) -> Counter:
    """Kernels per range path (and NO_RANGE, NO_LAUNCH) of a torch.profiler trace."""
    doc = json.loads(_open(path), parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    launches: dict[int, tuple[object, int]] = {}
    ranges: dict[object, list[tuple[int, int, str]]] = {}
    ops: dict[object, list[tuple[int, int, str]]] = {}
    open_b: dict[object, list[tuple[str, int]]] = {}
    kernels = []
    gpu = False
    for e in events:
        cat, ph = str(e.get("cat", "")).lower(), e.get("ph")
        gpu = gpu or ph == "X" and cat in KINETO_GPU
        if ph == "X" and cat in KINETO_KERNEL:
            kernels.append(e)
        elif ph == "X" and cat in KINETO_LAUNCH:
            launches.setdefault(e["args"]["correlation"], (_thread(e["pid"], e["tid"]), _ns(e["ts"])))
        elif (ph == "X" and cat == "user_annotation"
              or ph == "X" and cat == "operator" and e["name"].startswith("ProfilerStep#")):
            start = _ns(e["ts"])
            ranges.setdefault(_thread(e["pid"], e["tid"]), []).append((start, start + _ns(e["dur"]), e["name"]))
        elif ph == "X" and cat in KINETO_CPU_OP:
            start = _ns(e["ts"])
            ops.setdefault(_thread(e["pid"], e["tid"]), []).append((start, start + _ns(e["dur"]), e["name"]))
        elif ph in ("B", "E") and cat == "user_annotation":
            thread, t = _thread(e["pid"], e["tid"]), _ns(e["ts"])
            if ph == "B":
                open_b.setdefault(thread, []).append((e["name"], t))
            else:
                name, start = open_b[thread].pop()
                ranges.setdefault(thread, []).append((start, t, name))
    if not gpu:
        return _counts(_top_level(ops), ranges)
    launched = [launches.get((k.get("args") or {}).get("correlation")) for k in kernels]
    return _counts(launched, ranges)


def _sqlite_file(path):
    """A path sqlite3 can open, and whether it is a temporary copy (a gzipped export)."""
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return str(path), False
    fd, tmp = tempfile.mkstemp(suffix=".sqlite")
    with os.fdopen(fd, "wb") as out, gzip.open(path) as src:
        shutil.copyfileobj(src, out)
    return tmp, True


def _process(global_id: int) -> int:
    return (global_id >> 24) & 0xFFFFFFFF


def nsys_counts(path) -> Counter:
    """Kernels per NVTX range path (and NO_RANGE, NO_LAUNCH) of an Nsight Systems SQLite export."""
    db_path, temporary = _sqlite_file(path)
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            return _nsys_counts(db)
        finally:
            db.close()
    finally:
        if temporary:
            os.unlink(db_path)


def _columns(db, table: str) -> set[str]:
    return {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')}


def _nsys_counts(db) -> Counter:
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    strings = dict(db.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}
    kernel_table, runtime_table = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
    # Without globalPid the export is one process: correlation ids are then the whole file's.
    per_process = "globalPid" in _columns(db, kernel_table)
    launches: dict[tuple, tuple[int, int]] = {}
    if runtime_table in tables:
        for start, gtid, correlation in db.execute(f"SELECT start, globalTid, correlationId FROM {runtime_table} ORDER BY rowid"):
            key = (_process(gtid), correlation) if per_process else (correlation,)
            launches.setdefault(key, (gtid, start))
    ranges: dict[int, list[tuple[int, int, str]]] = {}
    if "NVTX_EVENTS" in tables:
        have = _columns(db, "NVTX_EVENTS")
        text = "text" if "text" in have else "NULL"
        text_id = "textId" if "textId" in have else "NULL"
        types = ", ".join(map(str, PUSH_POP_START_END))
        for start, end, name, name_id, gtid in db.execute(
                f"SELECT start, end, {text}, {text_id}, globalTid FROM NVTX_EVENTS WHERE eventType IN ({types})"):
            if name is None:
                name = strings.get(name_id, "") if name_id is not None else ""
            ranges.setdefault(gtid, []).append((start, end, name if isinstance(name, str) else ""))
    pid = "globalPid" if per_process else "0"
    launched = []
    for process, correlation in db.execute(f"SELECT {pid}, correlationId FROM {kernel_table} ORDER BY rowid"):
        launched.append(launches.get((_process(process), correlation) if per_process else (correlation,)))
    return _counts(launched, ranges)
