"""What each C accelerator earns: import + projection + per-layer summary of a file, in fresh
processes, with the accelerator present and with it hidden (its module made unimportable, so
the library path the importer falls back to does the work), interleaved.

    python -m benchmarks.accelerators FILE [FILE...] --runs 5 [--only NAME,...]

Prints one JSON line per file and accelerator: the medians with and without it and the
slowdown its removal causes. An accelerator stays only where that slowdown is over 15%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

ACCELERATORS = {
    "sqlite_pages": "workbench.trace.readers.nsys._sqlite_pages",
    "kineto_scan": "workbench.trace.readers.kineto._kineto_scan",
    "sorted_search": "workbench.trace.assemble._sorted_search",
    "range_stack": "workbench.trace.assemble._range_stack",
}

_RUN = (
    "import sys; sys.modules.update({{m: None for m in {hidden!r}}}); "
    "from benchmarks.tasks import main; main(['pipeline', {path!r}])"
)


def _once(path: str, hidden: list[str]) -> float:
    proc = subprocess.run([sys.executable, "-c", _RUN.format(hidden=hidden, path=path)],
                          capture_output=True, text=True, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["import_s"] + out["project_s"] + out["summary_s"]


def measure(path: str, name: str, runs: int) -> dict:
    with_it, without = [], []
    for _ in range(runs):
        with_it.append(_once(path, []))
        without.append(_once(path, [ACCELERATORS[name]]))
    a, b = statistics.median(with_it), statistics.median(without)
    return {"file": path, "accelerator": name, "runs": runs, "with_s": round(a, 3), "without_s": round(b, 3),
            "slowdown_without": round(b / a - 1, 3), "samples_with": with_it, "samples_without": without}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default=",".join(ACCELERATORS))
    args = ap.parse_args(argv)
    for path in args.files:
        for name in args.only.split(","):
            print(json.dumps(measure(path, name, args.runs)), flush=True)


if __name__ == "__main__":
    main()
