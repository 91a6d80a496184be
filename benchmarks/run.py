"""The benchmark harness: generate traces, measure the workbench and the baselines side by side.

    .venv/bin/python -m benchmarks.run --sizes 1M,3M,10M

For each size it writes (once; reused afterwards) an unfused and a fused synthetic trace in
both formats under ``benchmarks/data/`` (see ``benchmarks/generate.py``), then measures, each
in a fresh subprocess so peak RSS is that measurement's own:

- workbench import + projection + per-layer summary, on the nsys SQLite and the Kineto JSON;
- workbench end to end like HTA's: load A + per-kernel breakdown + load B + diff(A, B);
- saving the imported trace to the store once, then re-opening it and printing its
  per-layer summary;
- the indexed SQLite join (``benchmarks/tasks.py``) on the same nsys export;
- Holistic Trace Analysis (load + GPU kernel breakdown + TraceDiff) on the same Kineto files,
  under ``benchmarks/.venv-hta`` (created by ``--setup-hta``).

Results merge into ``benchmarks/results/results.json`` (one entry per size and measurement,
every run kept) and the tables in ``benchmarks/RESULTS.md`` are regenerated from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
RESULTS = Path(os.environ.get("BENCH_RESULTS", HERE / "results" / "results.json"))
HTA_VENV = HERE / ".venv-hta"
HTA_PY = HTA_VENV / "bin" / "python"
# HTA 0.5.0 breaks under pandas 3 (LossySetitemError in transform_correlation_to_index).
HTA_PINS = ["HolisticTraceAnalysis==0.5.0", "pandas>=2.2,<3", "numpy>=2"]


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "KM" else s) * mult)


def size_label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def machine() -> dict:
    import numpy
    import pandas
    import pyarrow

    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        mem = subprocess.run(["free", "-h"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError:
        rev = ""
    return {
        "nproc": os.cpu_count(), "cpu": cpu, "free_h": mem, "platform": platform.platform(),
        "python": platform.python_version(), "numpy": numpy.__version__, "pandas": pandas.__version__,
        "pyarrow": pyarrow.__version__, "sqlite": __import__("sqlite3").sqlite_version, "git": rev,
    }


def load_results() -> dict:
    if RESULTS.exists():
        return json.loads(RESULTS.read_text())
    return {"sizes": {}}


def save_results(res: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)


def run_task(cmd: list[str], timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s", "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {p.returncode}: {' | '.join(tail)[:400]}", "wall_s": wall}
    out = json.loads(lines[-1])
    out["process_wall_s"] = wall
    return out


def setup_hta() -> None:
    if not HTA_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True)
    subprocess.run([str(HTA_PY), "-m", "pip", "install", "-q", *HTA_PINS], check=True)


SKIP: set[str] = set()


def measure(res: dict, label: str, key: str, cmd: list[str], runs: int, timeout: float, log) -> list:
    entry = res["sizes"].setdefault(label, {})
    if key in SKIP:
        log(f"  {label} {key}: skipped (--skip)")
        return entry.get(key, [])
    out = []
    for i in range(runs):
        r = run_task(cmd, timeout)
        out.append(r)
        brief = r.get("error") or " ".join(
            f"{k}={v:.2f}" for k, v in r.items() if k.endswith("_s") and isinstance(v, float)
        )
        log(f"  {label} {key} run {i + 1}/{runs}: {brief}; peak {r.get('peak_rss_bytes', 0) / 2**20:.0f} MiB")
        entry[key] = out
        save_results(res)
        if "error" in r:
            break
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="workbench benchmarks (see benchmarks/RESULTS.md)")
    ap.add_argument("--sizes", default="1M,3M,10M", help="kernel counts, e.g. 1M,3M,10M")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement")
    ap.add_argument("--runs-large", type=int, default=2, help="runs per measurement at sizes >= 10M")
    ap.add_argument("--hta-max", default="1M", help="largest size HTA is run at (0: never)")
    ap.add_argument("--hta-runs", type=int, default=1, help="HTA runs per size (it is slow)")
    ap.add_argument("--sqlite-max", default="10M", help="largest size the SQLite join is run at")
    ap.add_argument("--kineto-max", default="10M", help="largest size Kineto JSON is generated and measured at")
    ap.add_argument("--kineto-runs", type=int, default=0, help="runs for Kineto measurements (default: --runs)")
    ap.add_argument("--diff-max", default="10M", help="largest size the diff (and the fused variant) is run at")
    ap.add_argument("--only", default="", help="comma list of measurements to run (default: all): "
                    "pipeline,diff,reopen,sqlite,hta")
    ap.add_argument("--skip", default="", help="comma list of result keys not to (re)measure, e.g. wb_pipeline_nsys")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--setup-hta", action="store_true", help="create benchmarks/.venv-hta with HTA first")
    ap.add_argument("--no-report", action="store_true")
    a = ap.parse_args(argv)

    from benchmarks.generate import generate

    def log(msg):
        print(time.strftime("%H:%M:%S"), msg, flush=True)

    if a.setup_hta:
        setup_hta()
    res = load_results()
    res["machine"] = machine()
    SKIP.update(filter(None, a.skip.split(",")))
    only = set(filter(None, a.only.split(","))) or {"pipeline", "diff", "reopen", "sqlite", "hta"}
    py = sys.executable
    # The package measured as it runs once installed, its modules' bytecode compiled (pip
    # compiles it at install, an editable install on first import): where
    # PYTHONDONTWRITEBYTECODE is set, as on this machine, every task process would otherwise
    # compile the lazily imported importers again inside the timed import (~30 ms).
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "workbench")], check=True)
    for n in [parse_size(s) for s in a.sizes.split(",")]:
        label = size_label(n)
        runs = a.runs_large if n >= 10_000_000 else a.runs
        kin = n <= parse_size(a.kineto_max)
        do_diff = n <= parse_size(a.diff_max)
        k_runs = min(runs, a.kineto_runs) if a.kineto_runs else runs
        formats = ("nsys", "kineto") if kin else ("nsys",)
        log(f"size {label}: generating {'+'.join(formats)} (skipped where present)")
        t = time.perf_counter()
        ua = generate(n, DATA, "unfused", formats)
        fb = generate(n, DATA, "fused", formats) if do_diff else {}
        entry = res["sizes"].setdefault(label, {})
        gen = entry.setdefault("data", {})
        for tag, info in (("unfused", ua), ("fused", fb)):
            for fmt in formats:
                if f"{fmt}_path" not in info:
                    continue
                if fmt in info:
                    gen[f"{tag}_{fmt}"] = info[fmt]
                p = Path(info[f"{fmt}_path"])
                gen.setdefault(f"{tag}_{fmt}", {})["bytes"] = p.stat().st_size
        save_results(res)
        log(f"size {label}: data ready in {time.perf_counter() - t:.0f} s")
        u_nsys, u_kin = ua["nsys_path"], ua.get("kineto_path")
        f_nsys, f_kin = fb.get("nsys_path"), fb.get("kineto_path")
        task = [py, "-m", "benchmarks.tasks"]
        store, name = str(DATA / "store"), f"bench-{label}"
        if "pipeline" in only:
            # the last run also stores the trace for the re-open measurement
            measure(res, label, "wb_pipeline_nsys", task + ["pipeline", u_nsys, store, name], runs, a.timeout, log)
            if kin:
                measure(res, label, "wb_pipeline_kineto", task + ["pipeline", u_kin], k_runs, a.timeout, log)
        if "diff" in only and do_diff:
            measure(res, label, "wb_diff_nsys", task + ["diff", u_nsys, f_nsys], runs, a.timeout, log)
            if kin:
                measure(res, label, "wb_diff_kineto", task + ["diff", u_kin, f_kin], k_runs, a.timeout, log)
        if "reopen" in only:
            if not (DATA / "store" / name / "manifest.json").exists():
                measure(res, label, "wb_save_nsys", task + ["save", u_nsys, store, name], 1, a.timeout, log)
            measure(res, label, "wb_reopen", task + ["reopen", store, name], runs, a.timeout, log)
        if "sqlite" in only and n <= parse_size(a.sqlite_max):
            # The join's own question (kernels per innermost range name) asked of the export,
            # in the same minutes as the join.
            measure(res, label, "wb_range_counts_nsys", task + ["counts", u_nsys], runs, a.timeout, log)
            measure(res, label, "sqlite_join", task + ["sqlite", u_nsys], runs, a.timeout, log)
        if "hta" in only and a.hta_max != "0" and n <= parse_size(a.hta_max) and kin and do_diff:
            if not HTA_PY.exists():
                log("  HTA venv missing: run with --setup-hta")
            else:
                measure(res, label, "hta", [str(HTA_PY), str(HERE / "hta_task.py"),
                                            str(Path(u_kin).parent), str(Path(f_kin).parent)],
                        a.hta_runs, a.timeout, log)
    if not a.no_report:
        from benchmarks.report import write_report

        write_report(res)
        log("wrote benchmarks/RESULTS.md tables")


if __name__ == "__main__":
    main()
