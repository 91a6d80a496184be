"""The workbench beside the tools people would run instead, in one invocation, repetitions
interleaved (every task once, then every task again), each run a fresh whole process:

- nsys-ai (pinned ``NSYS_AI_PIN``, in ``benchmarks/.venv-nsys-ai``): its per-layer breakdown
  (``nsys-ai skill run nvtx_layer_breakdown``) and its diff (``nsys-ai diff --no-ai --format
  json``) against ``workbench summary --by layer`` and ``workbench diff --json`` on the 1M nsys
  export and its fused twin, the workbench on the plain files and on copies carrying nsys-ai's
  own indexes (``nsys_ai.indexing.ensure_performance_indexes``, 9 on these exports). nsys-ai
  runs on the indexed copies: it adds those indexes to any file it opens, so its runs skip that
  step (in its favour). Offline, DuckDB's sqlite extension cannot be fetched and nsys-ai falls
  back to sqlite3 (it says so on stderr); its Parquet cache beside the file is removed before
  each run, so each is a first analysis.
- Holistic Trace Analysis (``benchmarks/.venv-hta``, ``benchmarks.run --setup-hta``): load +
  GPU kernel breakdown of HTA's control trace made 10x longer (``benchmarks/scale_kineto.py``,
  1.09M events) against ``workbench summary --by kernel`` of the same gzipped file.
- The indexed SQLite join (``benchmarks.tasks sqlite``) against the workbench's first analysis
  (``benchmarks.tasks pipeline``: import + projection + per-layer summary) per nsys size.

    python -m benchmarks.side_by_side --setup          # both venvs, the data
    python -m benchmarks.side_by_side --reps 3 --reps-slow 1 --sizes 1M,3M

Samples go to ``benchmarks/results/side_by_side.json`` (``--out`` for another file); the table
it prints (medians, ratios) is what RESULTS.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.run import DATA, HERE, HTA_PY, ROOT, parse_size, setup_hta

NSYS_AI_PIN = "nsys-ai==0.3.0"
NSYS_AI_VENV = HERE / ".venv-nsys-ai"
NSYS_AI = NSYS_AI_VENV / "bin" / "nsys-ai"
OUT = HERE / "results" / "side_by_side.json"
WB = [sys.executable, "-c", "import sys; from workbench.cli import main; sys.exit(main())"]


def setup_nsys_ai() -> None:
    if not NSYS_AI.exists():
        subprocess.run([sys.executable, "-m", "venv", str(NSYS_AI_VENV)], check=True)
    subprocess.run([str(NSYS_AI_VENV / "bin" / "python"), "-m", "pip", "install", "-q", NSYS_AI_PIN], check=True)


def indexed_copy(path: Path) -> Path:
    """``path`` copied beside itself with nsys-ai's indexes, made by nsys-ai's own code."""
    dest = path.with_name(path.stem + "-nsysai-indexed.sqlite")
    if not dest.exists():
        tmp = dest.with_suffix(".tmp")
        shutil.copyfile(path, tmp)
        code = ("import sqlite3, sys; from nsys_ai.indexing import ensure_performance_indexes as f; "
                "c = sqlite3.connect(sys.argv[1]); f(c); c.commit(); c.close()")
        subprocess.run([str(NSYS_AI_VENV / "bin" / "python"), "-c", code, str(tmp)], check=True)
        tmp.rename(dest)
    return dest


def _no_cache(*paths: Path) -> None:
    """nsys-ai's Parquet cache and its lock beside each file, removed: the next run is a first run."""
    for p in paths:
        for c in p.parent.glob(p.stem + ".nsys-cache*"):
            shutil.rmtree(c) if c.is_dir() else c.unlink()


def run(cmd: list[str], timeout: float, before=None) -> dict:
    if before:
        before()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    out = {"wall_s": time.perf_counter() - t0, "loadavg_1m": [load0, os.getloadavg()[0]], "rc": p.returncode}
    if p.returncode:
        out["error"] = (p.stderr or p.stdout).strip()[-400:]
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
    if line and ("benchmarks.tasks" in cmd or any(c.endswith("hta_task.py") for c in cmd)):
        out["task"] = json.loads(line)  # the task's own clock and counts
    out["stdout"] = p.stdout
    return out


def tasks(sizes: list[int], timeout: float) -> dict[str, tuple[list[str], bool, object]]:
    """name -> (command, slow, set-up before each run)."""
    from benchmarks.generate import generate
    from benchmarks.scale_kineto import main as scale

    u = Path(generate(1_000_000, DATA, "unfused", ("nsys",))["nsys_path"])
    f = Path(generate(1_000_000, DATA, "fused", ("nsys",))["nsys_path"])
    ui, fi = indexed_copy(u), indexed_copy(f)
    kin = scale(["--times", "10"])
    out = {
        "nsys-ai layer breakdown (indexed 1M)": (
            [str(NSYS_AI), "skill", "run", "nvtx_layer_breakdown", str(ui), "--format", "json"], True,
            lambda: _no_cache(ui)),
        "workbench summary --by layer (1M)": (WB + ["summary", str(u), "--by", "layer", "--json"], False, None),
        "workbench summary --by layer (indexed 1M)": (WB + ["summary", str(ui), "--by", "layer", "--json"], False, None),
        "nsys-ai diff (indexed 1M)": (
            [str(NSYS_AI), "diff", str(ui), str(fi), "--no-ai", "--format", "json"], True, lambda: _no_cache(ui, fi)),
        "workbench diff --json (1M)": (WB + ["diff", str(u), str(f), "--json"], False, None),
        "workbench diff --json (indexed 1M)": (WB + ["diff", str(ui), str(fi), "--json"], False, None),
        "HTA load + kernel breakdown (Kineto 1.09M events)": (
            [str(HTA_PY), str(HERE / "hta_task.py"), "--breakdown", str(kin.parent)], True, None),
        "workbench summary --by kernel (Kineto 1.09M events)": (WB + ["summary", str(kin), "--by", "kernel"], False, None),
    }
    for n in sizes:
        label = f"{n // 1_000_000}M"
        p = generate(n, DATA, "unfused", ("nsys",))["nsys_path"]
        out[f"indexed SQLite join ({label})"] = ([sys.executable, "-m", "benchmarks.tasks", "sqlite", p], False, None)
        out[f"workbench first analysis ({label})"] = ([sys.executable, "-m", "benchmarks.tasks", "pipeline", p], False, None)
    return out


def _median(samples: list[dict], key: str) -> float | None:
    vals = [s["task"]["total_s"] if key == "total" else s["wall_s"] for s in samples
            if "error" not in s and (key != "total" or s.get("task"))]
    return statistics.median(vals) if vals else None


def table(res: dict) -> str:
    med = {k: _median(v, "wall") for k, v in res.items()}
    inner = {k: _median(v, "total") for k, v in res.items()}
    pairs = [("nsys-ai layer breakdown (indexed 1M)", "workbench summary --by layer (1M)"),
             ("nsys-ai layer breakdown (indexed 1M)", "workbench summary --by layer (indexed 1M)"),
             ("nsys-ai diff (indexed 1M)", "workbench diff --json (1M)"),
             ("nsys-ai diff (indexed 1M)", "workbench diff --json (indexed 1M)"),
             ("HTA load + kernel breakdown (Kineto 1.09M events)", "workbench summary --by kernel (Kineto 1.09M events)")]
    pairs += [(k, k.replace("indexed SQLite join", "workbench first analysis")) for k in res if k.startswith("indexed SQLite")]
    rows = ["| baseline | s | workbench | s | ratio |", "|---|---:|---|---:|---:|"]
    for base, wb in pairs:
        if base not in res or wb not in res:
            continue
        src = inner if base.startswith("indexed SQLite") else med  # the join's own clock, as RESULTS.md
        b, w = src[base], src[wb]
        ratio = f"{b / w:.1f}x" if b and w else "-"
        rows.append(f"| {base} | {b or 0:.2f} | {wb} | {w or 0:.2f} | {ratio} |")
    for a, b in (("workbench summary --by layer (indexed 1M)", "workbench summary --by layer (1M)"),
                 ("workbench diff --json (indexed 1M)", "workbench diff --json (1M)")):
        if med.get(a) and med.get(b):
            rows.append(f"| {b} | {med[b]:.2f} | {a} | {med[a]:.2f} | indexed {100 * (med[a] / med[b] - 1):+.0f}% |")
    return "\n".join(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", action="store_true", help="create both baseline venvs first")
    ap.add_argument("--sizes", default="1M,3M", help="nsys sizes for the SQLite join")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of the workbench and join tasks")
    ap.add_argument("--reps-slow", type=int, default=1, help="repetitions of the nsys-ai and HTA tasks")
    ap.add_argument("--only", default="", help="comma list of words a task's name must contain one of")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", type=Path, default=OUT,
                    help="where the samples go (the last outputs beside it, *_outputs.json)")
    a = ap.parse_args(argv)
    if a.setup:
        setup_nsys_ai()
        setup_hta()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "workbench")], check=True)
    todo = tasks([parse_size(s) for s in a.sizes.split(",")], a.timeout)
    if a.only:
        todo = {k: v for k, v in todo.items() if any(w in k for w in a.only.split(","))}
    res: dict[str, list] = {k: [] for k in todo}
    for rep in range(max(a.reps, a.reps_slow)):
        for name, (cmd, slow, before) in todo.items():
            if rep >= (a.reps_slow if slow else a.reps):
                continue
            r = run(cmd, a.timeout, before)
            res[name].append(r)
            print(time.strftime("%H:%M:%S"), f"{name} run {rep + 1}: {r.get('wall_s', 0):.2f} s"
                  f"{' ERROR ' + r['error'][-200:] if 'error' in r else ''}", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    keep = {k: [{x: y for x, y in s.items() if x != "stdout"} for s in v] for k, v in res.items()}
    outputs = {k: v[-1].get("stdout", "")[:2_000_000] for k, v in res.items() if v}
    a.out.write_text(json.dumps({"machine": {"nproc": os.cpu_count(), "git": _git()}, "samples": keep}, indent=1) + "\n")
    a.out.with_name(a.out.stem + "_outputs.json").write_text(json.dumps(outputs) + "\n")
    print(table(res))


def _git() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()


if __name__ == "__main__":
    main()
