"""Server-side latency of a ``TraceDiffWidget`` selection: the time the kernel spends between a
pick in the layer / range dropdown (followed by a click on "show timeline") and its return.

    .venv/bin/python -m benchmarks.widget_latency                       # ref, hf and 1m pairs
    .venv/bin/python -m benchmarks.widget_latency --pairs ref,hf --selections 40 --json out.json

Per pair: both traces are opened and the widget constructed (the diff and each trace's index
are made there), then ``--selections`` different layers / ranges are picked, spread over the
dropdown's options ("all layers" last); each pick is a scope change (bars, aligned sequences)
then the timelines of A and B, timed together and apart; median and max over the picks. The
widget's messages are JSON-encoded as a kernel would encode them before sending (a comm that
encodes and counts instead of sending), so their serialization is part of the time; what the
browser does with them is not.

Pairs: ``ref`` (traces/h200-kvwrite-unfused-eager-nsys -> ...-fused-eager-nsys), ``hf``
(traces/h200-hf-attn-eager-static-nsys -> ...-sdpa-static-nsys), ``1m`` (the synthetic
1M-kernel nsys exports benchmarks/data/{unfused,fused}-1000000/trace.sqlite, generated when
missing: see benchmarks/generate.py), or any two traces as ``A:B``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAIRS = {
    "ref": ("traces", "h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys"),
    "hf": ("traces", "h200-hf-attn-eager-static-nsys", "h200-hf-attn-sdpa-static-nsys"),
    "1m": ("data", "unfused-1000000/trace.sqlite", "fused-1000000/trace.sqlite"),
}


def _encoding_comms() -> dict:
    """Make every widget comm JSON-encode what it would send (as the kernel's session does)
    and count it; returns the counters."""
    import comm

    sent = {"messages": 0, "bytes": 0}

    class EncodingComm(comm.DummyComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            sent["messages"] += 1
            sent["bytes"] += len(json.dumps(data, separators=(",", ":"), default=str))

    comm.create_comm = lambda *a, **k: EncodingComm(*a, **k)
    return sent


def _paths(pair: str) -> tuple[str, str]:
    if pair not in PAIRS:  # "A:B", two stored names (under traces/) or paths
        a, b = pair.split(":")
        return tuple(str(ROOT / "traces" / x) if (ROOT / "traces" / x).is_dir() else x for x in (a, b))
    where, a, b = PAIRS[pair]
    if where == "traces":
        return str(ROOT / "traces" / a), str(ROOT / "traces" / b)
    data = HERE / "data"
    for name in (a, b):
        if not (data / name).is_file():
            from .generate import generate

            variant, kernels = name.split("/")[0].split("-")
            print(f"generating {data / name} ...", file=sys.stderr)
            generate(int(kernels), data, variant, formats=("nsys",))
    return str(data / a), str(data / b)


def _picks(values: list[str], n: int) -> list[str]:
    """``n`` options spread over the dropdown (first, last and evenly between), the current
    one ("all") last so that every pick changes the selection."""
    if n >= len(values):
        chosen = list(values)
    else:
        chosen = [values[round(i * (len(values) - 1) / (n - 1))] for i in range(n)] if n > 1 else [values[-1]]
        chosen = list(dict.fromkeys(chosen))
    rest = [v for v in chosen if v != "all"]
    return rest + (["all"] if "all" in chosen else [])


def measure(pair: str, selections: int) -> dict:
    for module in ("ipywidgets", "plotly.graph_objects"):  # loaded before the clock: the widget is measured
        importlib.import_module(module)
    from workbench.trace import open_trace
    from workbench.viz.diff_widget import TraceDiffWidget

    sent = _encoding_comms()
    pa, pb = _paths(pair)
    t0 = time.perf_counter()
    a, b = open_trace(pa), open_trace(pb)
    t1 = time.perf_counter()
    w = TraceDiffWidget(a=a, b=b)
    t2 = time.perf_counter()
    rows = []
    for v in _picks([v for _, v in w.scope.options], selections):
        s0 = time.perf_counter()
        w.scope.value = v
        s1 = time.perf_counter()
        w.show_timeline()
        s2 = time.perf_counter()
        rows.append({"scope": v, "select_ms": (s1 - s0) * 1e3, "timeline_ms": (s2 - s1) * 1e3, "total_ms": (s2 - s0) * 1e3,
                     "timelines": len(w.timeline_figures)})
    total = [r["total_ms"] for r in rows]
    return {
        "pair": pair, "a": pa, "b": pb, "kernels": [int(len(a.kernels)), int(len(b.kernels))],
        "ranges": [int(len(a.ranges)), int(len(b.ranges))], "options": len(w.scope.options),
        "open_s": t1 - t0, "construct_s": t2 - t1, "selections": len(rows),
        "total_ms_median": statistics.median(total), "total_ms_max": max(total),
        "select_ms_median": statistics.median(r["select_ms"] for r in rows),
        "timeline_ms_median": statistics.median(r["timeline_ms"] for r in rows),
        "slowest": max(rows, key=lambda r: r["total_ms"])["scope"],
        "both_drawn": sum(r["timelines"] == 2 for r in rows), "messages": sent["messages"],
        "message_mb": sent["bytes"] / 1e6, "loadavg_1m": os.getloadavg()[0], "rows": rows,
    }


def table(results: list[dict]) -> str:
    out = ["| pair | kernels A / B | construct s | selections (both timelines drawn) | selection ms median (max) "
           "| of which timelines ms median | slowest |", "|---|---|---|---|---|---|---|"]
    for r in results:
        out.append(f"| {r['pair']} | {r['kernels'][0]:,} / {r['kernels'][1]:,} | {r['construct_s']:.2f} | "
                   f"{r['selections']} ({r['both_drawn']}) | {r['total_ms_median']:.0f} ({r['total_ms_max']:.0f}) | "
                   f"{r['timeline_ms_median']:.0f} | `{r['slowest']}` |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", default="ref,hf,1m",
                    help="comma-separated: " + ", ".join(PAIRS) + ", or A:B (stored names or paths)")
    ap.add_argument("--selections", type=int, default=20)
    ap.add_argument("--json", type=Path, help="write every measurement here")
    a = ap.parse_args(argv)
    results = []
    for pair in a.pairs.split(","):
        r = measure(pair, a.selections)
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "rows"}), file=sys.stderr)
    print(table(results))
    if a.json:
        a.json.write_text(json.dumps({"machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
