"""Every real capture file the repository holds, timed per event: each imported, projected
and summarized per layer in one process (after a first pass that loads the importers), the
slowest first, so that a kind of export the fast paths miss stands out against the
generated exports' rate.

    python -m benchmarks.real_exports [--top 25]

Files: ``tests/corpus``, ``tests/data`` (gzipped captures), the stored traces' raw Kineto
captures under ``traces/``, and ``../shared/reference-captures/h200`` where it is beside the
checkout. A file that does not import (a TensorRT timing file alone) is listed with its one line.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from workbench.errors import WorkbenchError

ROOT = Path(__file__).resolve().parents[1]


def files() -> list[Path]:
    found = [p for p in sorted((ROOT / "tests" / "corpus").iterdir()) if p.suffix not in (".md", ".py")]
    found += sorted((ROOT / "tests" / "data").rglob("*.gz"))
    found += sorted((ROOT / "traces").glob("*/raw/kineto.json.gz"))
    found += sorted((ROOT.parent / "shared" / "reference-captures" / "h200").glob("*.gz"))
    return found


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=25, help="rows printed, slowest first")
    a = ap.parse_args(argv)
    import workbench.analysis as wa
    from workbench.trace import import_file

    def one(path: Path) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        trace = import_file(path)
        t1 = time.perf_counter()
        wa.project(trace)
        wa.summary(trace, by="layer")
        events = sum(len(trace.tables[t]) for t in ("kernels", "api", "ranges"))
        return t1 - t0, time.perf_counter() - t1, events

    rows, bad = [], []
    for path in files():
        try:
            one(path)  # the importers loaded, the file in the page cache
            rows.append((*one(path), path))
        except WorkbenchError as e:
            bad.append(str(e))
    print("| s | import s | project + summary s | events | events/s | file |\n|---:|---:|---:|---:|---:|---|")
    for imp, proj, events, path in sorted(rows, key=lambda r: -(r[0] + r[1]))[:a.top]:
        whole = imp + proj
        print(f"| {whole:.3f} | {imp:.3f} | {proj:.3f} | {events:,} | {events / whole:,.0f} | {os.path.relpath(path, ROOT)} |")
    print(f"\n{len(rows)} files, {sum(r[0] + r[1] for r in rows):.2f} s in all")
    for line in bad:
        print("not imported:", line)


if __name__ == "__main__":
    main()
