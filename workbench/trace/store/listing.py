"""What the store holds, a row per stored trace read from its manifest alone (no table is
opened): its name, kind (the tool that recorded it), size on disk, when it was stored and its
source (the capture's command line, or the file imported). ``workbench list`` prints these
rows with the trace sets' (``sets.store.set_rows``)."""

from __future__ import annotations

import os
from pathlib import Path

from ..manifest import CAPTURE, SOURCE, STORED_AT, capture_kind, section, source_format
from .layout import default_root, list_traces
from .read import manifest_or_empty

# The importer's format -> the tool that recorded it; any other format is shown as it is.
KINDS = {"nsys-sqlite": "nsys", "nsys-rep": "nsys", "kineto": "torch", "trtexec": "trtexec"}
COLUMNS = ("name", "kind", "size_bytes", "stored_at", "source")


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``: a trace's tables, manifest and kept raw capture."""
    total = 0
    for folder, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(folder, f)).st_size
            except OSError:  # removed while listed
                pass
    return total


def stored_row(path: Path, meta: dict, *, kind: str | None = None, source: str | None = None) -> dict:
    """The row of the stored trace (or, given ``kind`` and ``source``, set) at ``path``.
    ``stored_at`` is None where the manifest does not say (a store written before it did)."""
    if source is None:
        source = _source(meta)
    fmt = source_format(meta)
    stamp = meta.get(STORED_AT)
    return {"name": path.name, "kind": kind or KINDS.get(fmt, fmt or "unknown"), "size_bytes": disk_bytes(path),
            "stored_at": stamp if isinstance(stamp, str) else None, "source": source}


def _source(meta: dict) -> str:
    """What a trace came from, short: a workload and the variant settings its command gave
    (``decoder kv_write=fused ctx=2048 (cudagraph)``), a call's function, a program's command
    line, or ``import FILE``."""
    cap = section(meta, CAPTURE)
    words = cap.get("command")
    if capture_kind(meta) == "workload" and isinstance(words, list):
        given = [str(v) for w, v in zip(words, words[1:]) if w == "--variant"]
        return " ".join([str(cap.get("workload")), *given]) + (f" ({cap['engine']})" if cap.get("engine") else "")
    if capture_kind(meta) == "call" and cap.get("target"):
        return f"call {cap['target']}"
    if cap.get("command_line"):
        return str(cap["command_line"])
    file = section(meta, SOURCE).get("file")
    return f"import {file}" if file else ""


def trace_rows(root: str | os.PathLike | None = None) -> list[dict]:
    """A :func:`stored_row` per stored trace under ``root``, by name."""
    root = Path(root) if root is not None else default_root()
    return [stored_row(root / n, manifest_or_empty(root / n)) for n in list_traces(root)]
