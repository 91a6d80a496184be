"""``workbench capture -- COMMAND``: any command, recorded by nsys or torch.profiler, stored.

* ``nsys`` runs COMMAND under ``nsys profile`` (any program; CUDA + NVTX, graph kernels per
  node), the whole run or, with ``windows``, the first window (``workbench.window`` or the
  program's own ``cudaProfilerStart/Stop``).
* ``torch`` runs a Python program (script, ``-m`` module or console script) through the
  bootstrap in ``program.py``: torch.profiler over the whole run, or over the first window.

Python programs run through the bootstrap under both backends, so the manifest gets the
program's own exit status, wall time, windows and environment, and ``modules`` can hook the
program's ``nn.Module`` calls from inside it (``workbench capture --modules [REGEX]``: a range
per selected module, as ``wb.annotate_modules`` gives; see ``instrument/modules.py``). A command
that is not a Python program cannot take ``modules``. Everything is checked before
the program starts; the trace is built in a temporary directory and stored atomically, so a
failure (the program's or ours) stores nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import ProgramFailed, WorkbenchError
from .. import settings
from ..devices import check_backend
from . import program as programs
from .progress import Phases


def default_name(command: list[str], prog, backend: str) -> str:
    from ..trace.store import safe_name

    stem = Path(prog.target).stem if prog else Path(command[0]).name
    if prog and prog.kind == "module":
        stem = prog.target.rsplit(".", 1)[-1]
    return safe_name(f"{stem}-{backend}", f"command-{backend}")


def _modules_env(modules: bool | str) -> dict:
    """The bootstrap's ``WORKBENCH_CAPTURE_MODULES``: the regex, empty for the default
    selection; checked here so a bad regex stops the capture before the program starts."""
    from ..instrument.modules import Selection

    if modules is True or modules == "":
        return {settings.CAPTURE_MODULES.name: ""}
    if not isinstance(modules, str):
        raise WorkbenchError("capture modules", f"True or a regex, not {modules!r}")
    try:
        Selection(modules)
    except WorkbenchError as e:
        raise WorkbenchError(f"--modules {modules!r}", e.problem) from None
    return {settings.CAPTURE_MODULES.name: modules}


def _check_command(command: list[str], backend: str, modules: bool | str = False):
    if not command:
        raise WorkbenchError("capture", "no command given (workbench capture [options] -- COMMAND [ARGS...])")
    check_backend(backend)
    if shutil.which(command[0]) is None:
        raise WorkbenchError(command[0], "command not found")
    prog = programs.parse(command)
    if prog is None and modules not in (None, False):
        raise WorkbenchError(shlex.join(command), "--modules hooks the modules of a Python program (python "
                             "script.py, python -m module, or a console script), not of any other command")
    if prog is None and backend == "torch":
        raise WorkbenchError(shlex.join(command), "the torch backend records Python programs (python script.py, "
                             "python -m module, or a console script): use --backend nsys for any other command")
    if prog is not None and prog.kind == "script" and not os.path.isfile(prog.target):
        raise WorkbenchError(prog.target, "no such file")
    if backend == "nsys":
        from .nsys_backend import find_nsys

        find_nsys()
    return prog


def capture_command(command: list[str], *, backend: str = "torch", name: str | None = None,
                    root: str | Path | None = None, windows: bool = False, keep_raw: bool = False,
                    overwrite: bool = False, progress: bool = True, modules: bool | str = False,
                    provenance: bool = True):
    """Run ``command`` recorded by ``backend`` and store the trace; returns the ``Trace``.

    ``modules``: True (the default selection) or a regex: a range around each selected
    ``nn.Module`` call of the program (a Python program only; None or False: none).
    ``provenance``: record what inductor says of each graph the program compiles
    (``provenance.py``), so compiled kernels get module ranges.
    A program that exits non-zero raises :class:`ProgramFailed` (nothing stored); so does a
    ``windows`` run that opened no window or left one open.
    """
    from ..trace.store import check_free
    from .store_capture import store_new

    command = [str(c) for c in command]
    prog = _check_command(command, backend, modules)
    extra_env = _modules_env(modules) if modules not in (None, False) else {}
    if not provenance:
        extra_env[settings.CAPTURE_PROVENANCE.name] = "0"
    name = name or default_name(command, prog, backend)
    check_free(name, root, overwrite)
    line = shlex.join(command)
    with tempfile.TemporaryDirectory(prefix="workbench-capture-") as tmp:
        with Phases(progress).phase("run", line):
            run = _run(command, prog, backend, windows, Path(tmp), extra_env)
        _check_run(run, line, windows)
        manifest = _manifest(command, line, backend, windows, run, extra_env.get(settings.CAPTURE_MODULES.name),
                             provenance)
        told = _compiled(Path(tmp))
        if told.get("summary", {}).get("graphs"):
            manifest["capture"]["compiler"] = told["summary"]
        trace = store_new(run["trace_file"], manifest, name, root=root, overwrite=overwrite, keep_raw=keep_raw,
                          progress=progress, compiled=told.get("sites"))
        return trace


def _compiled(workdir: Path) -> dict:
    """What the bootstrap recorded of the program's compiled graphs (``provenance.py``)."""
    path = workdir / programs.COMPILED
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _run(command: list[str], prog, backend: str, windows: bool, workdir: Path, extra_env: dict) -> dict:
    result_path, kineto = workdir / "result.json", workdir / "kineto.json"
    if prog is not None:
        mode = "windows" if windows else "whole"
        inner = programs.bootstrap_command(prog, result_path, "torch" if backend == "torch" else "none", mode, kineto)
    else:
        inner = command
    started = time.perf_counter()
    if backend == "nsys":
        from .nsys_backend import profile_command

        env = programs.child_env({**extra_env, **({settings.CAPTURE_WINDOWS.name: "nsys"} if windows else {})})
        rep, code, tool = profile_command(inner, workdir, windows, env)
        trace_file = rep
    else:
        code, tool, trace_file = subprocess.run(inner, env=programs.child_env(extra_env)).returncode, None, kineto
    wall = time.perf_counter() - started
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    if "error" in result:
        raise WorkbenchError(command[0], result["error"])
    # The command's wall time is the whole run as its user waits for it, measured here: the
    # bootstrap's own clock starts after torch's import and stops before the profiler writes its
    # trace, and read 0.08 s for a run of 7.8 s. The bootstrap's is kept as the program's own time.
    return {"exit_status": result.get("exit_status", code), "wall_s": wall, "program_s": result.get("wall_s"),
            "windows": result.get("windows"), "device": result.get("device", "cuda" if backend == "nsys" else "cpu"),
            "env": result.get("env"), "tool_command": tool, "trace_file": trace_file, "bootstrap": prog is not None}


def _check_run(run: dict, line: str, windows: bool) -> None:
    if run["exit_status"] != 0:
        raise ProgramFailed("capture", f"{line} exited with {run['exit_status']} (nothing stored)")
    w = run["windows"]
    if w and w["unclosed"]:
        raise WorkbenchError("capture", f"{line}: window {w['unclosed'][0]!r} was opened and never closed "
                             "(nothing stored)")
    recorded = run["trace_file"] is not None and Path(run["trace_file"]).exists()
    if windows and w is not None and w["opened"] == 0 and not recorded:
        raise WorkbenchError("capture", f"{line} opened no window (call workbench.window() or "
                             "cudaProfilerStart/Stop, or capture without --windows)")
    if not recorded:
        why = " (the program never called cudaProfilerStart)" if windows else ""
        raise WorkbenchError("capture", f"{line}: nothing was recorded{why}")


def _manifest(command: list[str], line: str, backend: str, windows: bool, run: dict, modules: str | None,
              provenance: bool) -> dict:
    """``modules``: None (no module ranges), "" (the default selection) or the regex."""
    from ..trace.manifest import CAPTURE, ENV, TIMING

    w = run["windows"] or {"opened": None, "recorded": None}
    return {
        CAPTURE: {"kind": "command", "backend": backend, "device": run["device"], "command": command,
                 "command_line": line, "cwd": os.getcwd(), "tool_command": run["tool_command"],
                 "exit_status": run["exit_status"], "wall_s": round(run["wall_s"], 6),
                 "program_s": None if run["program_s"] is None else round(run["program_s"], 6),
                 "windows": {"mode": "windows" if windows else "whole", "opened": w["opened"],
                             "recorded": w["recorded"] if windows else None},
                 "modules": modules, "provenance": provenance, "process_argv": list(sys.orig_argv)},
        ENV: run["env"],
        TIMING: {"timer": "host", "wall_ms": _one(run["wall_s"] * 1e3)},
    }


def _one(ms: float) -> dict:
    from .run import stats

    return stats([ms])
