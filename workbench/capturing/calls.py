"""``profile_call``: time, check and record one Python callable; ``record``: record a block.

``profile_call(fn, *args, ...)`` calls ``fn`` ``warmup`` times (the first call's result is
kept as the outputs a later variant is checked against), times ``repeats`` calls (CUDA
events when the calls ran on a GPU, the host clock otherwise), then records ``steps`` calls,
each inside a ``step_<i>`` range, and stores the trace with its timing and outputs.

The torch backend records in this process. nsys cannot profile the process that starts it
(a Jupyter kernel included), so under nsys the call runs in a child process
(``python -m workbench.capturing.calls SPEC RESULT`` under ``nsys profile``): ``fn`` is then
a ``"module:function"`` reference importable from the current directory, and the arguments
are JSON values. That is the contract for capturing a callable from a notebook under nsys.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from ..errors import ProgramFailed, WorkbenchError
from ..devices import check_backend


def measure(fn, args: tuple, kwargs: dict, *, warmup: int, repeats: int, steps: int, recorder,
            compare_outputs: bool = True, progress: bool = True) -> dict:
    """Warm up, time, then record ``fn``; returns timing, outputs and the device it used."""
    from tqdm.auto import tqdm

    from ..analysis.outputs import encode
    from ..instrument.marks import step
    from .provenance import CompilerRecorder
    from .run import clock_for, stats

    with CompilerRecorder() as compiler:  # what the compiler says of graphs the calls compile
        first = fn(*args, **kwargs)
        outputs = encode(first) if compare_outputs else None
        del first
        for _ in range(warmup - 1):
            fn(*args, **kwargs)
        torch = sys.modules.get("torch")
        cuda = bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())
        clock = clock_for(cuda)
        for _ in tqdm(range(repeats), desc="workbench: timing", unit="call", disable=not progress or None,
                      leave=False):
            with clock.phase("call"):
                fn(*args, **kwargs)
        samples = clock.collect()["call"]
        recorder.start()
        try:
            for i in range(steps):
                with step(i):
                    fn(*args, **kwargs)
        finally:
            recorder.stop()
    timing = {"timer": clock.kind, "warmup": warmup, "repeats": repeats, "steps": steps, "call_ms": stats(samples)}
    return {"timing": timing, "outputs": outputs, "device": "cuda" if cuda else "cpu", "compiled": compiler.rows()}


def resolve_callable(ref: str):
    """The function a ``"module:function"`` reference names (one line when it cannot)."""
    from ..workloads.plugins import find

    fn = find(ref, f"function {ref}")
    if not callable(fn):
        raise WorkbenchError(f"function {ref}", f"is a {type(fn).__name__}, not a function")
    return fn


def _check(backend: str, warmup: int, repeats: int, steps: int) -> None:
    check_backend(backend)
    if warmup < 1 or repeats < 1 or steps < 1:
        raise WorkbenchError("profile_call", "warmup, repeats and steps must be at least 1")


def _target_name(fn) -> str:
    if isinstance(fn, str):
        return fn
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def profile_call(fn, *args, kwargs: dict | None = None, name: str | None = None, backend: str = "torch",
                 warmup: int = 2, repeats: int = 10, steps: int = 1, compare_outputs: bool = True,
                 root: str | Path | None = None, overwrite: bool = False, keep_raw: bool = False,
                 progress: bool = True, command: list[str] | None = None):
    """Time ``fn(*args, **kwargs)``, record ``steps`` calls, store the trace; returns it.

    ``fn``: a callable (torch backend) or a ``"module:function"`` reference (either backend;
    the only form nsys takes). An exception raised by ``fn`` in this process reaches the
    caller unchanged; nothing is stored.
    """
    from ..trace.manifest import CAPTURE, ENV, OUTPUTS, TIMING
    from ..trace.store import check_free
    from .store_capture import store_new

    _check(backend, warmup, repeats, steps)
    target = _target_name(fn)
    name = name or "call-" + target.replace(":", "-").replace("<", "").replace(">", "") + f"-{backend}"
    check_free(name, root, overwrite)
    settings = {"warmup": warmup, "repeats": repeats, "steps": steps, "compare_outputs": compare_outputs}
    line = f"wb.profile_call({target!r}, warmup={warmup}, repeats={repeats}, steps={steps}, backend={backend!r})"
    with tempfile.TemporaryDirectory(prefix="workbench-call-") as tmp:
        workdir = Path(tmp)
        started = time.perf_counter()
        if backend == "nsys":
            if not isinstance(fn, str):
                raise WorkbenchError("profile_call", "nsys runs the call in a child process: pass the function as "
                                     "a 'module:function' reference, with JSON arguments")
            result, raw, tool = _in_child(fn, args, kwargs or {}, settings, workdir)
        else:
            from .torch_backend import TorchRecorder

            call = resolve_callable(fn) if isinstance(fn, str) else fn
            recorder = TorchRecorder(workdir / "kineto.json")
            result = measure(call, args, kwargs or {}, recorder=recorder, progress=progress, **settings)
            raw, tool = recorder.out, None
        meta = {CAPTURE: {"kind": "call", "backend": backend, "device": result["device"], "target": target,
                         # The CLI's argv, or for an API call the call itself.
                         "command": command or line, "command_line": shlex.join(command) if command else line, "tool_command": tool, "cwd": os.getcwd(),
                         "wall_s": round(time.perf_counter() - started, 6), **settings,
                         "process_argv": list(sys.orig_argv)},
                TIMING: result["timing"], OUTPUTS: result["outputs"], ENV: result.get("env")}
        return store_new(raw, meta, name, root=root, overwrite=overwrite, keep_raw=keep_raw, progress=progress,
                         compiled=result.get("compiled"))


def _in_child(ref: str, args: tuple, kwargs: dict, settings: dict, workdir: Path):
    from .nsys_backend import profile_command
    from .program import child_env

    spec, result_path = workdir / "spec.json", workdir / "result.json"
    try:
        spec.write_text(json.dumps({"target": ref, "args": list(args), "kwargs": kwargs, **settings}))
    except TypeError as e:
        raise WorkbenchError("profile_call", f"arguments for a child process must be JSON values: {e}") from None
    rep, code, tool = profile_command([sys.executable, "-m", "workbench.capturing.calls", str(spec), str(result_path)],
                                      workdir, True, child_env())
    result = json.loads(result_path.read_text()) if result_path.exists() else {"error": f"exited with {code}"}
    if "error" in result:  # bad input (a reference that does not import) or the function failing
        raise (WorkbenchError if result.get("bad_input") else ProgramFailed)("profile_call", result["error"])
    if rep is None:
        raise ProgramFailed(ref, "nsys wrote no report")
    return result, rep, tool


def _child(spec_path: str, result_path: str) -> int:
    from .env import environment
    from ..instrument.marks import ProfilerApi

    spec = json.loads(Path(spec_path).read_text())
    try:
        fn = resolve_callable(spec["target"])
        result = measure(fn, tuple(spec["args"]), spec["kwargs"], warmup=spec["warmup"], repeats=spec["repeats"],
                         steps=spec["steps"], recorder=ProfilerApi(), compare_outputs=spec["compare_outputs"],
                         progress=False)
        result["env"] = environment(result["device"], None, cwd=os.getcwd())
        code = 0
    except WorkbenchError as e:
        result, code = {"error": str(e), "bad_input": True}, 2
    except Exception as e:  # the user's function failed: one line for the parent to show
        result, code = {"error": f"{spec['target']} raised {type(e).__name__}: {e}"}, 1
    Path(result_path).write_text(json.dumps(result))
    return code


if __name__ == "__main__":
    from .child import run_child

    run_child(_child, sys.argv[1], sys.argv[2])
