"""Render the tables of ``benchmarks/RESULTS.md`` from ``benchmarks/results/results.json``.

Only the part between the GENERATED markers is rewritten; the prose around it is kept.

    .venv/bin/python -m benchmarks.report
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "results.json"
MD = HERE / "RESULTS.md"
BEGIN, END = "<!-- BEGIN GENERATED (python -m benchmarks.report) -->", "<!-- END GENERATED -->"
GiB, MiB = 2**30, 2**20


def _ok(runs):
    return [r for r in runs or [] if "error" not in r]


def _vals(runs, key):
    return [r[key] for r in _ok(runs) if key in r]


def med(runs, key):
    v = _vals(runs, key)
    return statistics.median(v) if v else None


def fmt_s(runs, key):
    v = _vals(runs, key)
    if not v:
        return _err(runs)
    m = statistics.median(v)
    if len(v) == 1:
        return f"{m:.2f}"
    return f"{m:.2f} ({min(v):.2f}-{max(v):.2f})"


def _err(runs):
    errs = [r["error"] for r in runs or [] if "error" in r]
    return f"failed: {errs[0][:60]}" if errs else "-"


def _load(ok):
    v = [x for r in ok for x in r.get("loadavg_1m", [])]
    return f"{min(v):.1f}-{max(v):.1f}" if v else "-"


def fmt_mem(runs):
    v = _vals(runs, "peak_rss_bytes")
    if not v:
        return "-"
    m = max(v)
    return f"{m / GiB:.2f} GiB" if m >= GiB else f"{m / MiB:.0f} MiB"


def _sizes(res):
    def key(label):
        return float(label[:-1]) * (1e6 if label.endswith("M") else 1e3 if label.endswith("k") else 1)

    return sorted(res.get("sizes", {}), key=key)


def tables(res: dict) -> str:
    out = []
    m = res.get("machine", {})
    out.append("### Machine\n")
    out.append(f"- CPU: {m.get('cpu', '?')}, `nproc` = {m.get('nproc', '?')}")
    free = m.get("free_h", "").splitlines()
    if len(free) >= 2:
        out.append(f"- `free -h`: `{' '.join(free[1].split())}`")
    out.append(f"- {m.get('platform', '')}; Python {m.get('python')}, numpy {m.get('numpy')}, pandas {m.get('pandas')}, "
               f"pyarrow {m.get('pyarrow')}, SQLite {m.get('sqlite')}; workbench at git {m.get('git')}")
    hta_v = next((r.get("versions") for s in res.get("sizes", {}).values() for r in _ok(s.get("hta"))), None)
    if hta_v:
        out.append(f"- HTA {hta_v['hta']} in `benchmarks/.venv-hta` with pandas {hta_v['pandas']}, numpy {hta_v['numpy']}")
    out.append("")

    out.append("### Generated traces\n")
    out.append("| size | variant | kernels | nsys SQLite | Kineto JSON | Kineto events |")
    out.append("|---|---|---:|---:|---:|---:|")
    for label in _sizes(res):
        d = res["sizes"][label].get("data", {})
        for var in ("unfused", "fused"):
            n, k = d.get(f"{var}_nsys", {}), d.get(f"{var}_kineto", {})
            if not n and not k:
                continue
            out.append(f"| {label} | {var} | {n.get('kernels', k.get('kernels', '?')):,} | {n.get('bytes', 0) / MiB:,.0f} MiB "
                       f"| {k.get('bytes', 0) / GiB:,.2f} GiB | {k.get('events', 0):,} |")
    out.append("")

    out.append("### Workbench: import + projection + per-layer summary\n")
    out.append("Seconds: median (min-max) over the runs; each run a fresh process. Kernel events/s and "
               "total events/s are over import + projection (the foundation bar); `+summary` adds the per-layer "
               "summary. Peak = RSS high-water mark of the process (interpreter and libraries included: "
               "about 105 MiB before any work).\n")
    out.append("| size | format | runs | import s | projection s | per-layer summary s | total s | kernel events/s "
               "| total events/s | peak RSS | peak / input | process CPU s | load avg |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label in _sizes(res):
        s = res["sizes"][label]
        for fmt in ("nsys", "kineto"):
            runs = s.get(f"wb_pipeline_{fmt}")
            if not runs:
                continue
            ok = _ok(runs)
            if not ok:
                out.append(f"| {label} | {fmt} | {len(runs)} | {_err(runs)} | | | | | | | |")
                continue
            ip = statistics.median([r["import_s"] + r["project_s"] for r in ok])
            k, e = ok[0]["kernels"], ok[0]["events"]
            peak = max(r["peak_rss_bytes"] for r in ok)
            out.append(f"| {label} | {fmt} | {len(ok)} | {fmt_s(runs, 'import_s')} | {fmt_s(runs, 'project_s')} | "
                       f"{fmt_s(runs, 'summary_s')} | {fmt_s(runs, 'total_s')} | {k / ip:,.0f} | {e / ip:,.0f} | "
                       f"{fmt_mem(runs)} | {peak / ok[0]['input_bytes']:.2f}x | {fmt_s(runs, 'cpu_s')} | {_load(ok)} |")
    out.append("")

    out.append("### Side by side: Holistic Trace Analysis (Kineto JSON)\n")
    out.append("End to end on the same two files (unfused A, fused B): load A + per-kernel breakdown + load B + diff. "
               "Workbench: `import_file`, `summary(by='kernel')`, `import_file`, `diff`. HTA: `TraceAnalysis`, "
               "`get_gpu_kernel_breakdown`, `TraceAnalysis`, `TraceDiff.compare_traces` (its default: first iteration).\n")
    out.append("| size | tool | runs | load A s | breakdown s | load B s | diff s | total s | peak RSS | kernels A / B | process CPU s | load avg |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for label in _sizes(res):
        s = res["sizes"][label]
        for tool, key in (("workbench", "wb_diff_kineto"), ("HTA", "hta"), ("workbench (nsys)", "wb_diff_nsys")):
            runs = s.get(key)
            if not runs:
                continue
            ok = _ok(runs)
            counts = f"{ok[0]['kernels_a']:,} / {ok[0]['kernels_b']:,}" if ok else ""
            out.append(f"| {label} | {tool} | {len(ok)} | {fmt_s(runs, 'load_a_s')} | {fmt_s(runs, 'breakdown_s')} | "
                       f"{fmt_s(runs, 'load_b_s')} | {fmt_s(runs, 'diff_s')} | {fmt_s(runs, 'total_s')} | {fmt_mem(runs)} | {counts} "
                       f"| {fmt_s(runs, 'cpu_s')} | {_load(ok)} |")
        w, h = _ok(s.get("wb_diff_kineto")), _ok(s.get("hta"))
        if w and h:
            eq = w[0]["kernels_a"] == h[0]["kernels_a"] and w[0]["kernels_b"] == h[0]["kernels_b"]
            ratios.append((label, med(h, "total_s") / med(w, "total_s"), med(h, "load_a_s") / med(w, "load_a_s"), eq,
                           med(h, "cpu_s") / med(w, "cpu_s")))
    if ratios:
        out.append("")
        out.append("| size | HTA / workbench, end to end (wall) | HTA / workbench, load A only (wall) | HTA / workbench, process CPU time | equal kernel counts |")
        out.append("|---|---:|---:|---:|---|")
        for label, r, rl, eq, rc in ratios:
            out.append(f"| {label} | **{r:.1f}x** | {rl:.1f}x | {rc:.1f}x | {'yes' if eq else 'NO'} |")
    out.append("")

    out.append("### Side by side: indexed SQLite join (nsys export)\n")
    out.append("Baseline (`benchmarks/tasks.py`): on a private copy of the export, `CREATE INDEX` on "
               "NVTX_EVENTS(globalTid, start, end) and RUNTIME(correlationId), then one query: kernel -> launch by "
               "correlationId within the process -> innermost enclosing NVTX push/pop range of the launch on its "
               "thread (latest start), counted per range name. Workbench: import + projection + per-layer summary "
               "(which includes the per-range counts).\n")
    out.append("| size | runs | SQLite index s | SQLite query s | SQLite total s | workbench total s | SQLite / workbench "
               "| query only / workbench | SQLite / workbench, process CPU | equal per-range counts |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for label in _sizes(res):
        s = res["sizes"][label]
        q, w = s.get("sqlite_join"), s.get("wb_pipeline_nsys")
        if not q:
            continue
        qo, wo = _ok(q), _ok(w)
        if qo and wo:
            eq = qo[0]["range_counts"] == wo[0]["range_counts"]
            r1 = med(qo, "total_s") / med(wo, "total_s")
            r2 = med(qo, "query_s") / med(wo, "total_s")
            rc = med(qo, "cpu_s") / med(wo, "cpu_s") if med(qo, "cpu_s") and med(wo, "cpu_s") else float("nan")
            out.append(f"| {label} | {len(qo)} | {fmt_s(q, 'index_s')} | {fmt_s(q, 'query_s')} | {fmt_s(q, 'total_s')} | "
                       f"{fmt_s(w, 'total_s')} | **{r1:.2f}x** | {r2:.2f}x | {rc:.2f}x | {'yes' if eq else 'NO'} |")
        else:
            out.append(f"| {label} | {len(q)} | {_err(q)} | | | | | | |")
    out.append("")

    out.append("### Re-opening a stored trace\n")
    out.append("`open_trace(name)` of the trace saved to the Parquet store, then `summary(by='layer')` printed; "
               "`process` adds interpreter start and library imports (`python -m benchmarks.tasks reopen`).\n")
    out.append("| size | runs | save s (once) | store size | open s | summary + print s | open + summary + print s | whole process s | peak RSS |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label in _sizes(res):
        s = res["sizes"][label]
        r = s.get("wb_reopen")
        sv = _ok(s.get("wb_save_nsys")) or [x for x in _ok(s.get("wb_pipeline_nsys")) if "save_s" in x]
        if not r:
            continue
        size = f"{sv[0]['store_bytes'] / MiB:.0f} MiB" if sv else "-"
        out.append(f"| {label} | {len(_ok(r))} | {fmt_s(sv, 'save_s')} | {size} | {fmt_s(r, 'open_s')} | "
                   f"{fmt_s(r, 'summary_print_s')} | **{fmt_s(r, 'total_s')}** | {fmt_s(r, 'process_wall_s')} | {fmt_mem(r)} |")
    out.append("")
    return "\n".join(out)


def write_report(res: dict | None = None) -> None:
    res = res if res is not None else json.loads(RESULTS.read_text())
    body = tables(res)
    text = MD.read_text() if MD.exists() else f"# Benchmark results\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    MD.write_text(f"{head}{BEGIN}\n\n{body}\n{END}{tail}")


if __name__ == "__main__":
    write_report()
