"""Reference workloads and their variants.

A workload is a named recipe: ``options`` (variant keys with defaults and allowed values) and
``create(variant, device)``, which returns an instance the engines drive (see
``workloads/decoder.py`` for the contract). Workloads register by name so a notebook can add
its own with ``register`` and capture it like the built-in ones.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import WorkbenchError


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


# name -> "module:attribute" (imported on first use, so listing workloads imports no torch)
# or a workload object registered at run time.
_REGISTRY: dict[str, Any] = {"decoder": "workbench.workloads.decoder:DECODER"}


def register(name: str, workload: Any) -> None:
    """Make ``workload`` (an object with ``options`` and ``create``) capturable as ``name``."""
    if not hasattr(workload, "options") or not callable(getattr(workload, "create", None)):
        raise WorkbenchError(f"workload {name}", "needs an `options` mapping and a `create(variant, device)`")
    _REGISTRY[name] = workload


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str):
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise WorkbenchError(f"workload {name}", f"unknown workload (known: {', '.join(names())})") from None
    if isinstance(entry, str):
        module, attr = entry.split(":")
        entry = _REGISTRY[name] = getattr(importlib.import_module(module), attr)
    return entry


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """``["kv_write=fused", "layers=2"]`` -> ``{"kv_write": "fused", "layers": "2"}``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise WorkbenchError(f"--variant {item}", "expected key=value")
        out[key.strip()] = value.strip()
    return out


def resolve(workload_name: str, variant: dict[str, Any] | None) -> dict[str, Any]:
    """The complete, typed variant: defaults overlaid with ``variant``; unknown keys rejected."""
    options: dict[str, Option] = get(workload_name).options
    variant = dict(variant or {})
    unknown = sorted(set(variant) - set(options))
    if unknown:
        raise WorkbenchError(f"workload {workload_name}",
                             f"unknown variant key(s) {', '.join(unknown)} (known: {', '.join(sorted(options))})")
    return {k: opt.parse(k, variant[k]) if k in variant else opt.default for k, opt in options.items()}

