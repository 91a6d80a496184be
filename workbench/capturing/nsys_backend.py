"""Nsight Systems capture: the session runs in a child process under ``nsys profile``.

Only the decode steps are recorded (``--capture-range=cudaProfilerApi``; the child brackets
them with ``cudaProfilerStart/Stop``), CPU sampling and context-switch tracing stay off (on
by default they made a 2.4 GB file of a short run), and the report is exported to SQLite,
which the trace importer reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import WorkbenchError

PROFILE_FLAGS = ["-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none"]


def find_nsys() -> str:
    nsys = shutil.which("nsys")
    if nsys is None:
        raise WorkbenchError("backend nsys", "nsys not found on PATH (install Nsight Systems, or use --backend torch)")
    return nsys


def _run(cmd: list[str], what: str, workdir: Path) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    log = workdir / f"{what}.log"
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise WorkbenchError(f"nsys {what}", f"exit {done.returncode}: {tail[0]}")


def _export(nsys: str, rep: Path, workdir: Path) -> Path:
    sqlite = rep.with_suffix(".sqlite")
    _run([nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(sqlite), str(rep)],
         "export", workdir)
    return sqlite


def capture(spec: dict, workdir: Path) -> tuple[Path, dict, list[str]]:
    nsys = find_nsys()
    spec_path, result_path, rep = workdir / "spec.json", workdir / "result.json", workdir / "capture.nsys-rep"
    spec_path.write_text(json.dumps(spec))
    cmd = [nsys, "profile", *PROFILE_FLAGS, "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
           "--force-overwrite=true", "-o", str(rep)]
    if spec["engine"] == "cudagraph":
        # Without it nsys records a replayed graph as one item; per-node keeps every kernel.
        cmd.append("--cuda-graph-trace=node")
    cmd += [sys.executable, "-m", "workbench.capturing.session", str(spec_path), str(result_path)]
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=None, text=True)
    (workdir / "profile.log").write_text(done.stdout)
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    if result and "error" in result:
        raise WorkbenchError(result["error"]["where"], result["error"]["problem"])
    if done.returncode != 0 or result is None:
        tail = done.stdout.strip().splitlines()[-1:] or [""]
        raise WorkbenchError("nsys profile", f"exit {done.returncode}: {tail[0]}")
    if not rep.exists():
        raise WorkbenchError("nsys profile", "no report written (did the capture range open?)")
    return _export(nsys, rep, workdir), result, cmd


def capture_tensorrt(engine, spec: dict, workdir: Path) -> tuple[Path, dict, list[str]]:
    """Profile ``trtexec`` running the plan; its per-layer NVTX ranges carry the attribution."""
    from ..run import stats

    nsys = find_nsys()
    rep = workdir / "capture.nsys-rep"
    cmd = [nsys, "profile", *PROFILE_FLAGS, "--force-overwrite=true", "-o", str(rep),
           *engine.run_command(spec["repeats"], workdir)]
    _run(cmd, "profile", workdir)
    times = json.loads((workdir / "times.json").read_text())
    timing = {"timer": "trtexec", "repeats": spec["repeats"],
              "decode_step_ms": stats([float(t["latencyMs"]) for t in times])}
    return _export(nsys, rep, workdir), {"timing": timing, "engine": engine.info}, cmd
