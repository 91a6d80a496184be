"""Where work runs and how it is recorded: device names (``cpu``, ``cuda``, ``cuda:N``) and
capture backends, checked once and defaulted once for the command line, the capture API, the
bench and the engines. torch is imported only when a default or a GPU's presence is needed."""

from __future__ import annotations

from .errors import WorkbenchError
from .vocabulary import CAPTURE_BACKENDS

DEVICES = ("cpu", "cuda")


def check_backend(backend: str) -> str:
    """``backend`` if it is a capture backend, else one line."""
    if backend not in CAPTURE_BACKENDS:
        raise WorkbenchError(f"backend {backend}", f"unknown capture backend (choose from {', '.join(CAPTURE_BACKENDS)})")
    return backend


def check_device(device: str) -> str:
    """``device`` if it names one (``cpu``, ``cuda``, ``cuda:N``), else one line; whether this
    process has it is :func:`require_device`'s question."""
    kind, colon, index = device.partition(":")
    if kind not in DEVICES or (colon and not (kind == "cuda" and index.isdigit())):
        raise WorkbenchError(f"device {device}", f"unknown device (choose from {', '.join(DEVICES)}, cuda:N)")
    return device


def require_device(device: str, hint: str = "") -> str:
    """``device`` checked, and refused in one line (``hint`` appended) when it is a GPU this
    process has none of."""
    check_device(device)
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise WorkbenchError(f"device {device}", "no CUDA GPU is available to this process" + hint)
    return device


def resolve_device(device: str | None = None, hint: str = "") -> str:
    """``device``, else ``cuda`` when this process has a GPU, else ``cpu``; checked as
    :func:`require_device` checks it."""
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return require_device(device, hint)
