"""Where stored traces live and what makes a directory one: the store's root, trace names,
the manifest, and a stored trace's identity (the hash of its tables)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ...errors import WorkbenchError
from ..schema import TABLES


MANIFEST = "manifest.json"


# 2: kernels carry range_id (format-1 traces get it derived on load).
FORMAT_VERSION = 2


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")


def default_root(search: bool = False) -> Path:
    """``$WORKBENCH_TRACES``, else ``./traces``. With ``search`` (for notebooks, which often
    run in ``notebooks/``): the first of ``./traces``, ``../traces`` and the ``traces/``
    beside the package (an editable checkout) that holds stored traces, resolved."""
    env = os.environ.get("WORKBENCH_TRACES")
    if env:
        return Path(env)
    if not search:
        return Path("traces")
    beside = Path(__file__).resolve().parents[3] / "traces"
    for cand in (Path("traces"), Path("..") / "traces", beside):
        if cand.is_dir() and list_traces(cand):
            return cand.resolve()
    return Path("traces").resolve()


def safe_name(text: str, fallback: str) -> str:
    """A legal trace name made from ``text`` (a file or program name): other characters
    replaced, no leading dot, dash or underscore, at most 128; ``fallback`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9._+=-]", "_", text).lstrip("._-")[:128] or fallback


def check_name(name: str) -> str:
    """Reject names that could escape the store or hide files (``..``, ``/``, leading dot)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise WorkbenchError(
            name, "invalid trace name: use letters, digits and . _ + = - (no path separators, no leading dot, at most 128)"
        )
    return name


def is_trace_dir(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def content_hash(path: Path) -> str:
    """SHA-256 over the table files of a stored trace, in table order: its identity.

    Only the tables: a raw capture kept under ``raw/`` is not part of it, so a trace imported
    with ``--keep-raw`` and without it has the same hash (reports list traces by it)."""
    h = hashlib.sha256()
    for t in TABLES:
        f = path / f"{t}.parquet"
        h.update(t.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def list_traces(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the stored traces under ``root``, sorted."""
    root = Path(root) if root is not None else default_root()
    if not root.is_dir():
        return []
    # Only names ``check_name`` accepts: a directory someone made by hand called "\x1b[31m"
    # (a terminal escape) or "a b" is not a trace the workbench stored and is not listed.
    return sorted(p.name for p in root.iterdir() if _NAME.fullmatch(p.name) and ".." not in p.name and is_trace_dir(p))
