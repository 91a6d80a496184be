"""A Python program as a command line names it, and the bootstrap that runs one recorded.

Forms :func:`parse` knows: ``python [options] script.py ARGS``, ``python [options] -m module
ARGS`` (``python`` is any interpreter: ``python3``, ``python3.12``, a path to one) and a console
script of an environment (a file on PATH whose ``#!`` line runs Python, including pip's
``#!/bin/sh`` + ``exec`` form for long interpreter paths).

The bootstrap (``python -m workbench.capturing.program RESULT BACKEND MODE TRACE -- KIND TARGET
ARGS``) is run by that same interpreter with the same options. It runs the program in its own
process as Python would (``sys.argv``, ``sys.path[0]``, ``__main__``), records it (``torch``:
torch.profiler, the whole run or the first window, with the program's ``torch.cuda.nvtx``
ranges and ``cudaProfilerStart/Stop`` calls seen as they are under nsys; ``none``: nsys
records from outside), and
writes RESULT: exit status, wall time, windows, the environment. The program's own output
goes where it would have gone.

With ``WORKBENCH_CAPTURE_MODULES`` set (``workbench capture --modules [REGEX]``: the regex, or
empty for the default selection) the bootstrap imports torch before the program starts and
registers torch's global module hooks (``instrument.modules.annotate_called_modules``): every
selected module the program calls gets a range, under either backend. The variable is taken
out of the environment the program sees.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import settings


# Interpreter options that take a value (``-X dev``, ``-W error``); the rest are single flags.
_VALUED = ("-X", "-W", "--check-hash-based-pycs")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class Program:
    interpreter: str
    options: tuple[str, ...]
    kind: str  # "script" or "module"
    target: str
    args: tuple[str, ...]


def _shebang_interpreter(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if words and _PYTHON.search(Path(words[-1] if words[0].endswith("/env") else words[0]).name):
        return shutil.which(words[-1]) if words[0].endswith("/env") else words[0]
    # pip's form when the interpreter path is too long for a #! line.
    m = re.match(r"""'''exec' "?([^" ]+)"? "\$0" "\$@"$""", head[1] if len(head) > 1 else "")
    if m and _PYTHON.search(Path(m.group(1)).name):
        return m.group(1)
    return None


def parse(argv: list[str]) -> Program | None:
    """The Python program ``argv`` runs, or None when it runs something else."""
    if not argv:
        return None
    exe = shutil.which(argv[0]) or argv[0]
    if _PYTHON.search(Path(argv[0]).name):
        options, rest = [], list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c", "-"):
            options.append(rest.pop(0))
            if options[-1] in _VALUED and rest:
                options.append(rest.pop(0))
        if rest[:1] == ["-m"] and len(rest) > 1:
            return Program(exe, tuple(options), "module", rest[1], tuple(rest[2:]))
        if rest and not rest[0].startswith("-"):
            return Program(exe, tuple(options), "script", rest[0], tuple(rest[1:]))
        return None  # -c, stdin, or a bare interpreter: no program to run recorded
    interpreter = _shebang_interpreter(exe) if os.path.isfile(exe) else None
    if interpreter:
        return Program(interpreter, (), "script", exe, tuple(argv[1:]))
    return None


def child_env(extra: dict | None = None) -> dict:
    """This environment, plus the workbench importable in the child (appended to PYTHONPATH,
    so the program's own modules win any name clash) and ``extra``."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), package_root) if p)
    env.update(extra or {})
    return env


def bootstrap_command(program: Program, result: Path, backend: str, mode: str, trace: Path) -> list[str]:
    return [program.interpreter, *program.options, "-m", "workbench.capturing.program", str(result), backend,
            mode, str(trace), "--", program.kind, program.target, *program.args]


def _patch_profiler_api() -> None:
    """``torch.cuda.profiler.start/stop`` (and its ``profile()`` block) become a window, so a
    program written for nsys's ``cudaProfilerApi`` range is windowed the same way here."""
    import torch.cuda.profiler as api

    from ..instrument.marks import _close, _open

    api.start = lambda: _open("cudaProfilerApi")
    api.stop = lambda: _close("cudaProfilerApi")


def _mirror_nvtx() -> None:
    """Ranges the program opens with ``torch.cuda.nvtx`` (written for nsys) also open a
    ``record_function``, so torch.profiler sees the same range tree nsys would."""
    import threading

    import torch.cuda.nvtx as nvtx
    from torch.profiler import record_function

    opened = threading.local()  # NVTX's push/pop stack is per thread; so is this one
    push, pop = nvtx.range_push, nvtx.range_pop

    def range_push(msg):
        rf = record_function(msg)
        rf.__enter__()
        opened.__dict__.setdefault("stack", []).append(rf)
        return push(msg)

    def range_pop():
        stack = opened.__dict__.get("stack")
        if stack:
            stack.pop().__exit__(None, None, None)
        return pop()

    nvtx.range_push, nvtx.range_pop = range_push, range_pop


def _run(kind: str, target: str, args: list[str]) -> tuple[int, dict]:
    """Run the program as Python would; its exit status, and the windows as it left them
    (read while its objects live: a window object it still holds open is released, and
    closed, with its namespace)."""
    import runpy

    from ..instrument.marks import state

    sys.argv = [target, *args]  # run_module puts the module's file in sys.argv[0]
    if kind == "script":
        sys.path[0] = os.path.dirname(os.path.abspath(target))  # what `python script.py` puts first
    try:
        if kind == "script":
            namespace = runpy.run_path(target, run_name="__main__")
        else:
            namespace = runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
        if not (code is None or isinstance(code, int)):
            print(code, file=sys.stderr)  # sys.exit("message"), as Python itself prints it
            code = 1
        return code or 0, state()
    except KeyboardInterrupt:  # Ctrl-C, not a crash: the workbench says it in one line (child.py)
        raise
    except BaseException:  # the program's own crash: its traceback, as Python prints it
        import traceback

        traceback.print_exc()
        return 1, state()
    windows = state()
    del namespace
    return 0, windows


def _have_torch(result_path: str, what: str) -> bool:
    """Whether torch imports here; if not, RESULT says why (the capture's one-line error)."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        with open(result_path, "w") as fh:
            json.dump({"error": f"{what} needs torch in this interpreter, {sys.executable} ({e})"}, fh)
        return False
    return True


# Beside RESULT: the compiler's call sites and what was recorded of them.
COMPILED = "compiled.json"


def _compiler_recorder():
    """A :class:`provenance.CompilerRecorder`, installed, where torch is installed (None else)."""
    import importlib.util

    if settings.take(settings.CAPTURE_PROVENANCE) == "0" or importlib.util.find_spec("torch") is None:
        return None
    from .provenance import CompilerRecorder

    return CompilerRecorder().install()


def _main(argv: list[str]) -> int:
    result_path, backend, mode, trace, sep, kind, target, *args = argv
    from ..instrument import marks as window
    from .env import environment

    modules = settings.take(settings.CAPTURE_MODULES)
    if (backend == "torch" and not _have_torch(result_path, "the torch backend")) or \
            (modules is not None and not _have_torch(result_path, "--modules")):
        return 2
    ranges = None
    if modules is not None:
        from ..instrument.modules import annotate_called_modules

        ranges = annotate_called_modules(modules or None)
    # What the compiler says of every graph the program compiles, from its start (so graphs
    # compiled before a window opens are known too): where torch is installed, torch is
    # imported now, before the program configures inductor.
    compiler = _compiler_recorder()
    recorder = None
    if backend == "torch":
        from .torch_backend import TorchRecorder

        recorder = TorchRecorder(Path(trace))
        _mirror_nvtx()
        if mode == "windows":
            window.set_recorder(recorder)
            _patch_profiler_api()
        else:
            recorder.start()
    started = time.perf_counter()
    finished = False
    try:
        code, windows = _run(kind, target, args)
        finished = True
    finally:
        wall = time.perf_counter() - started
        if recorder is not None:
            recorder.stop()  # a window left open still ends the profiler cleanly
        if compiler is not None:
            compiler.uninstall()
            with open(Path(result_path).with_name(COMPILED), "w") as fh:
                json.dump({"sites": compiler.rows(), "summary": compiler.summary()}, fh)
        if ranges is not None:
            ranges.remove(attributed=compiler is not None)
            if not ranges.names and finished:  # an interrupted program may not have called one yet
                what = repr(modules) if modules else "(the default selection)"
                print(f"workbench: warning: --modules {what} matched no module the program called", file=sys.stderr)
    used = sys.modules.get("torch")  # the program's torch, if it imported one
    device = "cuda" if used is not None and used.cuda.is_initialized() else "cpu"
    with open(result_path, "w") as fh:
        json.dump({"exit_status": code, "wall_s": wall, "windows": windows, "device": device,
                   "env": environment(device, None, cwd=os.getcwd())}, fh)
    return code


if __name__ == "__main__":
    from .child import run_child

    run_child(_main, sys.argv[1:])
