"""The readers, one per source format, and the choice among them by content (gzip, SQLite
and JSON magic), not by file extension; a trtexec engine's layer information is also known by
its name (``X.graph.json``, or a folder holding one). Each reader is ``read(path, options) ->
RawTables``."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import TraceFormatError, WorkbenchError
from ..options import DEFAULT, ImportOptions
from ..schema import RawTables
from .source import GZIP_ERRORS, gzip_error, is_gzipped, open_bytes

_SQLITE = b"SQLite format 3\x00"
_NSYS_REP = b"NVIDIA Tegra Profiler Report"


def _head(path: Path, n: int = 64) -> bytes:
    if not is_gzipped(path):
        with open(path, "rb") as fh:
            return fh.read(n)
    try:
        with open_bytes(path) as fh:
            return fh.read(n)
    except GZIP_ERRORS as e:
        raise gzip_error(path, e) from None


def sniff(path: str | os.PathLike) -> str:
    """``"nsys-sqlite"``, ``"nsys-rep"``, ``"kineto"`` or ``"trtexec"``; raises for anything else."""
    path = Path(path)
    if path.is_dir():
        from .trtexec.files import graph_files

        if graph_files(path):
            return "trtexec"
        raise WorkbenchError(path, "is a directory but neither a stored trace (no manifest.json) nor trtexec "
                                   "engine artifacts (no *.graph.json)")
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
        # trtexec's layer information: {"Layers": [...], "Bindings": [...]}.
        if path.name.endswith(".graph.json") or stripped[1:].lstrip(b" \t\r\n").startswith(b'"Layers"'):
            return "trtexec"
        return "kineto"
    raise TraceFormatError(path, "not a trace: expected an Nsight Systems SQLite export, an .nsys-rep, torch.profiler "
                                 "JSON, or trtexec layer information (.graph.json)")


def read(path: Path, options: ImportOptions = DEFAULT) -> RawTables:
    """The raw tables of any supported capture file, read by the reader its content calls for."""
    kind = sniff(path)
    if kind == "kineto":
        from . import kineto

        return kineto.read(path, options)
    if kind == "trtexec":
        from . import trtexec

        return trtexec.read(path, options)
    from . import nsys

    return nsys.read(path, options, rep=kind == "nsys-rep")
