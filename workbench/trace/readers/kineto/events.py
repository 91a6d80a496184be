"""Decoded events (JSON objects) routed to tables and turned into one piece's rows.

A part, what each piece of a file comes to whoever read it (here, or the C scanner in the
same form), is ``(rows, begin_end, strings, counts)``: ``{table: {column: array}}`` with
names as codes into that piece's ``strings[table]``, the piece's B/E range events as
``(ph, name, pid, tid, ts)`` (they pair across pieces), and its counts of events.
"""

from __future__ import annotations

import numpy as np

from ....errors import TraceFormatError
from . import columns as col
from .columns import Interner
from .modules import PREFIX

# Events turned into rows at a time: an event's fields are read while it is still in the CPU
# cache, instead of column by column over the whole piece.
SLICE = 2048

# The tables whose names are interned, and that column of each.
NAMED = {"kernels": "name", "api": "name", "ranges": "name", "cpu_ops": "name", "modules": "name", "memcpy": "kind"}
# The tables of GPU events: with any of them, cpu_ops are not kept (see tables.Tables.add).
GPU = {"kernels", "memcpy", "memset"}
# Activity Kineto records on the device (or of its tracer) that makes no rows here: counted by
# kind, so that a trace holding only these is not taken for a CPU-only one without a word.
# The C scanner's OTHER_GPU lists the same kinds in the same order.
OTHER_GPU = ("gpu_user_annotation", "cuda_sync", "cuda_event", "cuda_profiler_range", "overhead",
             "hardware_counters", "mtia_ccp_events", "mtia_counters", "xpu_sync", "xpu_scope_profiler")
# 2021-era PyTorch wrote record_function scopes as Operator events like any op; only the
# profiler's steps can be told apart (by name, as Kineto's TensorBoard plugin told them).
STEP_PREFIX = "ProfilerStep#"


def holds_gpu(rows: dict) -> bool:
    """Whether a piece's rows hold GPU events."""
    return not rows.keys().isdisjoint(GPU)


def part(events, where) -> tuple:
    """The part of a piece's decoded events (see the module's docstring). The first problem
    reported is the first over the whole piece, as if it were not read in slices."""
    if not isinstance(events, list):
        raise TraceFormatError(where, "traceEvents is not an array")
    for e in events:
        if type(e) is not dict:
            raise TraceFormatError(where, f"an element of traceEvents is not an object: {str(e)[:60]!r}")
    names = {t: Interner() for t in NAMED}
    counts = {"events": len(events), **dict.fromkeys(OTHER_GPU, 0)}
    try:
        slices = [_rows(events[i : i + SLICE], names, counts, where) for i in range(0, len(events), SLICE)]
    except TraceFormatError:
        # The checks over the whole piece, in their order, decide which problem is first.
        _rows(events, names, counts, where)
        raise
    tables: dict[str, list] = {}
    for rows, _ in slices:
        for table, cols in rows.items():
            tables.setdefault(table, []).append(cols)
    rows = {t: {c: np.concatenate([p[c] for p in parts]) for c in parts[0]} for t, parts in tables.items()}
    begin_end = [e for _, be in slices for e in be]
    return rows, begin_end, {t: list(n) for t, n in names.items()}, counts


def _route(events: list[dict], counts: dict) -> tuple[list, ...]:
    """The events of each table (kernels, api, ranges, cpu_ops, modules, memcpy, memset:
    complete ``X`` events) and the B/E range events, in file order; counts the other GPU
    activity. One dict lookup per event by its category, then the phase checked per group.

    Categories are matched whatever their case, and 2021-era PyTorch's names (``Kernel``,
    ``Runtime``, ``Operator``, ``Memcpy``, ``Memset``) as today's: Kineto's generations
    differ in both."""
    K, A, R, C, M, MC, MS, OP = [], [], [], [], [], [], [], []
    other = {kind: [] for kind in OTHER_GPU}
    groups = {"kernel": K, "cuda_runtime": A, "cuda_driver": A, "runtime": A, "cpu_op": C, "operator": OP,
              "user_annotation": R, "python_function": M, "gpu_memcpy": MC, "memcpy": MC, "gpu_memset": MS,
              "memset": MS, **other}
    seen = {}  # each category as written -> its group
    for e in events:
        cat = e.get("cat")
        try:
            group = seen[cat]
        except KeyError:
            # ASCII letters only, as the C scanner compares them ("\u212a" lowers to "k")
            group = seen[cat] = groups.get(cat.lower()) if type(cat) is str and cat.isascii() else None
        except TypeError:  # a category that is a list or an object: none of these
            continue
        if group is not None:
            if group is OP:  # a 2021-era op: a step is a range, any other a cpu_op
                step = e.get("ph") == "X" and type(n := e.get("name")) is str and n.startswith(STEP_PREFIX)
                group = R if step else C
            group.append(e)
    out = []
    for group in (K, A, C, MC, MS):
        # list.count, not a set: a "ph" that is a list or an object is unhashable
        if group and (phs := [e.get("ph") for e in group]).count("X") != len(group):
            group = [e for e, ph in zip(group, phs) if ph == "X"]
        out.append(group)
    K, A, C, MC, MS = out
    BE = []
    if R:
        phs = [e.get("ph") for e in R]
        if phs.count("X") != len(phs):
            BE = [e for e, ph in zip(R, phs) if ph == "B" or ph == "E"]
            R = [e for e, ph in zip(R, phs) if ph == "X"]
    for kind, group in other.items():
        if group:
            counts[kind] += [e.get("ph") for e in group].count("X")
    # Of the Python functions, only the modules' (a name of another type is none of them).
    M = [e for e in M if e.get("ph") == "X" and type(n := e.get("name")) is str and n.startswith(PREFIX)]
    return K, A, R, C, M, MC, MS, BE


def _get(group: list[dict], key: str) -> list:
    return [e.get(key) for e in group]


def _rows(events: list[dict], names: dict[str, Interner], counts: dict, where) -> tuple[dict, list]:
    """``part``'s rows and B/E events of a slice; the checks run in a fixed order."""
    K, A, R, C, M, MC, MS, BE = _route(events, counts)
    rows = {}
    if K:
        a = col.args(K, where)
        kernel_names = col.names(_get(K, "name"), "kernel name", where)
        ts = col.num(_get(K, "ts"), "kernel ts", where)
        dur = col.num(_get(K, "dur"), "kernel dur", where)
        grid = col.dims(_get(a, "grid"), where)
        block = col.dims(_get(a, "block"), where)
        start = col.ns(ts)
        rows["kernels"] = dict(
            name=names["kernels"].codes(kernel_names), start=start, end=start + col.ns(dur),
            device=col.ints(_get(a, "device"), "kernel device", where),
            stream=col.ints(_get(a, "stream"), "kernel stream", where),
            correlation=col.ints(_get(a, "correlation"), "kernel correlation", where),
            grid_x=grid[:, 0], grid_y=grid[:, 1], grid_z=grid[:, 2],
            block_x=block[:, 0], block_y=block[:, 1], block_z=block[:, 2],
        )
    if A:
        api_names = col.names(_get(A, "name"), "API call name", where)
        start = col.ns(col.num(_get(A, "ts"), "API call ts", where))
        rows["api"] = dict(
            name=names["api"].codes(api_names), start=start,
            end=start + col.ns(col.num(_get(A, "dur"), "API call dur", where)),
            pid=col.ints(_get(A, "pid"), "API call pid", where),
            tid=col.ints(_get(A, "tid"), "API call tid", where),
            correlation=col.ints(_get(col.args(A, where), "correlation"), "API call correlation", where),
            kind=np.array([str(e.get("cat")).lower() == "cuda_driver" for e in A], dtype=np.int8),
        )
    for group, table, what in ((R, "ranges", "range"), (C, "cpu_ops", "cpu_op"), (M, "modules", "nn.Module event")):
        if group:
            group_names = col.names(_get(group, "name"), f"{what} name", where)
            start = col.ns(col.num(_get(group, "ts"), f"{what} ts", where))
            rows[table] = dict(
                name=names[table].codes(group_names), start=start,
                end=start + col.ns(col.num(_get(group, "dur"), f"{what} dur", where)),
                pid=col.ints(_get(group, "pid"), f"{what} pid", where),
                tid=col.ints(_get(group, "tid"), f"{what} tid", where),
            )
    for group, table in ((MC, "memcpy"), (MS, "memset")):
        if group:
            a = col.args(group, where)
            start = col.ns(col.num(_get(group, "ts"), "memcpy/memset ts", where))
            extra = {}
            if group is MC:
                extra["kind"] = names["memcpy"].codes(col.names(_get(group, "name"), "memcpy name", where))
            rows[table] = dict(
                start=start, end=start + col.ns(col.num(_get(group, "dur"), "memcpy/memset dur", where)),
                device=col.ints(_get(a, "device"), "memcpy/memset device", where),
                stream=col.ints(_get(a, "stream"), "memcpy/memset stream", where),
                correlation=col.ints(_get(a, "correlation"), "memcpy/memset correlation", where),
                bytes=col.ints(_get(a, "bytes"), "memcpy/memset bytes", where),
                **extra,
            )
    return rows, [(e.get("ph"), e.get("name"), e.get("pid"), e.get("tid"), e.get("ts")) for e in BE]
