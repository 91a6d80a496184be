"""The raw tables of the trace (kernels, api, ranges, memcpy, memset) made from the export's
event tables, each as soon as its columns have been read."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...names import categorical_take, constant
from ...options import ImportOptions, Inline
from .database import DOMAIN_CREATE, GRAPH_NODES, KERNEL, MEMCPY, MEMSET, NVTX, RUNTIME
from .pages import Columns
from .values import distinct_ids, int64, ints, names, own_pid, pid_tid, spread_distinct, text_codes, tid


def make(columns: Columns, options: ImportOptions) -> dict[str, pd.DataFrame]:
    """Every raw table the export has the event table for, by its name in the trace.

    Each table is made as soon as its columns have been read, while the page reader is still
    decoding others: one read by sqlite3 on this thread, tables read from their pages (and
    needing nothing more of the connection) on threads from ``options.pool``, so that the
    last ones read are not made one after the other. That order is the threads', so where several tables are bad,
    the error told is the one of the first in the fixed order, as when every table is made
    in turn."""
    db = columns.db
    if KERNEL not in db.tables:
        raise TraceFormatError(
            db.where, f"no {KERNEL} table: not an Nsight Systems export with CUDA trace (capture with -t cuda)"
        )
    strings = db.strings()
    making: dict[str, Future] = {}
    here = Inline()  # a table whose making asks more of the connection: this thread
    with options.pool(2, "workbench-tables") as pool:
        for t, paged in columns.order([t for t in _MAKE if t in db.tables]):
            anywhere = paged and t in _MADE_ANYWHERE
            making[t] = (pool if anywhere else here).submit(_MAKE[t][1], columns, t, strings, db.where)
        return {key: making[t].result() for t, (key, _) in _MAKE.items() if t in making}


def _kernels(columns: Columns, table: str, strings, where: Path) -> pd.DataFrame:
    k = columns.read(table)
    n = len(k)
    if "shortName" not in k and "demangledName" not in k:
        raise TraceFormatError(where, f"table {KERNEL} lacks kernel name columns (shortName/demangledName)")
    name_ids = ints(k, "demangledName" if "demangledName" in k else "shortName", where, KERNEL)
    short_ids = ints(k, "shortName" if "shortName" in k else "demangledName", where, KERNEL)
    cols = {
        "name": names(name_ids, strings, where, f"{KERNEL}.demangledName"),
        "short_name": names(short_ids, strings, where, f"{KERNEL}.shortName"),
        "kind": constant("kernel", n),
        "start": ints(k, "start", where, KERNEL),
        "end": ints(k, "end", where, KERNEL),
        "device": ints(k, "deviceId", where, KERNEL),
        "stream": ints(k, "streamId", where, KERNEL),
        "correlation": ints(k, "correlationId", where, KERNEL),
    }
    if "globalPid" in k:  # else one process: the launch join matches correlation ids alone
        cols["pid"] = own_pid(ints(k, "globalPid", where, KERNEL))
    for src, dst in (("gridX", "grid_x"), ("gridY", "grid_y"), ("gridZ", "grid_z"),
                     ("blockX", "block_x"), ("blockY", "block_y"), ("blockZ", "block_z")):
        cols[dst] = ints(k, src, where, KERNEL, default=-1)
    cols["graph"] = pd.notna(k["graphNodeId"].array) if "graphNodeId" in k else np.zeros(n, bool)
    if cols["graph"].any():  # the node each graph kernel ran as (-1: none), for build's graph_ranges
        cols["graph_node"] = ints(k, "graphNodeId", where, KERNEL, default=-1)
    # One frame of the columns as they are: setting columns one by one would copy each.
    return pd.DataFrame(cols, copy=False)


def _api(columns: Columns, table: str, strings, where: Path) -> pd.DataFrame:
    r = columns.read(table)
    gtid = ints(r, "globalTid", where, RUNTIME)
    name = names(ints(r, "nameId", where, RUNTIME), strings, where, f"{RUNTIME}.nameId", _api_name)
    is_driver = np.array([c.startswith("cu") and not c.startswith("cuda") for c in name.categories.tolist()], dtype=bool)
    kinds = pd.Categorical(np.where(is_driver, "driver", "runtime"))
    # Every name is some row's, so every kind is.
    kind_codes = kinds.codes.astype(np.int8)[name.codes]
    pids, tids = pid_tid(gtid)
    return pd.DataFrame({
        "name": name,
        "kind": pd.Categorical.from_codes(kind_codes, dtype=kinds.dtype, validate=False),
        "start": ints(r, "start", where, RUNTIME),
        "end": ints(r, "end", where, RUNTIME),
        "pid": pids,
        "tid": tids,
        "correlation": ints(r, "correlationId", where, RUNTIME),
    }, copy=False)


def _api_name(name) -> str:
    """nsys suffixes runtime names with the API version ("cudaLaunchKernel_v7000")."""
    name = str(name)  # a number in StringIds too
    return name.split("_v")[0] if "_v" in name and name.rsplit("_v", 1)[-1].isdigit() else name


def _ranges(columns: Columns, table: str, strings, where: Path) -> pd.DataFrame:
    e = columns.read(table)
    if not len(e):
        return pd.DataFrame()
    etype = ints(e, "eventType", where, NVTX)
    # Text as codes into its distinct values (-1: none), so nothing here is a string per row.
    values, codes = text_codes(e["text"]) if "text" in e else (np.zeros(0, dtype=object), np.full(len(e), -1, np.int32))
    if "textId" in e:
        tid_ids = pd.to_numeric(pd.Series(e["textId"]), errors="coerce")
        need = (codes < 0) & tid_ids.notna().to_numpy()
        if need.any():
            found = names(tid_ids[need].astype(np.int64).to_numpy(), strings, where, f"{NVTX}.textId")
            codes[need] = found.codes.astype(np.int32) + len(values)
            values = np.concatenate([values, np.asarray(found.categories, dtype=object)])
    # Where a row has no text, None (as its value read whole would be), after the values.
    values = np.append(values, None)
    codes[codes < 0] = len(values) - 1
    domain_ids = ints(e, "domainId", where, NVTX, default=0)
    domains = {0: "default"}
    create = etype == DOMAIN_CREATE
    for d, t in zip(domain_ids[create], values[codes[create]]):
        domains[int(d)] = t if isinstance(t, str) else f"domain {d}"
    if create.any():
        keep = ~create
        e, etype, codes, domain_ids = e[keep], etype[keep], codes[keep], domain_ids[keep]
        if not len(e):
            return pd.DataFrame()
    ends = pd.to_numeric(pd.Series(e["end"]), errors="coerce").to_numpy()
    starts = ints(e, "start", where, NVTX)
    gtid = ints(e, "globalTid", where, NVTX)
    unended = np.isnan(ends) | (ends < 0)
    if unended.any():
        i = int(np.flatnonzero(unended)[0])
        raise TraceFormatError(
            where, f"NVTX range {str(values[codes[i]])[:80]!r} pushed at {starts[i]} ns on thread {tid(gtid[i:i+1])[0]} never ends"
            f" ({int(unended.sum())} unmatched)"
        )
    # No text, or numbers in a TEXT column (sqlite3 gives them as such): no name.
    values = np.array([v if isinstance(v, str) else "" for v in values.tolist()], dtype=object)
    dom_ids, dom_take = distinct_ids(domain_ids)
    domain = np.array([domains.get(d, f"domain {d}") for d in dom_ids.tolist()], dtype=object)
    pids, tids = pid_tid(gtid)
    return pd.DataFrame({
        "name": categorical_take(values, codes),
        "start": starts,
        "end": int64(ends, where, f"{NVTX}.end"),
        "pid": pids,
        "tid": tids,
        "domain": spread_distinct(domain, dom_take),
    }, copy=False)


def _copies(columns: Columns, table: str, strings, where: Path) -> pd.DataFrame:
    c = columns.read(table)
    out = pd.DataFrame({
        "start": ints(c, "start", where, table),
        "end": ints(c, "end", where, table),
        "device": ints(c, "deviceId", where, table, default=-1),
        "stream": ints(c, "streamId", where, table, default=-1),
        "correlation": ints(c, "correlationId", where, table, default=-1),
        "bytes": ints(c, "bytes", where, table, default=-1),
    }, copy=False)
    if "globalPid" in c:  # else the trace's default process, as kernels without one
        out["pid"] = own_pid(ints(c, "globalPid", where, table))
    if table == MEMCPY:
        kinds = columns.db.labels("ENUM_CUDA_MEMCPY_OPER")
        ck = ints(c, "copyKind", where, table, default=-1)
        out["kind"] = pd.Categorical([kinds.get(int(x), str(x)) for x in ck])
    return out


def _graph_nodes(columns: Columns, table: str, strings, where: Path) -> pd.DataFrame:
    """One row per graph node event: the node, the node it copies (-1: made by stream
    capture), when and on which thread."""
    g = columns.read(table)
    pids, tids = pid_tid(ints(g, "globalTid", where, table))
    return pd.DataFrame({
        "node": ints(g, "graphNodeId", where, table),
        "original": ints(g, "originalGraphNodeId", where, table, default=-1),
        "start": ints(g, "start", where, table),
        "pid": pids,
        "tid": tids,
    }, copy=False)


# Each event table's maker and the name of the table it makes, in the fixed order.
_MAKE = {KERNEL: ("kernels", _kernels), RUNTIME: ("api", _api), NVTX: ("ranges", _ranges),
         MEMCPY: ("memcpy", _copies), MEMSET: ("memset", _copies), GRAPH_NODES: ("graph_nodes", _graph_nodes)}
# Tables made from their columns alone (nothing more asked of the connection): when their
# pages were read, any thread may make them.
_MADE_ANYWHERE = (KERNEL, RUNTIME, NVTX, GRAPH_NODES)
