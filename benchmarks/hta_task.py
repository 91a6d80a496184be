"""Holistic Trace Analysis baseline: load + GPU kernel breakdown + TraceDiff, end to end.

Runs under the HTA venv's interpreter (``benchmarks/.venv-hta``), in a fresh process per
measurement, and prints one JSON object. HTA reads a directory of rank traces.

    benchmarks/.venv-hta/bin/python benchmarks/hta_task.py DIR_A DIR_B
    benchmarks/.venv-hta/bin/python benchmarks/hta_task.py --breakdown DIR   # load + kernel breakdown only
"""

from __future__ import annotations

import json
import logging
import resource
import sys
import time


from peak_memory import hwm as _hwm  # run as a script: benchmarks/ is on sys.path


def _rss() -> int:
    # HTA may parse ranks in forked workers: count them too
    return max(_hwm(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)


def main(dir_a: str, dir_b: str) -> dict:
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    from hta.trace_diff import TraceDiff

    try:
        from importlib.metadata import version

        hta_version = version("HolisticTraceAnalysis")
    except Exception:  # pragma: no cover
        hta_version = "?"
    import numpy
    import pandas

    base = _rss()
    t0 = time.perf_counter()
    a = TraceAnalysis(trace_dir=dir_a)
    t1 = time.perf_counter()
    kernel_types, kernels = a.get_gpu_kernel_breakdown(visualize=False)
    t2 = time.perf_counter()
    b = TraceAnalysis(trace_dir=dir_b)
    t3 = time.perf_counter()
    # HTA's default: the first iteration of each trace. (The workbench diff compares every
    # step; asking HTA for all iterations costs it far more -- 16 s for 28 iterations of a
    # 20k-kernel trace -- so the default is the conservative comparison.)
    d = TraceDiff.compare_traces(a.t, b.t)
    t4 = time.perf_counter()
    peak = _rss()

    def kernel_count(ta) -> int:
        df = ta.t.get_trace(ta.t.get_ranks()[0]) if hasattr(ta.t, "get_ranks") else ta.t.get_trace(0)
        kid = ta.t.symbol_table.get_sym_id_map().get("kernel")
        return int((df["cat"] == kid).sum())

    cols = [c for c in d.columns if c.endswith("_counts") and not c.startswith("diff")]
    return {
        "task": "hta", "load_a_s": t1 - t0, "breakdown_s": t2 - t1, "load_b_s": t3 - t2, "diff_s": t4 - t3,
        "total_s": t4 - t0, "kernels_a": kernel_count(a), "kernels_b": kernel_count(b),
        "diff_counts": {c: int(d[c].sum()) for c in cols}, "iterations_a": len(a.t.get_iterations()),
        "breakdown_rows": int(len(kernels)),
        "peak_rss_bytes": peak, "base_rss_bytes": base,
        "versions": {"hta": hta_version, "pandas": pandas.__version__, "numpy": numpy.__version__},
    }


def breakdown(trace_dir: str) -> dict:
    """HTA's answer to ``workbench summary --by kernel``: load + GPU kernel breakdown."""
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    a = TraceAnalysis(trace_dir=trace_dir)
    t1 = time.perf_counter()
    kernel_types, kernels = a.get_gpu_kernel_breakdown(visualize=False)
    t2 = time.perf_counter()
    return {"task": "hta_breakdown", "load_s": t1 - t0, "breakdown_s": t2 - t1, "total_s": t2 - t0,
            "breakdown_rows": int(len(kernels)), "peak_rss_bytes": _rss()}


if __name__ == "__main__":
    import os

    load0 = os.getloadavg()[0]
    out = breakdown(sys.argv[2]) if sys.argv[1] == "--breakdown" else main(sys.argv[1], sys.argv[2])
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = ru.ru_utime + ru.ru_stime
    out["loadavg_1m"] = [load0, os.getloadavg()[0]]
    sys.stdout.write(json.dumps(out) + "\n")
