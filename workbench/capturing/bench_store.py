"""A bench's samples written into stored traces' manifests, as ``timing_bench``.

Each manifest is replaced whole and atomically by the store (``store.write.replace_manifest``):
a reader sees the old manifest or the new one, never part of one, and the tables, and so the
trace's ``content_sha256``, stay as they were. Two benches storing into one trace at once
each write a whole manifest; the later one's stays.
"""

from __future__ import annotations

from pathlib import Path


def store_samples(items: list[tuple[Path, dict]]) -> list[str]:
    """Write each ``(trace directory, timing)`` as that trace's ``timing_bench``; returns
    the directories written. Every manifest is read and checked before any is written."""
    from ..trace.manifest import TIMING_BENCH
    from ..trace.store.read import read_manifest
    from ..trace.store.write import replace_manifest

    updated = [(path, {**read_manifest(path), TIMING_BENCH: timing}) for path, timing in items]
    for path, meta in updated:
        replace_manifest(path, meta, doing="store the bench samples")
    return [str(path) for path, _ in updated]
