"""The environment manifest: what produced a capture, so a trace can be reproduced and trusted."""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .. import settings


def _out(cmd: list[str], cwd: str | None = None) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_revision(repo: str | None = None) -> dict:
    """The commit of the checkout holding ``repo`` (default: the workbench's own) and whether it
    had changes; for the workbench's own, ``WORKBENCH_GIT_REVISION`` wins (a copied working
    tree on a lent machine has no ``.git``)."""
    if repo is None and settings.read(settings.GIT_REVISION):
        return {"revision": settings.read(settings.GIT_REVISION), "source": settings.GIT_REVISION.name}
    repo = repo or str(Path(__file__).resolve().parents[2])
    rev = _out(["git", "rev-parse", "HEAD"], cwd=repo)
    if rev is None:
        return {"revision": None}
    dirty = _out(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)
    return {"revision": rev, "dirty": bool(dirty)}


def nsys_version(nsys: str | None = None) -> str | None:
    nsys = nsys or shutil.which("nsys")
    return _out([nsys, "--version"]) if nsys else None


def environment(device: str, nsys: str | None = None, cwd: str | None = None) -> dict:
    """What this process runs on. ``cwd``: the user's working directory, whose git revision
    is recorded as ``git`` (the workbench's own goes to ``workbench_git``); without it ``git``
    is the workbench's own (its reference workloads live in its checkout)."""
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "device": device,
        "git": git_revision(cwd),
        "executable": sys.executable,
    }
    if cwd is not None:
        env["cwd"] = cwd
        env["workbench_git"] = git_revision()
    try:
        import torch
    except ImportError:  # a user's program may not use torch
        torch = None
    env["torch"] = torch.__version__ if torch else None
    env["cuda"] = torch.version.cuda if torch else None
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.startswith("cuda") and torch is not None:
        props = torch.cuda.get_device_properties(torch.device(device))
        env["gpu"] = props.name
        env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        env["compute_capability"] = f"{props.major}.{props.minor}"
        smi = _out(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        env["driver"] = smi.splitlines()[0] if smi else None
    else:
        env["gpu"] = None
        env["driver"] = None
    env["nsys"] = nsys_version(nsys)
    return env
