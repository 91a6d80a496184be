"""How long inferring steps, layers and step times from the kernel stream takes on a large
trace: a generated nsys trace (``benchmarks.generate``), imported, its ranges removed, then
``trace.inferred.structure.infer`` and ``timing.step_times`` timed (best of three).

    python -m benchmarks.inferred --kernels 1000000
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.generate import generate
from workbench.trace.inferred.structure import infer
from workbench.analysis.inferred.timing import step_times
from workbench.trace import import_file
from workbench.trace.schema import Trace, empty_table


def _no_ranges(trace: Trace) -> Trace:
    tables = {t: trace.tables[t] for t in ("kernels", "api", "memcpy", "memset")}
    k = tables["kernels"].copy()
    k["range_id"] = np.full(len(k), -1, np.int64)
    tables["kernels"], tables["ranges"] = k, empty_table("ranges")
    return Trace(tables, {}, name="no ranges")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    args = ap.parse_args(argv)
    info = generate(args.kernels, args.out, formats=("nsys",))
    trace = _no_ranges(import_file(info["nsys_path"]))
    best = {}
    for _ in range(3):
        for what, fn in (("infer", lambda: infer(trace)), ("step_times", lambda: step_times(trace))):
            t = time.perf_counter()
            fn()
            best[what] = min(best.get(what, 1e9), time.perf_counter() - t)
    s = infer(trace)
    print(f"{trace.rows('kernels')} kernels: infer {best['infer']:.3f} s, step_times {best['step_times']:.3f} s; "
          f"{s.steps} steps of {s.period} kernels, {s.layers} layers of {s.block}, confidence {s.confidence:.2f}")


if __name__ == "__main__":
    main()
