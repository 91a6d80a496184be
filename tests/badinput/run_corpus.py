#!/usr/bin/env python3
"""Run ``workbench import`` (the CLI's ``main``, in this one process) on every corpus case.

    python tests/badinput/run_corpus.py CORPUS_DIR STORE_DIR RESULTS.json [--mem-mb N] [--shard I/N] [--only F,G] [--sample K]

For each case: the exit code, stdout and stderr lines, whether anything escaped ``main`` (a
traceback), what the store holds afterwards (including hidden temporary entries), and for
imports that succeed whether the stored trace loads, projects and summarizes, with any raw
escape character that reached the terminal output. ``--sample K`` runs only every K-th case of the two
big wrong-type categories (kineto-field-type, nsys-bad-value). ``--mem-mb`` caps the address space of
this process (RLIMIT_AS) so unbounded memory use fails instead of swapping.
Running all cases in one process keeps the corpus fast; tests/robustness/test_bad_input.py also runs
the real CLI as a subprocess on a representative subset.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import time
import traceback
from pathlib import Path


SAMPLED = ("kineto-field-type", "nsys-bad-value")
SQL_CHECKED = ("names", "kineto-control", "nsys-control", "semantic", "nsys-semantic", "size")


def _listing(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def run_cli(argv: list[str]) -> dict:
    from workbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    crash = None
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 2
        except BaseException:  # noqa: BLE001 - anything escaping main is a crash
            rc = None
            crash = traceback.format_exc()
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue(), "crash": crash,
            "seconds": round(time.perf_counter() - t0, 3)}


def main(argv: list[str]) -> int:
    corpus, store, results = Path(argv[0]), Path(argv[1]), Path(argv[2])
    if "--mem-mb" in argv:
        import resource

        mb = int(argv[argv.index("--mem-mb") + 1])
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
    sample = int(argv[argv.index("--sample") + 1]) if "--sample" in argv else 1
    shard, shards = map(int, argv[argv.index("--shard") + 1].split("/")) if "--shard" in argv else (0, 1)
    cases = json.loads((corpus / "manifest.json").read_text())
    store.mkdir(parents=True, exist_ok=True)
    out = []
    for i, case in enumerate(cases):
        if (only and case["file"] not in only) or i % shards != shard:
            continue
        if case["category"] in SAMPLED and (i // shards) % sample:
            continue
        before = _listing(store)
        name = f"c{i:04d}"
        r = run_cli(["--root", str(store), "import", str(corpus / case["file"]), "--name", name])
        r.update(case)
        r["store_after"] = [n for n in _listing(store) if n not in before]
        if r["rc"] == 0 and not r["crash"]:
            s = run_cli(["--root", str(store), "summary", name, "--by", "path"])
            r["summary"] = {k: s[k] for k in ("rc", "crash")}
            r["summary"]["raw_escape"] = "\x1b" in s["stdout"] or "\x07" in s["stdout"]
            if case["category"] not in SQL_CHECKED:
                q = {"rc": 0, "crash": None, "stdout": ""}
            else:
                q = run_cli(["--root", str(store), "sql", name, "select name from ranges union all select name from kernels"])
            r["sql"] = {k: q[k] for k in ("rc", "crash")}
            r["sql"]["raw_escape"] = "\x1b" in q["stdout"] or "\x07" in q["stdout"]
            try:
                from workbench.trace import load_dir

                t = load_dir(store / name)
                r["counts"] = {k: int(len(v)) for k, v in t.tables.items()}
            except BaseException:  # noqa: BLE001
                r["load_crash"] = traceback.format_exc()
            shutil.rmtree(store / name, ignore_errors=True)
        out.append(r)
    results.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
