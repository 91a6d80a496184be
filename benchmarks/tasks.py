"""One measurement, run in a fresh process by ``benchmarks.run``; prints one JSON object.

    python -m benchmarks.tasks pipeline PATH
    python -m benchmarks.tasks counts PATH
    python -m benchmarks.tasks diff PATH_A PATH_B
    python -m benchmarks.tasks save PATH STORE_ROOT NAME
    python -m benchmarks.tasks reopen STORE_ROOT NAME
    python -m benchmarks.tasks sqlite PATH

``peak_rss_bytes`` is the process's RSS high-water mark (``getrusage``), ``base_rss_bytes``
what the interpreter and the imported libraries hold before the measured work starts.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import time

T_PROCESS = time.perf_counter()


from .peak_memory import hwm as _hwm


def _rss() -> int:
    return _hwm()


def _events(trace) -> int:
    src = trace.meta.get("source", {})
    if src.get("format") == "kineto":
        return int(src["events"])
    return int(sum(len(trace.tables[t]) for t in ("kernels", "api", "ranges", "memcpy", "memset")))


def _import_file():
    """``workbench.trace.import_file`` with its importers' modules loaded, as the join's task
    loads ``sqlite3`` before its clock starts: the tasks time reading a trace, not loading
    (and, without cached bytecode, compiling) Python modules."""
    import workbench.trace.readers.kineto  # noqa: F401
    import workbench.trace.readers.nsys  # noqa: F401
    from workbench.trace import import_file

    return import_file


def _range_counts(trace) -> dict:
    from workbench.analysis import summary

    s = summary(trace, by="range")
    return {str(r): int(k) for r, k in zip(s["range"], s["kernels"])}


def _layer_counts(trace) -> dict:
    from workbench.analysis import summary

    s = summary(trace, by="layer")
    return {f"{int(l)}/{r}": int(k) for l, r, k in zip(s["layer"], s["range"], s["kernels"])}


def pipeline(path: str, root: str | None = None, name: str | None = None) -> dict:
    """import + projection + per-layer summary of one file (then, untimed in those numbers,
    saved to the store under ``root/name`` when given, for the re-open measurement)."""
    import workbench.analysis as wa

    import_file = _import_file()

    base = _rss()
    t0 = time.perf_counter()
    tr = import_file(path)
    t1 = time.perf_counter()
    wa.project(tr)
    t2 = time.perf_counter()
    layer = wa.summary(tr, by="layer")
    t3 = time.perf_counter()
    peak = _rss()
    out = {
        "import_s": t1 - t0, "project_s": t2 - t1, "summary_s": t3 - t2, "total_s": t3 - t0,
        "kernels": int(len(tr.kernels)), "events": _events(tr), "ranges": int(len(tr.ranges)),
        "api": int(len(tr.api)), "layer_rows": int(len(layer)),
        "peak_rss_bytes": peak, "base_rss_bytes": base, "input_bytes": os.path.getsize(path),
    }
    out["range_counts"] = _range_counts(tr)
    out["layer_counts"] = _layer_counts(tr)
    if root and name:
        from workbench.trace import save as store

        t4 = time.perf_counter()
        d = store(tr, name, root, overwrite=True)
        out["save_s"] = time.perf_counter() - t4
        out["store_bytes"] = sum(f.stat().st_size for f in d.iterdir())
    return out


def counts(path: str) -> dict:
    """The indexed SQLite join's own question asked of the export: import, then kernels per
    innermost range name (``summary(by="range")``), with no per-kernel projection."""
    import_file = _import_file()

    base, t0 = _rss(), time.perf_counter()
    tr = import_file(path)
    t1 = time.perf_counter()
    answer = _range_counts(tr)
    t2 = time.perf_counter()
    return {"import_s": t1 - t0, "summary_s": t2 - t1, "total_s": t2 - t0, "kernels": int(len(tr.kernels)),
            "range_counts": answer, "peak_rss_bytes": _rss(), "base_rss_bytes": base}


def diff(path_a: str, path_b: str) -> dict:
    """End to end like HTA's: load both + per-kernel breakdown + diff."""
    import workbench.analysis as wa

    import_file = _import_file()

    base = _rss()
    t0 = time.perf_counter()
    a = import_file(path_a)
    t1 = time.perf_counter()
    kb = wa.summary(a, by="kernel")
    t2 = time.perf_counter()
    b = import_file(path_b)
    t3 = time.perf_counter()
    d = wa.diff(a, b)
    t4 = time.perf_counter()
    peak = _rss()
    return {
        "load_a_s": t1 - t0, "breakdown_s": t2 - t1, "load_b_s": t3 - t2, "diff_s": t4 - t3, "total_s": t4 - t0,
        "kernels_a": int(len(a.kernels)), "kernels_b": int(len(b.kernels)),
        "breakdown_kernels": int(kb["kernels"].sum()), "diff_ranges": int(len(d.ranges)),
        "diff_kernels_total_a": int(d.ranges["kernels_total_a"].sum()),
        "diff_kernels_total_b": int(d.ranges["kernels_total_b"].sum()),
        "peak_rss_bytes": peak, "base_rss_bytes": base,
    }


def save(path: str, root: str, name: str) -> dict:
    from workbench.trace import save as store

    import_file = _import_file()

    t0 = time.perf_counter()
    tr = import_file(path)
    t1 = time.perf_counter()
    d = store(tr, name, root, overwrite=True)
    t2 = time.perf_counter()
    size = sum(f.stat().st_size for f in d.iterdir())
    return {"import_s": t1 - t0, "save_s": t2 - t1, "store_bytes": size, "peak_rss_bytes": _rss()}


def reopen(root: str, name: str) -> dict:
    """Open a stored trace and print its per-layer summary (what ``workbench summary NAME --by layer`` does)."""
    t_imp = time.perf_counter()
    import workbench.analysis as wa
    from workbench.trace import open_trace

    t0 = time.perf_counter()
    tr = open_trace(name, root)
    t1 = time.perf_counter()
    s = wa.summary(tr, by="layer")
    buf = io.StringIO()
    print(s.to_string(index=False), file=buf)
    t2 = time.perf_counter()
    # The question the indexed SQLite join answers (kernels per innermost range), asked of a
    # freshly opened copy: compared with the join's query time on its already indexed file.
    range_counts = _range_counts(open_trace(name, root))
    t3 = time.perf_counter()
    return {"open_s": t1 - t0, "summary_print_s": t2 - t1, "total_s": t2 - t0,
            "process_s": t2 - T_PROCESS, "library_import_s": t0 - t_imp, "range_summary_s": t3 - t2,
            "range_counts": range_counts,
            "kernels": tr.rows("kernels"), "peak_rss_bytes": _rss()}


# The baseline: what an engineer writes against an nsys export (as nsys's own NVTX projection
# reports do): index NVTX by (globalTid, start, end), join each kernel to its launching API
# call by correlationId within the process, and take the innermost enclosing push/pop range
# of that call on the calling thread (the enclosing range with the latest start).
SQLITE_INDEXES = [
    "CREATE INDEX bench_nvtx ON NVTX_EVENTS(globalTid, start, end)",
    "CREATE INDEX bench_rt ON CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)",
]
SQLITE_QUERY = """
SELECT coalesce(n.text, s.value, '(no range)') AS range, count(*) AS kernels
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
  ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
LEFT JOIN NVTX_EVENTS AS n ON n.rowid = (
  SELECT e.rowid FROM NVTX_EVENTS AS e
  WHERE e.globalTid = r.globalTid AND e.start <= r.start AND e.end >= r.end AND e.eventType IN (59, 60, 70, 71)
  ORDER BY e.start DESC LIMIT 1)
LEFT JOIN StringIds AS s ON s.id = n.textId
GROUP BY 1 ORDER BY 2 DESC
"""


def sqlite_join(path: str) -> dict:
    """The indexed SQLite join on a private copy of the export (indexes change the file)."""
    tmpdir = tempfile.mkdtemp(prefix="bench-sqlite-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        copy = os.path.join(tmpdir, "copy.sqlite")
        shutil.copyfile(path, copy)
        base = _rss()
        t0 = time.perf_counter()
        con = sqlite3.connect(copy)
        for sql in SQLITE_INDEXES:
            con.execute(sql)
        con.commit()
        t1 = time.perf_counter()
        rows = con.execute(SQLITE_QUERY).fetchall()
        t2 = time.perf_counter()
        con.close()
        peak = _rss()
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    counts = {str(r): int(n) for r, n in rows}
    return {"index_s": t1 - t0, "query_s": t2 - t1, "total_s": t2 - t0, "kernels": sum(counts.values()),
            "range_counts": counts, "peak_rss_bytes": peak, "base_rss_bytes": base,
            "sqlite_version": sqlite3.sqlite_version}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    task, args = argv[0], argv[1:]
    fn = {"pipeline": pipeline, "counts": counts, "diff": diff, "save": save, "reopen": reopen,
          "sqlite": sqlite_join}[task]
    load0 = os.getloadavg()[0]
    out = fn(*args)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["task"] = task
    # CPU time of the whole process (imports and the importers' reader threads included): less
    # sensitive than wall time to other work on the machine; the 1-minute load average says
    # how busy the machine was.
    out["cpu_s"] = ru.ru_utime + ru.ru_stime
    out["loadavg_1m"] = [load0, os.getloadavg()[0]]
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
