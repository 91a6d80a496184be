"""Write small synthetic traces as Kineto JSON and as nsys-like SQLite, and a reference
projection to check the importers against.

A *spec* is a plain dict of event lists, times in integer nanoseconds::

    {"ranges":  [(pid, tid, name, start, end), ...],
     "api":     [(pid, tid, name, start, end, correlation), ...],
     "kernels": [(name, start, end, device, stream, correlation, pid), ...],
     "memcpy":  [(start, end, device, stream, correlation, bytes, pid), ...]}

Only the standard library is used, so the corpus generator runs anywhere.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

VM = 1 << 48  # nsys packs a VM id above the pid; keep it set like real exports do


def gtid(pid: int, tid: int) -> int:
    return VM | (pid << 24) | tid


def gpid(pid: int) -> int:
    return VM | (pid << 24)


def nsys_pid(pid: int) -> int:
    """The pid the importer reports for ``pid`` written by this module (bits 24..55 of the GlobalId)."""
    return (gpid(pid) >> 24) & 0xFFFFFFFF


def us(ns: int) -> float:
    """Kineto writes microseconds with three decimals."""
    return round(ns / 1000.0, 3)


# ---------------------------------------------------------------- Kineto JSON

def kineto_events(spec: dict, range_style: str = "X") -> list[dict]:
    ev: list[dict] = []
    for pid, tid, name, s, e in spec.get("ranges", []):
        if range_style == "X":
            ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid,
                       "ts": us(s), "dur": us(e - s), "args": {}})
        else:
            ev.append({"ph": "B", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid, "ts": us(s), "_k": -e})
            ev.append({"ph": "E", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid, "ts": us(e), "_k": -s})
    if range_style != "X":
        # B/E pair like a stack per thread: time order, ends before begins at equal times,
        # outer (longer) ranges begin first and inner ranges end first.
        ev.sort(key=lambda x: (x["pid"], x["tid"], x["ts"], 0 if x["ph"] == "E" else 1, x["_k"]))
        for x in ev:
            del x["_k"]
    for pid, tid, name, s, e, corr in spec.get("api", []):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid,
                   "ts": us(s), "dur": us(e - s), "args": {"correlation": corr, "cbid": 211}})
    for name, s, e, dev, stream, corr, _pid in spec.get("kernels", []):
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": stream,
                   "ts": us(s), "dur": us(e - s),
                   "args": {"correlation": corr, "device": dev, "stream": stream,
                            "grid": [1, 1, 1], "block": [128, 1, 1], "registers per thread": 32}})
    for s, e, dev, stream, corr, nbytes, _pid in spec.get("memcpy", []):
        ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": dev,
                   "tid": stream, "ts": us(s), "dur": us(e - s),
                   "args": {"correlation": corr, "device": dev, "stream": stream, "bytes": nbytes}})
    for s, e, dev, stream, corr, nbytes, _pid in spec.get("memset", []):
        ev.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": dev, "tid": stream,
                   "ts": us(s), "dur": us(e - s),
                   "args": {"correlation": corr, "device": dev, "stream": stream, "bytes": nbytes}})
    return ev


def kineto_doc(spec: dict, range_style: str = "X") -> dict:
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150000000000}],
        "cuda_driver_version": 12080,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "traceEvents": kineto_events(spec, range_style),
        "traceName": "synthetic",
    }


def dump(doc, path: Path, gz: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path = Path(path)
    if gz:
        path.write_bytes(gzip.compress(data, mtime=0))
    else:
        path.write_bytes(data)
    return path


def write_kineto(spec: dict, path: Path, gz: bool = False, range_style: str = "X") -> Path:
    return dump(kineto_doc(spec, range_style), path, gz)


# ---------------------------------------------------------------- nsys SQLite

# The columns the importer reads (plus a few it ignores), types as nsys declares them.
NSYS_SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
        "shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
        "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
        "graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
        "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
        "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, "
        "copyKind INTEGER NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
        "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, "
        "bytes INTEGER NOT NULL"
    ),
    "ENUM_CUDA_MEMCPY_OPER": "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT",
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
    "TARGET_INFO_GPU": "id INTEGER, name TEXT",
    "TARGET_INFO_SYSTEM_ENV": "name TEXT, value TEXT",
}

# Columns the importer reads, per table (required and optional): the corpus drops and NULLs each.
NSYS_READ = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "correlationId", "globalPid", "deviceId", "streamId",
                                   "demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX",
                                   "blockY", "blockZ", "graphNodeId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "correlationId", "nameId"),
    "NVTX_EVENTS": ("start", "end", "eventType", "globalTid", "text", "textId", "domainId", "endGlobalTid"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "globalPid", "deviceId", "streamId", "correlationId",
                                   "bytes", "copyKind"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "globalPid", "deviceId", "streamId", "correlationId", "bytes"),
    "StringIds": ("id", "value"),
}


class _Strings:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.ids) + 1
        return self.ids[s]


def nsys_rows(spec: dict, registered_every: int = 3) -> dict[str, list[tuple]]:
    """Rows per table. Every ``registered_every``-th NVTX range uses a registered string
    (text NULL, textId set), as nsys does for nvtxDomainRegisterString."""
    sid = _Strings()
    rows: dict[str, list[tuple]] = {t: [] for t in NSYS_SCHEMA}
    for i, (pid, tid, name, s, e) in enumerate(spec.get("ranges", [])):
        g = gtid(pid, tid)
        if registered_every and i % registered_every == registered_every - 1:
            rows["NVTX_EVENTS"].append((s, e, 59, None, None, None, None, g, None, sid(name), 0))
        else:
            rows["NVTX_EVENTS"].append((s, e, 59, None, None, None, name, g, None, None, 0))
    for pid, tid, name, s, e, corr in spec.get("api", []):
        rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append((s, e, 1, gtid(pid, tid), corr, sid(name + "_v7000"), 0, None))
    for name, s, e, dev, stream, corr, pid in spec.get("kernels", []):
        words = name.split("(")[0].split("<")[0].split()
        short = words[-1] if words else name
        rows["CUPTI_ACTIVITY_KIND_KERNEL"].append(
            (s, e, dev, 1, stream, corr, gpid(pid), sid(name), sid(short), None, 1, 1, 1, 128, 1, 1, None))
    for s, e, dev, stream, corr, nbytes, pid in spec.get("memcpy", []):
        rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append((s, e, dev, 1, stream, corr, gpid(pid), nbytes, 1))
    for s, e, dev, stream, corr, nbytes, pid in spec.get("memset", []):
        rows["CUPTI_ACTIVITY_KIND_MEMSET"].append((s, e, dev, 1, stream, corr, gpid(pid), 0, nbytes))
    rows["StringIds"] = [(i, s) for s, i in sid.ids.items()]
    rows["ENUM_CUDA_MEMCPY_OPER"] = [(0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device")]
    rows["META_DATA_EXPORT"] = [("EXPORT_PRODUCT_VERSION", "2025.3.2.0"), ("EXPORT_SCHEMA_VERSION", "3.20.3")]
    rows["TARGET_INFO_GPU"] = [(0, "NVIDIA H200")]
    rows["TARGET_INFO_SYSTEM_ENV"] = [("CudaDriverVersion", "12080"), ("NvDriverVersion", "570.1")]
    return rows


def write_sqlite(rows: dict[str, list[tuple]], path: Path, schema: dict[str, str] | None = None,
                 gz: bool = False) -> Path:
    """Write ``rows`` under ``schema`` (table -> column DDL). Tables absent from ``schema``
    are not created."""
    schema = NSYS_SCHEMA if schema is None else schema
    path = Path(path)
    target = path.with_name(path.name + ".tmp") if gz else path
    if target.exists():
        target.unlink()
    con = sqlite3.connect(target)
    try:
        con.execute("PRAGMA synchronous = OFF")
        con.execute("PRAGMA journal_mode = OFF")
        for table, ddl in schema.items():
            con.execute(f'CREATE TABLE "{table}" ({ddl})')
            data = rows.get(table, [])
            if data:
                ph = ", ".join("?" * len(data[0]))
                con.executemany(f'INSERT INTO "{table}" VALUES ({ph})', data)
        con.commit()
    finally:
        con.close()
    if gz:
        path.write_bytes(gzip.compress(target.read_bytes(), mtime=0))
        target.unlink()
    return path


def write_nsys(spec: dict, path: Path, gz: bool = False, registered_every: int = 3) -> Path:
    return write_sqlite(nsys_rows(spec, registered_every), path, gz=gz)


# ---------------------------------------------------------------- the reference projection

def reference_projection(spec: dict) -> dict:
    """O(n*m) reference for the projection rule, straight from its definition.

    A kernel's launch is the *first* API call (in file order) with the same correlation id
    (and, for nsys, the same process). It belongs to the innermost range that encloses the
    launch start on the launching thread, half-open [start, end). Innermost is the most
    recently started range still open; among ranges starting at the same time the shorter
    one is inner. Returns {range key or "(no range)" / "(no launch record)": kernel count},
    where a range key is (pid, tid, name, start, end).
    """
    first_api: dict[tuple[int, int], tuple] = {}
    for a in spec.get("api", []):
        first_api.setdefault((a[0], a[5]), a)
    counts: dict = {}
    for k in spec.get("kernels", []):
        a = first_api.get((k[6], k[5]))
        if a is None:
            key = "(no launch record)"
        else:
            pid, tid, _name, t = a[0], a[1], a[2], a[3]
            best = None
            for r in spec.get("ranges", []):
                if r[0] == pid and r[1] == tid and r[3] <= t < r[4]:
                    if best is None or (r[3], -r[4]) > (best[3], -best[4]):
                        best = r
            key = "(no range)" if best is None else tuple(best)
        counts[key] = counts.get(key, 0) + 1
    return counts


def projected_counts(trace, pid_of=None) -> dict:
    """The same dictionary, computed from the workbench's own projection. ``pid_of`` maps the
    pids the importer reports back to the spec's (nsys packs them into GlobalIds)."""
    from workbench.analysis.projection import project

    p = project(trace)
    r = trace.ranges
    counts: dict = {}
    for status, rid in zip(p["status"].astype(str), p["range_id"].tolist()):
        if status == "no_launch":
            key = "(no launch record)"
        elif rid < 0:
            key = "(no range)"
        else:
            row = r.iloc[rid]
            pid = int(row["pid"])
            key = ((pid_of or {}).get(pid, pid), int(row["tid"]), str(row["name"]), int(row["start"]), int(row["end"]))
        counts[key] = counts.get(key, 0) + 1
    return counts


# ---------------------------------------------------------------- a plain valid trace

def simple_spec(steps: int = 2, layers: int = 3, kernels_per_range: int = 2, pid: int = 4242, tid: int = 7) -> dict:
    """step_i / layer_jj / {attn, kv_write} on one thread, kernels launched inside each leaf."""
    ranges, api, kernels = [], [], []
    t = 1_000_000
    corr = 1
    for s in range(steps):
        s0 = t
        for layer in range(layers):
            l0 = t
            for leaf in ("attn", "kv_write"):
                r0 = t
                for _ in range(kernels_per_range):
                    api.append((pid, tid, "cudaLaunchKernel", t + 100, t + 600, corr))
                    kernels.append((f"void {leaf}_kernel<4>(float*)", t + 5_000, t + 9_000, 0, 7, corr, pid))
                    corr += 1
                    t += 1_000
                t += 500
                ranges.append((pid, tid, leaf, r0, t))
                t += 100
            ranges.append((pid, tid, f"layer_{layer:02d}", l0, t))
            t += 100
        ranges.append((pid, tid, f"step_{s}", s0, t))
        t += 1_000
    memcpy = [(t + 100, t + 900, 0, 7, corr, 4096, pid)]
    api.append((pid, tid, "cudaMemcpyAsync", t, t + 50, corr))
    memset = [(t + 1000, t + 1200, 0, 7, corr + 1, 512, pid)]
    api.append((pid, tid, "cudaMemsetAsync", t + 60, t + 80, corr + 1))
    return {"ranges": ranges, "api": api, "kernels": kernels, "memcpy": memcpy, "memset": memset}
