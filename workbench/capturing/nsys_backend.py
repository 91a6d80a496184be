"""Nsight Systems capture: the session runs in a child process under ``nsys profile``.

Only the decode steps are recorded (``--capture-range=cudaProfilerApi``; the child brackets
them with ``cudaProfilerStart/Stop``), CPU sampling and context-switch tracing stay off (on
by default they made a 2.4 GB file of a short run), and the report is exported to SQLite,
which the trace importer reads.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from ..errors import WorkbenchError
from .program import child_env

PROFILE_FLAGS = ["-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none"]
# The capture window: cudaProfilerStart/Stop, the first one only (see instrument/marks.py).
WINDOW_FLAGS = ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
# Without it nsys records a replayed graph as one item; per node keeps every kernel, and the
# export's node-creation events tie each one back to the ranges open when it was captured.
GRAPH_FLAGS = ["--cuda-graph-trace=node"]

# nsys's own progress lines on the program's stdout, kept in the log instead of shown.
_NSYS_LINE = re.compile(r"^(Collecting data\.\.\.|Generating '.*'|Generated:|\s+\S+\.(nsys-rep|qdstrm)|"
                        r"\[\d+/\d+\] \[|Capture range (started|ended)|Processing events\.\.\.)")


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


def _relay(stream, log, out) -> None:
    blank = []  # blank lines, shown only when the program's own output follows them
    for line in stream:
        log.write(line)
        if not line.strip():
            blank.append(line)
        elif _NSYS_LINE.match(line):
            blank.clear()
        else:
            out.write("".join(blank) + line)
            out.flush()
            blank.clear()


def profile_command(command: list[str], workdir: Path, windows: bool, env: dict) -> tuple[Path | None, int, list[str]]:
    """Run ``command`` under ``nsys profile``: the report (None when nsys wrote none), the
    exit status, and the nsys command line. The program's output is passed through."""
    nsys = find_nsys()
    rep = workdir / "capture.nsys-rep"
    cmd = [nsys, "profile", *PROFILE_FLAGS, *(WINDOW_FLAGS if windows else []), *GRAPH_FLAGS,
           "--force-overwrite=true", "-o", str(rep), "--", *command]
    with open(workdir / "profile.log", "w") as log:
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=None, text=True, errors="replace")
        relay = threading.Thread(target=_relay, args=(child.stdout, log, sys.stdout), daemon=True)
        relay.start()
        code = child.wait()
        relay.join()
    return (rep if rep.exists() else None), code, cmd


def export(rep: Path, workdir: Path) -> Path:
    """The report exported to SQLite, which the trace importer reads."""
    return _export(find_nsys(), rep, workdir)


def profile_module(args: list[str], workdir: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``python -m ARGS`` (this interpreter) under ``nsys profile``, recording its
    ``cudaProfilerStart/Stop`` window into ``workdir/capture.nsys-rep`` with every kernel of a
    replayed CUDA graph (the cudagraph engine's, and the compile engine's under cudagraph
    trees); nsys's output is kept in ``profile.log``. Returns the finished process and the
    nsys command line."""
    cmd = [find_nsys(), "profile", *PROFILE_FLAGS, *WINDOW_FLAGS, *GRAPH_FLAGS, "--force-overwrite=true", "-o",
           str(workdir / "capture.nsys-rep"), sys.executable, "-m", *args]
    done = subprocess.run(cmd, env=child_env(), stdout=subprocess.PIPE, stderr=None, text=True)
    (workdir / "profile.log").write_text(done.stdout)
    return done, cmd


def profiled_export(done: subprocess.CompletedProcess, workdir: Path) -> Path:
    """The report of a :func:`profile_module` run that succeeded, exported to SQLite; one line
    when nsys failed or wrote none."""
    rep = workdir / "capture.nsys-rep"
    if done.returncode != 0:
        tail = done.stdout.strip().splitlines()[-1:] or [""]
        raise WorkbenchError("nsys profile", f"exit {done.returncode}: {tail[0]}")
    if not rep.exists():
        raise WorkbenchError("nsys profile", "no report written (did the capture range open?)")
    return _export(find_nsys(), rep, workdir)


def capture(spec: dict, workdir: Path) -> tuple[Path, dict, list[str]]:
    spec_path, result_path = workdir / "spec.json", workdir / "result.json"
    spec_path.write_text(json.dumps(spec))
    done, cmd = profile_module(["workbench.capturing.session", str(spec_path), str(result_path)], workdir)
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    if result and "error" in result:
        raise WorkbenchError(result["error"]["where"], result["error"]["problem"])
    if result is None and done.returncode == 0:
        raise WorkbenchError("nsys profile", "the session wrote no result")
    return profiled_export(done, workdir), result, cmd


def capture_tensorrt(engine, spec: dict, workdir: Path) -> tuple[Path, dict, list[str]]:
    """Profile ``trtexec`` running the plan; its per-layer NVTX ranges carry the attribution."""
    from .run import stats

    nsys = find_nsys()
    rep = workdir / "capture.nsys-rep"
    cmd = [nsys, "profile", *PROFILE_FLAGS, "--force-overwrite=true", "-o", str(rep),
           *engine.run_command(spec["repeats"], workdir)]
    _run(cmd, "profile", workdir)
    times = json.loads((workdir / "engine.timing.json").read_text())
    timing = {"timer": "trtexec", "repeats": spec["repeats"],
              "decode_step_ms": stats([float(t["latencyMs"]) for t in times])}
    return _export(nsys, rep, workdir), {"timing": timing, "engine": engine.info}, cmd
