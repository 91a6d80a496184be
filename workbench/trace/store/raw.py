"""The raw capture kept with a stored trace (``save(..., raw=[...])``, ``import --keep-raw``):
the original files (``.nsys-rep``, ``.sqlite``, Kineto ``.json``) under ``<trace>/raw/``,
gzipped unless they already are, each listed in the manifest with its size and SHA-256.

Nothing else in the store reads ``raw/``: the tables are the trace, and its identity
(``content_sha256``) is theirs alone, so keeping the capture or not is the same trace.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from ...errors import WorkbenchError
from ..readers import compression
from ..readers.source import is_gzipped

RAW = "raw"

# What a stored file may be called: the source's name with anything else replaced, never
# hidden (a leading dot), so an odd capture name cannot reach outside ``raw/``.
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")


def check_raw(paths) -> list[Path]:
    """The raw files as paths, each refused before anything is written if it is not a file."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]  # one path, not a sequence of its characters
    out = []
    for p in map(Path, paths):
        if not p.is_file():
            raise WorkbenchError(p, "raw capture file not found" if not p.exists() else "raw capture is not a file")
        out.append(p)
    return out


def store_raw(paths: list[Path], trace_dir: Path) -> list[dict]:
    """Copies ``paths`` into ``trace_dir/raw/`` (gzipped where they are not gzip already, by
    their magic bytes) and returns the manifest's entries for them, in the order given."""
    if not paths:
        return []
    folder = trace_dir / RAW
    folder.mkdir()
    entries, taken = [], set()
    for i, src in enumerate(paths):
        try:
            packed = is_gzipped(src)
        except OSError as e:
            raise WorkbenchError(src, f"cannot read the raw capture: {e.strerror or e}") from None
        name = _UNSAFE.sub("_", src.name).lstrip(".") or "capture"
        name = name if packed else f"{name}.gz"
        if name in taken:  # two captures of one name from different directories
            name = f"{i}-{name}"
        taken.add(name)
        size, digest = _copy(src, folder / name, packed)
        entries.append({"file": f"{RAW}/{name}", "source_name": src.name, "bytes": size, "sha256": digest})
    return entries


class _Hashing:
    """A file being written, hashed and counted as the bytes go by (so the stored file is not
    read back to find its SHA-256)."""

    def __init__(self, fh):
        self.fh, self.sha, self.bytes = fh, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.sha.update(data)
        self.bytes += len(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def _copy(src: Path, dest: Path, packed: bool) -> tuple[int, str]:
    """Copies ``src`` to ``dest`` as it is (``packed``) or gzipped; the stored size and SHA-256."""
    try:
        fin = open(src, "rb")
    except OSError as e:
        raise WorkbenchError(src, f"cannot read the raw capture: {e.strerror or e}") from None
    with fin, open(dest, "xb") as fout:
        out = _Hashing(fout)
        if packed:
            shutil.copyfileobj(fin, out, 1 << 20)
        else:
            # gzip's own default level: the capture is kept for good, so its size counts more
            # than the seconds. mtime 0: the same capture is stored as the same bytes.
            with compression.writer(out, 6, dest.name[:-3]) as gz:
                shutil.copyfileobj(fin, gz, 1 << 20)
    return out.bytes, out.sha.hexdigest()
