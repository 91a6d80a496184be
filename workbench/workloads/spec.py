"""What a workload is (:class:`Workload`: its options, ``create``, presentation and check), its
variant settings (each key an :class:`Option`: default, allowed values), the ``KEY=VALUE``
assignments of the command line, and the ``dtype`` setting's torch dtype."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import WorkbenchError
from .drawing import NO_PRESENTATION, Presentation


@dataclass(frozen=True)
class Option:
    default: Any
    choices: tuple | None = None
    help: str = ""

    def parse(self, key: str, value: Any) -> Any:
        """Coerce ``value`` (often a CLI string) to the default's type and check it."""
        kind = type(self.default)
        try:
            if isinstance(value, str) and kind is bool:
                if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                value = value.lower() in ("1", "true", "yes", "on")
            elif kind is not type(value) and kind in (int, float, str):
                value = kind(value)
        except ValueError:
            raise WorkbenchError(f"variant {key}", f"expected {kind.__name__}, got {value!r}") from None
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(map(str, self.choices))
            raise WorkbenchError(f"variant {key}", f"unknown value {value!r} (choose from {allowed})")
        return value


@dataclass(frozen=True)
class Workload:
    """A workload as ``get`` hands it out: every option an :class:`Option`, ``create`` the
    workload's own, ``presentation`` its own or the empty one."""

    options: Mapping[str, Option]
    create: Callable
    presentation: Presentation = NO_PRESENTATION
    # check(variant): raises a WorkbenchError for a resolved variant that cannot be built
    # (sizes that do not divide), so a bad one is refused before any work starts.
    check: Callable | None = None


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """``["kv_write=fused", "layers=2"]`` -> ``{"kv_write": "fused", "layers": "2"}``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise WorkbenchError(f"--variant {item}", "expected key=value")
        out[key.strip()] = value.strip()
    return out


def torch_dtype(name: str, device) -> tuple:
    """``(torch.device(device), dtype)`` for a variant's ``dtype`` setting: ``auto`` is bfloat16
    on CUDA and float32 on a CPU, any other value the torch dtype of that name."""
    import torch

    device = torch.device(device)
    if name == "auto":
        return device, torch.bfloat16 if device.type == "cuda" else torch.float32
    return device, getattr(torch, name)
