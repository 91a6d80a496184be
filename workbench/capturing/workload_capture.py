"""Capture of a workload variant: the spec, its checks, and the run that stores the trace."""

from __future__ import annotations

import shlex
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ..devices import check_backend, resolve_device
from ..errors import WorkbenchError


@dataclass(frozen=True)
class CaptureSpec:
    """What to capture and how, handed down as one object from :func:`capture` to the backends
    and the multi-rank job. ``variant`` is the caller's until :func:`checked` resolves it (and
    fills ``device``, ``name`` and ``command``)."""

    workload: str
    variant: dict | None = None
    engine: str = "eager"
    backend: str = "torch"
    name: str | None = None
    steps: int = 3
    repeats: int = 10
    warmup: int = 2
    device: str | None = None
    root: str | Path | None = None
    overwrite: bool = False
    progress: bool = True
    command: list[str] | None = None
    keep_raw: bool = False

    def session(self) -> dict:
        """The JSON a capture session process reads (``session.py``): what to build and run."""
        return {"workload": self.workload, "variant": self.variant, "engine": self.engine, "device": self.device,
                "steps": self.steps, "repeats": self.repeats, "warmup": self.warmup, "progress": self.progress}

    def record(self) -> dict:
        """The manifest's ``capture`` section, as far as the spec knows it."""
        return {"backend": self.backend, "engine": self.engine, "workload": self.workload, "variant": self.variant,
                "device": self.device, "steps": self.steps, "repeats": self.repeats, "warmup": self.warmup,
                "command": self.command, "command_line": shlex.join(self.command)}


def checked(spec: CaptureSpec) -> CaptureSpec:
    """``spec`` with its variant resolved, its device, name and recorded command filled in;
    everything refused in one line before any work starts."""
    from .. import engines, workloads

    if spec.steps < 1 or spec.repeats < 1 or spec.warmup < 1:
        raise WorkbenchError("capture", "steps, repeats and warmup must be at least 1")
    resolved = workloads.resolve(spec.workload, spec.variant)
    engines.check_kind(spec.engine)
    check_backend(spec.backend)
    device = resolve_device(spec.device)
    engines.check(spec.engine, device)
    if spec.backend == "nsys":
        from .nsys_backend import find_nsys

        find_nsys()
        if not device.startswith("cuda"):
            raise WorkbenchError("backend nsys", "records CUDA and NVTX only: it needs --device cuda")
    if spec.engine == "tensorrt" and spec.backend != "nsys":
        raise WorkbenchError("engine tensorrt", "TensorRT runs inside trtexec: capture it with --backend nsys")
    name = spec.name or default_name(spec.workload, resolved, spec.engine, spec.backend)
    command = spec.command or cli_command(replace(spec, device=device, name=name))
    return replace(spec, variant=resolved, device=device, name=name, command=command)


def default_name(workload: str, variant: dict, engine: str, backend: str) -> str:
    from .. import workloads

    options = workloads.get(workload).options
    changed = [f"{k}-{v}" for k, v in variant.items() if v != options[k].default]
    # A plugin reference (mypkg.mod:WORKLOAD) becomes mypkg.mod-WORKLOAD: a legal trace name.
    return "-".join([workload.replace(":", "-"), *changed, engine, backend]).replace("_", "").replace(".", "p")


def cli_command(spec: CaptureSpec) -> list[str]:
    """The CLI line equivalent to an API call (the variant as the caller gave it), recorded
    when no real argv exists."""
    argv = ["workbench", "capture", spec.workload]
    for k, v in (spec.variant or {}).items():
        argv += ["--variant", f"{k}={v}"]
    return argv + ["--engine", spec.engine, "--backend", spec.backend, "--name", spec.name, "--steps", str(spec.steps),
                   "--repeats", str(spec.repeats), "--warmup", str(spec.warmup), "--device", spec.device]


def capture(workload: str, variant: dict | None = None, *, engine: str = "eager", backend: str = "torch",
            name: str | None = None, steps: int = 3, repeats: int = 10, warmup: int = 2,
            device: str | None = None, root: str | Path | None = None, overwrite: bool = False,
            progress: bool = True, command: list[str] | None = None, keep_raw: bool = False):
    """Capture one variant and store it; returns the stored ``Trace``, or for a variant that
    runs as several ranks (``tp`` > 1) the stored ``TraceSet``, one member per rank
    (``multirank.py``). The keywords are :class:`CaptureSpec`'s fields."""
    return capture_spec(CaptureSpec(workload, variant, engine, backend, name, steps, repeats, warmup, device, root,
                                    overwrite, progress, command, keep_raw))


def capture_spec(spec: CaptureSpec):
    """:func:`capture` of a :class:`CaptureSpec`."""
    from ..trace import import_file, save
    from ..trace.manifest import CAPTURE, ENV, OUTPUTS, TIMING
    from ..trace.store import check_free
    from .env import environment

    spec = checked(spec)
    if spec.variant.get("tp", 1) != 1:
        from .multirank import capture_job

        return capture_job(spec)
    check_free(spec.name, spec.root, spec.overwrite)

    with tempfile.TemporaryDirectory(prefix="workbench-capture-") as tmp:
        workdir = Path(tmp)
        if spec.engine == "tensorrt":
            from .. import engines
            from .nsys_backend import capture_tensorrt

            built = engines.build(spec.workload, spec.variant, spec.engine, spec.device)
            trace_file, result, tool_cmd = capture_tensorrt(built, spec.session(), workdir)
        elif spec.backend == "nsys":
            from .nsys_backend import capture as run_backend

            trace_file, result, tool_cmd = run_backend(spec.session(), workdir)
        else:
            from .torch_backend import capture as run_backend

            trace_file, result, tool_cmd = run_backend(spec.session(), workdir)
        trace = import_file(trace_file, compiled=result.get("compiled"))
        nsys = None
        if spec.backend == "nsys":
            from .nsys_backend import find_nsys

            nsys = find_nsys()
        trace.meta.update({
            CAPTURE: {**spec.record(), "tool_command": tool_cmd,
                     # The real process (a notebook kernel, a campaign script) behind an API call.
                     "process_argv": list(sys.orig_argv),
                     "engine_info": result["engine"]},
            ENV: environment(spec.device, nsys),
            TIMING: result["timing"],
            OUTPUTS: result.get("outputs"),
        })
        raw = [workdir / "capture.nsys-rep" if spec.backend == "nsys" else trace_file] if spec.keep_raw else None
        save(trace, spec.name, root=spec.root, overwrite=spec.overwrite, raw=raw)
    return trace
