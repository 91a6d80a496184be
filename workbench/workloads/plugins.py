"""Workloads from outside the package: ``module:attribute`` references and entry points.

A reference names a module (dotted; imported) and an attribute in it (dotted; looked up). The
attribute is the workload itself, or a factory (a class, or any other callable that is not a
workload) that returns one when called with no arguments. Installed distributions offer
workloads by name in the ``workbench.workloads`` entry-point group, whose values are
references; listing those names reads distribution metadata only, and an entry point's module
is imported when its name is first used.

Every failure is one ``WorkbenchError`` line saying which module would not import and why,
which attribute is missing, what a factory raised, or what came back instead of a workload:
a user's plugin is input, so a mistake in it must read like any other bad argument.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from ..errors import WorkbenchError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "workbench.workloads"
SHAPE = "a workload has `options` and `create(variant, device)`"


def shape_problem(obj) -> str | None:
    """Why ``obj`` is not a workload (``"int, not a workload (...)"``), or None when it is one."""
    has_options, has_create = hasattr(obj, "options"), callable(getattr(obj, "create", None))
    if has_options and has_create:
        return None
    if has_options or has_create:
        missing = "`create(variant, device)`" if has_options else "`options`"
        return f"{type(obj).__name__}, not a workload: it has no {missing} ({SHAPE})"
    return f"{type(obj).__name__}, not a workload ({SHAPE})"


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def _dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _import_from_cwd(module_name: str):
    """``module_name`` imported as ``python -m`` finds it: the working directory searched first.
    A console script's ``sys.path`` starts at its own ``bin/``, not at the user's directory, so
    ``workbench capture --call examples.my_model:one_step`` run from a checkout would not find
    ``examples``. The directory is on the path only while the module (and what it imports at
    import time) is imported, so a library call leaves ``sys.path`` as it found it; where it is
    there already (``''`` in a notebook or under ``python -m``) nothing changes."""
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed: nothing there to import
        return importlib.import_module(module_name)
    if any(os.path.abspath(p or os.curdir) == cwd for p in sys.path if isinstance(p, str)):
        return importlib.import_module(module_name)
    sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    finally:
        if cwd in sys.path:
            sys.path.remove(cwd)


def find(ref: str, where: str):
    """The object a ``"pkg.mod:attr"`` reference names: the module imported, the (dotted)
    attribute looked up; each failure one line about ``where``."""
    module_name, sep, attr = ref.partition(":")
    if not (sep and _dotted(module_name) and _dotted(attr)):
        raise WorkbenchError(where, "bad reference: expected module:attribute with dotted names "
                                    "(e.g. mypkg.workloads:WORKLOAD)")
    try:
        found = _import_from_cwd(module_name)
    except ImportError as e:
        raise WorkbenchError(where, f"cannot import module {module_name}: {_first_line(e)}") from e
    except Exception as e:  # a module body may raise anything; it is the user's code failing
        raise WorkbenchError(where, f"importing module {module_name} failed: "
                                    f"{type(e).__name__}: {_first_line(e)}") from e
    parts = attr.split(".")
    for i, part in enumerate(parts):
        try:
            found = getattr(found, part)
        except AttributeError:
            owner = f"module {module_name}" if i == 0 else f"{module_name}:{'.'.join(parts[:i])}"
            raise WorkbenchError(where, f"{owner} has no attribute {part}") from None
    return found


def load(ref: str):
    """The workload ``ref`` (``"pkg.mod:attr"``) names: imported, looked up, made by its factory."""
    where = f"workload {ref}"
    found = find(ref, where)
    # A class always counts as a factory: its `create` is an unbound function, so the class
    # itself would look like a workload and then take `variant` for `self`.
    if not isinstance(found, type):
        problem = shape_problem(found)
        if problem is None:
            return found
        if not callable(found):
            raise WorkbenchError(where, f"{ref} is {problem}")
    try:
        made = found()
    except Exception as e:  # the user's factory may raise anything
        raise WorkbenchError(where, f"{ref}() raised {type(e).__name__}: {_first_line(e)}") from e
    problem = shape_problem(made)
    if problem is not None:
        raise WorkbenchError(where, f"{ref} returned {problem}")
    return made


def entry_points() -> dict[str, EntryPoint]:
    """The group's entry points of the installed distributions by name, the first of a name
    winning; read from metadata, so nothing is imported. Not cached: a distribution installed
    (or a path added) while this process runs is seen on the next call."""
    from importlib import metadata  # only here: importing the workloads package stays light

    found: dict[str, EntryPoint] = {}
    for ep in metadata.entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def load_entry_point(ep: EntryPoint):
    """The workload behind ``ep``; a failure names the entry point and its distribution."""
    try:
        return load(ep.value)
    except WorkbenchError as e:
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "unknown"
        raise WorkbenchError(f"workload {ep.name}",
                             f"entry point {ep.name} ({ep.value}) of distribution {dist}: {e.problem}") from e
