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

from .spec import Option, Workload, parse_assignments, torch_dtype
from .drawing import NO_PRESENTATION, PairSpec, Presentation
from .registry import get, names, presentation, presentation_of, presentations, register, resolve

__all__ = ["NO_PRESENTATION", "Option", "PairSpec", "Presentation", "Workload", "get", "names", "parse_assignments",
           "presentation", "presentation_of", "presentations", "register", "resolve", "torch_dtype", "workload_name"]

# ``workload_name`` reads a manifest, so it is written with the manifest's other readers
# (``trace.manifest``); it is named here too, for the views that find a trace's workload, and
# imported on first use, so that importing the workloads (a capture's child process does)
# does not import the trace layer and pandas.
_API = {"workload_name": "workbench.trace.manifest"}


def __getattr__(name: str):
    if name in _API:
        from importlib import import_module

        return getattr(import_module(_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
