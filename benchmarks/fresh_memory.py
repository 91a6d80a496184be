"""What memory a process has never touched costs on this machine: each run a fresh process
that allocates ``--mib`` MiB and writes it once (``np.ones``), the seconds and GiB/s printed
per run, with a pause between runs, and ``--twice`` also timing a second write of the same
memory (no page faults left).

    python -m benchmarks.fresh_memory --mib 230,2300 --runs 5 --pause 3

A first analysis must at least fault in the columns it hands back (about 230 MiB per
million kernels of a generated nsys export); where fresh pages come slowly (a guest whose
free memory is handed back to its host, as ``page_reporting`` does), that floor alone can
exceed a time budget that the compute would meet. The SQLite join it is compared with
works in a few MiB of its own and the page cache.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

_TOUCH = """
import json, sys, time
import numpy as np
n = int(sys.argv[1]) * 2**20 // 8
t0 = time.perf_counter(); a = np.ones(n, dtype=np.int64); t1 = time.perf_counter()
a += 1; t2 = time.perf_counter()
print(json.dumps({"first_s": t1 - t0, "again_s": t2 - t1}))
"""


def _kernel_line() -> str:
    try:
        with open("/proc/cmdline") as fh:
            return " ".join(w for w in fh.read().split() if w.startswith(("page_reporting", "transparent_hugepage")))
    except OSError:
        return ""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", default="230,2300", help="comma list of sizes in MiB")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pause", type=float, default=3.0, help="seconds between runs")
    a = ap.parse_args(argv)
    print(json.dumps({"kernel": _kernel_line()}))
    for mib in (int(m) for m in a.mib.split(",")):
        runs = []
        for _ in range(a.runs):
            time.sleep(a.pause)
            out = subprocess.run([sys.executable, "-c", _TOUCH, str(mib)], capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout))
        first = [r["first_s"] for r in runs]
        print(json.dumps({"mib": mib, "first_s": [round(s, 3) for s in first],
                          "first_gib_s": [round(mib / 1024 / s, 2) for s in first],
                          "median_first_s": round(statistics.median(first), 3),
                          "again_s": round(statistics.median(r["again_s"] for r in runs), 3)}))


if __name__ == "__main__":
    main()
