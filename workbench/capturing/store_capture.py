"""The last steps every capture shares: the raw capture exported, imported, given its
manifest and stored atomically (the raw file kept beside the tables on request)."""

from __future__ import annotations

import os
from pathlib import Path

from .progress import Phases


def store_new(raw: Path, meta: dict, name: str, *, root=None, overwrite: bool = False, keep_raw: bool = False,
              progress: bool = True, compiled: list | None = None):
    """Import ``raw`` (an ``.nsys-rep`` is exported to SQLite first) with the compiler's call
    sites ``compiled`` (``provenance.py``), add ``meta`` (an ``env`` of None is filled in from
    this process) and store it as ``name``; returns the ``Trace``."""
    from ..trace import import_file, save
    from ..trace.manifest import CAPTURE, ENV
    from .env import environment, nsys_version

    phases = Phases(progress)
    source = Path(raw)
    if source.suffix == ".nsys-rep":
        from .nsys_backend import export

        with phases.phase("export"):
            source = export(source, source.parent)
    with phases.phase("import"):
        trace = import_file(source, compiled=compiled)
    if meta.get(ENV) is None:
        meta[ENV] = environment(meta[CAPTURE]["device"], None, cwd=os.getcwd())
    if meta[CAPTURE]["backend"] == "nsys":
        meta[ENV]["nsys"] = nsys_version()
    trace.meta.update(meta)
    with phases.phase("store"):
        save(trace, name, root=root, overwrite=overwrite, raw=[raw] if keep_raw else None)
    return trace
