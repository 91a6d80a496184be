"""Two checkouts of the workbench measured in the same minutes: each task on each file in
fresh processes, the checkouts (and, for the newer one, its CLI memory policy) interleaved
run by run, so a machine that speeds up or slows down between minutes moves both alike.

    python -m benchmarks.compare_revisions OLD_CHECKOUT [--runs 5] [--runs-large 3]

OLD_CHECKOUT is a worktree of the older revision with its accelerators built in place
(``git worktree add /tmp/old REV && (cd /tmp/old && python setup.py build_ext --inplace)``).
Each checkout runs its own ``benchmarks.tasks``; one JSON line per task and file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

NEW = Path(__file__).resolve().parents[1]
DATA = NEW / "benchmarks" / "data"
_RELEASE = "from workbench.trace.options import ImportOptions; ImportOptions(memory='release').apply(); "


def _run(tree: Path, task: str, path: Path, release: bool) -> dict:
    code = (_RELEASE if release else "") + f"from benchmarks.tasks import main; main([{task!r}, {str(path)!r}])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--runs-large", type=int, default=3)
    a = ap.parse_args(argv)
    cases = [("pipeline", DATA / "unfused-1000000" / "trace.sqlite", a.runs),
             ("pipeline", DATA / "unfused-1000000" / "kineto" / "rank-0.pt.trace.json", a.runs),
             ("counts", DATA / "unfused-1000000" / "trace.sqlite", a.runs),
             ("pipeline", DATA / "unfused-10000000" / "trace.sqlite", a.runs_large),
             ("counts", DATA / "unfused-10000000" / "trace.sqlite", a.runs_large)]
    sides = {"old": (a.old, False), "new": (NEW, False), "new+release": (NEW, True)}
    for task, path, runs in cases:
        if not path.exists():
            continue
        res = {k: [] for k in sides}
        for _ in range(runs):
            for k, (tree, release) in sides.items():
                res[k].append(_run(tree, task, path, release))
        out = {"task": task, "file": str(path.relative_to(DATA)), "runs": runs,
               "equal_counts": all(r["range_counts"] == res["old"][0]["range_counts"] for rs in res.values() for r in rs)}
        for k, rs in res.items():
            out[k] = {"total_s": round(statistics.median(r["total_s"] for r in rs), 3),
                      "import_s": round(statistics.median(r["import_s"] for r in rs), 3),
                      "peak_mib": round(max(r["peak_rss_bytes"] for r in rs) / 2**20),
                      "cpu_s": round(statistics.median(r["cpu_s"] for r in rs), 2),
                      "samples": [round(r["total_s"], 3) for r in rs]}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
