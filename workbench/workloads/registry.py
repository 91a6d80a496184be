"""Finding workloads: registered names, installed entry points and ``module:attribute``
references (``plugins.py``), each checked once and handed out as a :class:`Workload`; a
variant resolved against its options; a trace's presentation from the workload it names."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..errors import WorkbenchError
from . import plugins
from .drawing import NO_PRESENTATION, Presentation
from .spec import Option, Workload


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
    from ..trace.manifest import workload_name

    return presentation(workload_name(meta))


def presentations() -> list[Presentation]:
    """The presentations of every registered workload, by name, then of the plugins this
    process loaded: where to look when there is no trace to ask (e.g. for a default pair)."""
    found = [presentation(n) for n in sorted(_REGISTRY)] + [w.presentation for w in _PLUGINS.values()]
    return [p for p in found if p is not NO_PRESENTATION]


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
