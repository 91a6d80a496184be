"""Pick the importer by content (gzip, SQLite and JSON magic), not by file extension."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from ..errors import TraceFormatError, WorkbenchError
from .model import Trace

_SQLITE = b"SQLite format 3\x00"
_GZIP = b"\x1f\x8b"
_NSYS_REP = b"NVIDIA Tegra Profiler Report"


def _head(path: Path, n: int = 64) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(n)
    if head.startswith(_GZIP):
        try:
            with gzip.open(path, "rb") as fh:
                return fh.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None
    return head


def sniff(path: str | os.PathLike) -> str:
    """``"nsys-sqlite"``, ``"nsys-rep"`` or ``"kineto"``; raises for anything else."""
    path = Path(path)
    if path.is_dir():
        raise WorkbenchError(path, "is a directory but not a trace directory (no manifest.json)")
    if not path.exists():
        raise WorkbenchError(path, "no such file or stored trace")
    try:
        head = _head(path)
    except OSError as e:
        raise WorkbenchError(path, f"cannot read: {e.strerror or e}") from None
    if not head:
        raise TraceFormatError(path, "empty file")
    if head.startswith(_SQLITE):
        return "nsys-sqlite"
    # .nsys-rep / .qdrep files begin "NVIDIA Tegra Profiler Report"; any text merely mentioning
    # nsys is not one (it would get a misleading "needs the nsys CLI" error).
    if path.suffix in (".nsys-rep", ".qdrep") or head[:4] in (b"NSYS", b"QDST") or head.startswith(_NSYS_REP):
        return "nsys-rep"
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    raise TraceFormatError(path, "not a trace: expected an Nsight Systems SQLite export, an .nsys-rep, or torch.profiler JSON")


def import_file(path: str | os.PathLike) -> Trace:
    """Import any supported capture file into a normalized :class:`Trace`."""
    from .allocator import return_freed_memory

    path = Path(path)
    kind = sniff(path)
    if kind != "kineto":  # see allocator: where memory binds, not where speed does
        return_freed_memory()
    if kind == "kineto":
        from .kineto import read_kineto

        trace = read_kineto(path)
    else:
        from .nsys import read_nsys, read_nsys_rep

        trace = read_nsys(path) if kind == "nsys-sqlite" else read_nsys_rep(path)
    trace.meta.setdefault("source", {})
    trace.meta["source"].update({"file": path.name, "bytes": path.stat().st_size})
    return trace


def open_trace(src: str | os.PathLike, root: str | os.PathLike | None = None) -> Trace:
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
    return import_file(p)
