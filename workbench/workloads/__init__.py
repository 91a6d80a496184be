"""Reference workloads, user workloads, and their variants.

A workload is a recipe: ``options`` (variant keys -> :class:`Option`, with defaults and
allowed values; a plain value stands for ``Option(default=value)``) and ``create(variant,
device)``, which returns an instance the engines drive. What that instance must have depends
on the engine kind and is written once, in ``contract.CONTRACT`` (``workloads/decoder.py`` is
the reference that has all of it).

``get(ref)`` finds a workload by

* a registered name: a built-in (``decoder``, ``hf``), or one a notebook added with ``register``;
* the name of an entry point in the ``workbench.workloads`` group of an installed
  distribution (``[project.entry-points."workbench.workloads"] mine = "mypkg.mod:WORKLOAD"``);
* a reference ``"pkg.mod:attr"``: the attribute is the workload, or a factory (class or
  function) called with no arguments that returns one (``plugins.py``).

Whatever it found comes back checked and wrapped as a :class:`Workload`, the same object for
the same reference for the life of the process.

A workload may also have ``check(variant)``, which refuses a resolved variant that cannot be
built (a :class:`WorkbenchError`) before any work starts, and carry a ``presentation``
(:class:`Presentation`): how figures and reports draw its traces. :func:`presentation_of`
finds it for a trace from the workload its manifest names; a trace that names none (an
imported capture) gets the empty one, so generic code never needs to know a workload by name.

A variant key ``tp`` greater than 1 makes a capture a job of that many ranks (one process
each, ``capturing/multirank.py``), stored as a trace set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import WorkbenchError
from . import plugins


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


def _checked(ref: str, workload: Any) -> Workload:
    """``workload`` checked for the workload shape, its plain option values made Options."""
    problem = plugins.shape_problem(workload)
    if problem is not None:
        raise WorkbenchError(f"workload {ref}", f"is {problem}")
    options = workload.options
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise WorkbenchError(f"workload {ref}", f"`options` is {type(options).__name__}, "
                                                "not a mapping of name -> Option (or default value)")
    found = getattr(workload, "presentation", None)
    check = getattr(workload, "check", None)
    return Workload(MappingProxyType({k: v if isinstance(v, Option) else Option(v) for k, v in options.items()}),
                    workload.create, found if isinstance(found, Presentation) else NO_PRESENTATION,
                    check if callable(check) else None)


# name -> "module:attribute" (replaced by the workload on first use, so listing workloads
# imports no torch) or a workload registered at run time.
_REGISTRY: dict[str, str | Workload] = {"decoder": "workbench.workloads.decoder:DECODER",
                                         "hf": "workbench.workloads.hf:HF_WORKLOAD"}
# Entry-point names and module:attribute references, once loaded.
_PLUGINS: dict[str, Workload] = {}


def register(name: str, workload: Any) -> None:
    """Make ``workload`` (an object with ``options`` and ``create``) capturable as ``name``."""
    _REGISTRY[name] = _checked(name, workload)


def names() -> list[str]:
    """Registered names and the installed distributions' entry-point names (nothing imported)."""
    return sorted({*_REGISTRY, *plugins.entry_points()})


def get(ref: str) -> Workload:
    """The workload ``ref`` names: registered name, entry-point name or ``module:attribute``."""
    entry = _REGISTRY.get(ref)
    if isinstance(entry, str):
        entry = _REGISTRY[ref] = _checked(ref, plugins.load(entry))
    if entry is not None:
        return entry
    if ref not in _PLUGINS:
        if ":" in ref:
            found = plugins.load(ref)
        elif (ep := plugins.entry_points().get(ref)) is not None:
            found = plugins.load_entry_point(ep)
        else:
            raise WorkbenchError(f"workload {ref}", f"unknown workload (known: {', '.join(names())}; "
                                                    "or a plugin as module:attribute)")
        _PLUGINS[ref] = _checked(ref, found)
    return _PLUGINS[ref]


def workload_name(meta: Mapping | None) -> str | None:
    """The workload a trace's manifest names (``workload``, else ``capture.workload``), or None."""
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("workload")
    if name is None and isinstance(meta.get("capture"), Mapping):
        name = meta["capture"].get("workload")
    return None if name is None else str(name)


def _loaded(ref: str) -> Workload | None:
    """The workload ``ref`` names if getting it imports no code not already imported, else None.

    Drawing a figure must not run a user's module (its import may be slow, need a GPU, or have
    side effects) only to pick colours: registered workloads (our own modules, or objects
    already in memory), plugins this process already loaded, and ``module:attribute``
    references whose module is already imported are found; anything else, an entry-point name
    not yet used included, draws with the empty presentation. (A factory in an imported module
    may still run: factories are meant to be cheap, the work belongs in ``create``.) A plugin
    that fails to load draws the same way: the figure does not need it, and a capture reports
    the failure.
    """
    if ref in _REGISTRY or ref in _PLUGINS or (":" in ref and ref.partition(":")[0] in sys.modules):
        try:
            return get(ref)
        except WorkbenchError:
            return None
    return None


def presentation(workload: Any) -> Presentation:
    """A workload's presentation (by name or object); the empty one for None, a name not loaded
    (see :func:`_loaded`), or a workload that supplies none."""
    if isinstance(workload, str):
        workload = _loaded(workload)
    found = getattr(workload, "presentation", None)
    return found if isinstance(found, Presentation) else NO_PRESENTATION


def presentation_of(meta: Mapping | None) -> Presentation:
    """The presentation for a trace, from the workload its manifest ``meta`` names."""
    return presentation(workload_name(meta))


def presentations() -> list[Presentation]:
    """The presentations of every registered workload, by name, then of the plugins this
    process loaded: where to look when there is no trace to ask (e.g. for a default pair)."""
    found = [presentation(n) for n in sorted(_REGISTRY)] + [w.presentation for w in _PLUGINS.values()]
    return [p for p in found if p is not NO_PRESENTATION]


def torch_dtype(name: str, device) -> tuple:
    """``(torch.device(device), dtype)`` for a variant's ``dtype`` setting: ``auto`` is bfloat16
    on CUDA and float32 on a CPU, any other value the torch dtype of that name."""
    import torch

    device = torch.device(device)
    if name == "auto":
        return device, torch.bfloat16 if device.type == "cuda" else torch.float32
    return device, getattr(torch, name)


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
    """The complete, typed variant: defaults overlaid with ``variant``; unknown keys rejected,
    and the whole checked by the workload's ``check`` where it has one."""
    workload = get(workload_name)
    options: Mapping[str, Option] = workload.options
    variant = dict(variant or {})
    unknown = sorted(set(variant) - set(options))
    if unknown:
        raise WorkbenchError(f"workload {workload_name}",
                             f"unknown variant key(s) {', '.join(unknown)} (known: {', '.join(sorted(options))})")
    resolved = {k: opt.parse(k, variant[k]) if k in variant else opt.default for k, opt in options.items()}
    if workload.check is not None:
        try:
            workload.check(resolved)
        except WorkbenchError:
            raise
        except Exception as e:  # a user's check may raise anything: one line, as create's failures
            raise WorkbenchError(f"workload {workload_name}", f"check failed: {type(e).__name__}: {e}") from e
    return resolved

