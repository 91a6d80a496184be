"""Capture a workload variant into ``traces/<name>/``.

``capture("decoder", {"kv_write": "fused"}, engine="eager", backend="torch")`` builds the
engine, times it (warm-up, repetitions, CUDA events on a GPU), records ``steps`` decode
steps with the chosen backend, imports the result, and stores it with a manifest:

* ``capture``: backend, engine, workload, variant, steps, the command (the CLI argv, or the
  equivalent CLI line for an API call, plus the process's own argv and the nsys command);
* ``env``: GPU, driver, CUDA, torch, Triton, nsys, Python, git revision, host;
* ``timing``: prefill and decode-step times (median, min-max, samples);
* ``outputs``: greedy tokens and logits, for equality checks between variants.

Everything is checked before any work starts, and the trace is built in a temporary
directory outside the store and published atomically, so a failure leaves nothing behind.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

from ..errors import WorkbenchError
from ..vocabulary import CAPTURE_BACKENDS as BACKENDS
DEVICES = ("cpu", "cuda")


def check_backend(backend: str) -> str:
    """``backend`` if it is a capture backend, else one line."""
    if backend not in BACKENDS:
        raise WorkbenchError(f"backend {backend}", f"unknown capture backend (choose from {', '.join(BACKENDS)})")
    return backend


def check_device(device: str) -> str:
    """``device`` if it names one (``cpu``, ``cuda``, ``cuda:N``), else one line; whether this
    process has it is checked where the work runs."""
    kind, colon, index = device.partition(":")
    if kind not in DEVICES or (colon and not (kind == "cuda" and index.isdigit())):
        raise WorkbenchError(f"device {device}", f"unknown device (choose from {', '.join(DEVICES)}, cuda:N)")
    return device


def _check(workload: str, variant: dict | None, engine: str, backend: str, device: str | None):
    import torch

    from .. import engines, workloads

    resolved = workloads.resolve(workload, variant)
    engines.check_kind(engine)
    check_backend(backend)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    check_device(device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise WorkbenchError(f"device {device}", "no CUDA GPU is available to this process")
    engines.check(engine, device)
    if backend == "nsys":
        from .nsys_backend import find_nsys

        find_nsys()
        if not device.startswith("cuda"):
            raise WorkbenchError("backend nsys", "records CUDA and NVTX only: it needs --device cuda")
    if engine == "tensorrt" and backend != "nsys":
        raise WorkbenchError("engine tensorrt", "TensorRT runs inside trtexec: capture it with --backend nsys")
    return resolved, device


def default_name(workload: str, variant: dict, engine: str, backend: str) -> str:
    from .. import workloads

    options = workloads.get(workload).options
    changed = [f"{k}-{v}" for k, v in variant.items() if v != options[k].default]
    # A plugin reference (mypkg.mod:WORKLOAD) becomes mypkg.mod-WORKLOAD: a legal trace name.
    return "-".join([workload.replace(":", "-"), *changed, engine, backend]).replace("_", "").replace(".", "p")


def cli_command(workload: str, variant: dict, engine: str, backend: str, name: str, steps: int,
                repeats: int, warmup: int, device: str) -> list[str]:
    """The CLI line equivalent to an API call, recorded when no real argv exists."""
    argv = ["workbench", "capture", workload]
    for k, v in variant.items():
        argv += ["--variant", f"{k}={v}"]
    return argv + ["--engine", engine, "--backend", backend, "--name", name, "--steps", str(steps),
                   "--repeats", str(repeats), "--warmup", str(warmup), "--device", device]


def capture(workload: str, variant: dict | None = None, *, engine: str = "eager", backend: str = "torch",
            name: str | None = None, steps: int = 3, repeats: int = 10, warmup: int = 2,
            device: str | None = None, root: str | Path | None = None, overwrite: bool = False,
            progress: bool = True, command: list[str] | None = None, keep_raw: bool = False):
    """Capture one variant and store it; returns the stored ``Trace``, or for a variant that
    runs as several ranks (``tp`` > 1) the stored ``TraceSet``, one member per rank
    (``multirank.py``)."""
    from ..trace import import_file, save
    from ..trace.store import check_free
    from .env import environment

    if steps < 1 or repeats < 1 or warmup < 1:
        raise WorkbenchError("capture", "steps, repeats and warmup must be at least 1")
    resolved, device = _check(workload, variant, engine, backend, device)
    name = name or default_name(workload, resolved, engine, backend)
    argv = command or cli_command(workload, dict(variant or {}), engine, backend, name, steps, repeats,
                                  warmup, device)
    if resolved.get("tp", 1) != 1:
        from .multirank import capture_job

        return capture_job(workload, resolved, engine=engine, backend=backend, name=name, steps=steps,
                           repeats=repeats, warmup=warmup, device=device, root=root, overwrite=overwrite,
                           progress=progress, argv=argv, keep_raw=keep_raw)
    check_free(name, root, overwrite)
    spec = {"workload": workload, "variant": resolved, "engine": engine, "device": device,
            "steps": steps, "repeats": repeats, "warmup": warmup, "progress": progress}

    with tempfile.TemporaryDirectory(prefix="workbench-capture-") as tmp:
        workdir = Path(tmp)
        if engine == "tensorrt":
            from .. import engines
            from .nsys_backend import capture_tensorrt

            built = engines.build(workload, resolved, engine, device)
            trace_file, result, tool_cmd = capture_tensorrt(built, spec, workdir)
        elif backend == "nsys":
            from .nsys_backend import capture as run_backend

            trace_file, result, tool_cmd = run_backend(spec, workdir)
        else:
            from .torch_backend import capture as run_backend

            trace_file, result, tool_cmd = run_backend(spec, workdir)
        trace = import_file(trace_file)
        nsys = None
        if backend == "nsys":
            from .nsys_backend import find_nsys

            nsys = find_nsys()
        trace.meta.update({
            "capture": {"backend": backend, "engine": engine, "workload": workload, "variant": resolved,
                        "device": device, "steps": steps, "repeats": repeats, "warmup": warmup,
                        "command": argv, "command_line": shlex.join(argv), "tool_command": tool_cmd,
                        # The real process (a notebook kernel, a campaign script) behind an API call.
                        "process_argv": list(sys.orig_argv),
                        "engine_info": result["engine"]},
            "env": environment(device, nsys),
            "timing": result["timing"],
            "outputs": result.get("outputs"),
        })
        raw = [workdir / "capture.nsys-rep" if backend == "nsys" else trace_file] if keep_raw else None
        save(trace, name, root=root, overwrite=overwrite, raw=raw)
    return trace
