"""A bench's samples written into stored traces' manifests, as ``timing_bench``.

A manifest is replaced whole and atomically: the updated JSON is written to a hidden file in
the trace's own directory (the same file system), flushed to disk, then renamed over
``manifest.json``, so a reader sees the old manifest or the new one, never part of one. Only
the manifest changes: the tables, and so the trace's ``content_sha256``, stay as they were.
Two benches storing into one trace at once each write a whole manifest; the later one's
stays.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from ..errors import WorkbenchError

KEY = "timing_bench"


def store_samples(items: list[tuple[Path, dict]]) -> list[str]:
    """Write each ``(trace directory, timing)`` as that trace's ``timing_bench``; returns
    the directories written. Every manifest is read and checked before any is written."""
    from ..trace.store.read import read_manifest

    updated = [(path, {**read_manifest(path), KEY: timing}) for path, timing in items]
    for path, meta in updated:
        _replace(path, meta)
    return [str(path) for path, _ in updated]


def _replace(path: Path, meta: dict) -> None:
    from ..trace.store import MANIFEST
    from ..trace.store.write import dump_manifest

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST}-", dir=path)
    except OSError as e:
        raise WorkbenchError(path, f"cannot write to the trace: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w") as fh:
            dump_manifest(meta, fh)
        # mkstemp makes the file private: the new manifest keeps the old one's permissions.
        os.chmod(tmp, stat.S_IMODE(os.stat(path / MANIFEST).st_mode))
        os.replace(tmp, path / MANIFEST)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise WorkbenchError(path / MANIFEST, f"cannot store the bench samples: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
