"""Opening a trace: a capture file imported (read, then built), or a stored trace."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import WorkbenchError
from .assemble import build
from .manifest import SOURCE
from .options import DEFAULT, ImportOptions
from .readers import read
from .schema import Trace


def import_file(path: str | os.PathLike, options: ImportOptions = DEFAULT, compiled=None) -> Trace:
    """Import any supported capture file into a normalized :class:`Trace`, every column made.

    ``compiled``: the compiler's call sites recorded with the capture (rows as
    :mod:`.compiled` describes them): kept with the trace, and its compiled kernels matched to
    them (``assemble/compiled_runs.py``)."""
    path = Path(path)
    options.apply()
    raw = read(path, options)
    if compiled is not None and len(compiled):
        raw.tables["compiled"] = compiled
    trace = build(raw, str(path), options)
    trace.meta.setdefault(SOURCE, {})
    trace.meta[SOURCE].update({"file": path.name, "bytes": path.stat().st_size})
    return trace


def open_trace(src: str | os.PathLike, root: str | os.PathLike | None = None,
               options: ImportOptions = DEFAULT) -> Trace:
    """A stored trace (name under ``root`` or its directory) or any importable file."""
    from .store import check_name, default_root, is_trace_dir, load

    p = Path(src)
    if is_trace_dir(p):
        return load(p)
    if not p.exists() and isinstance(src, str) and os.sep not in src:
        stored = Path(root) if root is not None else default_root()
        check_name(src)
        if is_trace_dir(stored / src):
            return load(stored / src)
        raise WorkbenchError(src, f"no such file, and no stored trace of that name under {stored}/")
    return import_file(p, options)
