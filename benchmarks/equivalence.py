"""Exact equivalence of imports across code changes.

``dump`` imports each file with the code at hand and pickles its finished tables, meta, the
projection of every kernel and all five summaries; ``compare`` imports them again and checks
every frame for exact equality (values, dtypes, categories, column order) and the meta for
equality. Run ``dump`` on the revision before a change and ``compare`` after it:

    python -m benchmarks.equivalence dump OUT FILE...
    python -m benchmarks.equivalence compare OUT FILE...
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path


def _snapshot(path: str) -> dict:
    import workbench.analysis as wa
    from workbench.errors import WorkbenchError
    from workbench.trace import import_file

    try:
        trace = import_file(path)
    except WorkbenchError as e:  # the message is compared too
        return {"error": str(e)}
    out = {
        "tables": {t: trace.tables[t].copy() for t in trace.tables},
        "meta": trace.meta,
        "projected": wa.project(trace),
    }
    out["summaries"] = {by: wa.summary(trace, by=by) for by in wa.BY}
    return out


def _key(path: str) -> str:
    return str(Path(path).resolve()).strip("/").replace("/", "_")


def dump(out: Path, files: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        with open(out / f"{_key(f)}.pkl", "wb") as fh:
            pickle.dump(_snapshot(f), fh, protocol=pickle.HIGHEST_PROTOCOL)
        print(f"dumped {f}")


def _frames_equal(a, b, what: str) -> list[str]:
    import pandas as pd

    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True, check_categorical=True)
    except AssertionError as e:
        return [f"{what}: {str(e).splitlines()[0:3]}"]
    return []


def compare(out: Path, files: list[str]) -> int:
    bad = 0
    for f in files:
        with open(out / f"{_key(f)}.pkl", "rb") as fh:
            before = pickle.load(fh)
        after = _snapshot(f)
        problems = []
        if "error" in before or "error" in after:
            if before.get("error") != after.get("error"):
                problems.append(f"error {before.get('error')!r} != {after.get('error')!r}")
            print(f"{'identical' if not problems else 'DIFFERENT'} {f}")
            for p in problems:
                print(f"  {p}")
            bad += bool(problems)
            continue
        if set(before["tables"]) != set(after["tables"]):
            problems.append(f"tables {sorted(before['tables'])} != {sorted(after['tables'])}")
        for t in before["tables"]:
            if t in after["tables"]:
                problems += _frames_equal(before["tables"][t], after["tables"][t], t)
        if before["meta"] != after["meta"]:
            problems.append(f"meta differs: {before['meta']} != {after['meta']}")
        problems += _frames_equal(before["projected"], after["projected"], "projected")
        for by, df in before["summaries"].items():
            problems += _frames_equal(df, after["summaries"][by], f"summary by {by}")
        print(f"{'identical' if not problems else 'DIFFERENT'} {f}")
        for p in problems:
            print(f"  {p}")
        bad += bool(problems)
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["dump", "compare"])
    ap.add_argument("out", type=Path)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.mode == "dump":
        dump(args.out, args.files)
        return 0
    return 1 if compare(args.out, args.files) else 0


if __name__ == "__main__":
    sys.exit(main())
