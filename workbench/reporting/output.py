"""Check report paths before any work, and write every file atomically (temp file in the same
folder, fsync, ``os.replace``): a failure leaves the old file or nothing, never half a report."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import WorkbenchError


def check_targets(**paths) -> dict[str, Path]:
    """``{"html": Path, "md": Path}`` for the given paths; refuses directories, missing folders
    and two outputs on one path."""
    out: dict[str, Path] = {}
    for kind, p in paths.items():
        if p is None:
            continue
        p = Path(os.fspath(p))
        if str(p) in ("", "."):
            raise WorkbenchError(kind, "empty report path")
        if p.is_dir():
            raise WorkbenchError(p, "is a directory; give a file path for the report")
        parent = p.parent
        if not parent.is_dir():
            raise WorkbenchError(p, f"folder {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise WorkbenchError(p, f"folder {parent} is not writable")
        out[kind] = p
    resolved = [q.resolve() for q in out.values()]
    if len(set(resolved)) < len(resolved):
        raise WorkbenchError(resolved[0], "HTML and Markdown reports would be written to the same file")
    return out


def write_all(files: dict[Path, str]) -> list[str]:
    """Write each text atomically; returns the paths written."""
    written = []
    for path, text in files.items():
        _atomic_write(path, text.encode("utf-8"))
        written.append(str(path))
    return written


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            raise WorkbenchError(path, f"cannot write report: {e.strerror or e}") from None
        raise
