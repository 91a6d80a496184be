"""Trace sets at scale: import and summarize N members of K kernels each, in one process, on the
local process pool and on Ray on this machine, in one run.

    .venv/bin/python -m benchmarks.trace_sets --members 64 --kernels 1000000

The members are one synthetic nsys export of K kernels (``benchmarks/generate.py``, made once
under ``benchmarks/data/`` and reused) hard-linked N times under ``--work``: N files to
import, with the bytes of one (each import still reads, decodes and stores its whole file).
Each executor runs in a fresh child process, so its driver's peak RSS (``VmHWM``) is its own:

- ``import``: ``wb.import_set`` of the N files (each member read, built and stored by a task);
- ``summarize``: ``summary(by="rank,layer")`` and ``summary(by="rank")`` (per-rank step, busy and
  collective time, stragglers) of the set opened afresh, each member opened by its task.

The local pool and Ray get every CPU of the machine; Ray's start-up (``ray.init``) is timed
apart, as a cluster is started once for many imports. Printed as a Markdown table and written
as JSON to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXECUTORS = ("one-process", "local", "ray")


def members(n: int, kernels: int, work: Path) -> list[Path]:
    """N hard links to one generated export of ``kernels`` kernels."""
    from benchmarks.generate import generate

    src = Path(generate(kernels, HERE / "data", "unfused", ("nsys",))["nsys_path"])
    files = work / "members"
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir(parents=True)
    out = []
    for i in range(n):
        dst = files / f"rank{i:03d}.sqlite"
        os.link(src, dst)
        out.append(dst)
    return out


def measure(kind: str, files: list[str], root: str) -> dict:
    """One executor's import and summaries, in this (fresh) process."""
    import resource

    import workbench as wb
    from benchmarks.peak_memory import hwm
    from workbench.trace.options import available_cpus

    cpus = available_cpus()
    out = {"executor": kind, "workers": 1 if kind == "one-process" else cpus}
    ray_started = 0.0
    if kind == "ray":
        import ray

        t = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        ray_started = time.perf_counter() - t
    ex = wb.Executor("local", workers=1) if kind == "one-process" else wb.Executor(kind, workers=cpus)
    try:
        t = time.perf_counter()
        wb.import_set("bench", files, root=root, executor=ex)
        out["import_s"] = time.perf_counter() - t
        t = time.perf_counter()
        ts = wb.open_set("bench", root=root, executor=ex)
        layers = ts.summary(by="rank,layer")
        ranks = ts.summary(by="rank")
        out["summarize_s"] = time.perf_counter() - t
    finally:
        if kind == "ray":
            ray.shutdown()
    out.update(ray_init_s=ray_started, members=len(ranks), layer_rows=len(layers),
               kernels=int(ranks["kernels"].sum()), steps=int(ranks["steps"].sum()),
               driver_peak_rss_mib=hwm() / 2**20,
               # A local worker's peak (the largest child): what each member's task needed.
               worker_peak_rss_mib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
               if kind == "local" else None)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=64)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--executors", default=",".join(EXECUTORS))
    ap.add_argument("--work", type=Path, default=HERE / "data" / "trace_sets",
                    help="where the member files and each executor's store go (emptied first)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child: measure one executor
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--files", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(measure(a.one, json.loads(Path(a.files).read_text()), a.root)))
        return
    files = members(a.members, a.kernels, a.work)
    listing = a.work / "members.json"
    listing.write_text(json.dumps([str(f) for f in files]))
    rows = []
    for kind in a.executors.split(","):
        root = a.work / f"store-{kind}"
        shutil.rmtree(root, ignore_errors=True)
        done = subprocess.run([sys.executable, "-m", "benchmarks.trace_sets", "--one", kind, "--root", str(root),
                               "--files", str(listing)], capture_output=True, text=True, cwd=HERE.parent)
        if done.returncode:
            sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.splitlines()[-1]))
        shutil.rmtree(root, ignore_errors=True)
        print(f"{kind}: done", file=sys.stderr)
    base = next((r for r in rows if r["executor"] == "one-process"), rows[0])
    print(f"{a.members} members x {a.kernels:,} kernels ({a.members * a.kernels:,} kernels), "
          f"{os.cpu_count()} CPUs\n")
    print("| executor | workers | import s | summarize s | total s | speed-up | kernels/s imported | "
          "driver peak RSS MiB | worker peak RSS MiB | Ray start s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        total = r["import_s"] + r["summarize_s"]
        r["speedup"] = (base["import_s"] + base["summarize_s"]) / total
        worker = f"{r['worker_peak_rss_mib']:.0f}" if r["worker_peak_rss_mib"] else "-"
        ray_start = f"{r['ray_init_s']:.1f}" if r["executor"] == "ray" else "-"
        print(f"| {r['executor']} | {r['workers']} | {r['import_s']:.1f} | {r['summarize_s']:.1f} | {total:.1f} | "
              f"{r['speedup']:.2f}x | {r['kernels'] / r['import_s'] / 1e6:.2f}M | {r['driver_peak_rss_mib']:.0f} | "
              f"{worker} | {ray_start} |")
    if a.json:
        a.json.write_text(json.dumps({"members": a.members, "kernels": a.kernels, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
