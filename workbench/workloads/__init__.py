"""Reference workloads and their variants.

A workload is a named recipe: ``options`` (variant keys with defaults and allowed values) and
``create(variant, device)``, which returns an instance the engines drive (see
``workloads/decoder.py`` for the contract). Workloads register by name so a notebook can add
its own with ``register`` and capture it like the built-in ones.

A workload may also carry a ``presentation`` (:class:`Presentation`): how figures and reports
draw its traces. :func:`presentation_of` finds it for a trace from the workload its manifest
names; a trace that names none (an imported capture) gets the empty one, so generic code
never needs to know a workload by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
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


@dataclass(frozen=True)
class PairSpec:
    """How to find a workload's default A/B pair among stored traces: two trace names that
    differ only by the word ``a`` -> ``b`` and hold every word of ``tokens`` (see
    :func:`workbench.viz.find_pair`, which takes these fields as its arguments)."""

    a: str
    b: str
    tokens: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # words a trace of the pair must not hold
    prefer: tuple[str, ...] = ()  # among several pairs, the one whose names hold most of these


@dataclass(frozen=True)
class Presentation:
    """What figures and reports ask a workload; every field may stay empty.

    * ``regions``: range names the workload opens inside a layer, in execution order; a
      timeline fills these ranges with their colour and leaves other ranges grey.
    * ``colors``: region name or variant value -> CSS colour. A trace label is coloured by the
      variant values (keys that are not regions) it holds as words, the first in this order
      when it holds several (``ref-h200-kvwrite-fused-cache-bucketed``).
    * ``default_pair``: the A/B pair a diff widget opens with when given no traces.
    """

    regions: tuple[str, ...] = ()
    colors: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    default_pair: PairSpec | None = None


NO_PRESENTATION = Presentation()


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


def workload_name(meta: Mapping | None) -> str | None:
    """The workload a trace's manifest names (``workload``, else ``capture.workload``), or None."""
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("workload")
    if name is None and isinstance(meta.get("capture"), Mapping):
        name = meta["capture"].get("workload")
    return None if name is None else str(name)


def presentation(workload: Any) -> Presentation:
    """A workload's presentation (by name or object); the empty one for None, an unknown name,
    or a workload that supplies none."""
    if workload is None:
        return NO_PRESENTATION
    if isinstance(workload, str):
        if workload not in _REGISTRY:
            return NO_PRESENTATION
        workload = get(workload)
    found = getattr(workload, "presentation", None)
    return found if isinstance(found, Presentation) else NO_PRESENTATION


def presentation_of(meta: Mapping | None) -> Presentation:
    """The presentation for a trace, from the workload its manifest ``meta`` names."""
    return presentation(workload_name(meta))


def presentations() -> list[Presentation]:
    """The presentations of every registered workload, by name: where to look when there is
    no trace to ask (e.g. for a default pair)."""
    return [p for p in (presentation(n) for n in names()) if p is not NO_PRESENTATION]


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

