"""Load and check a report's inputs: the traces (with their identity) and an optional sweep.

Everything a report says about a trace comes from here: its name, its content hash (the
manifest's ``content_sha256`` for a stored trace, the file's SHA-256 for a capture file),
and its metadata. Traces of different workloads are refused unless ``allow_mixed``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WorkbenchError


@dataclass
class Input:
    """One trace the report uses."""

    role: str  # "base", "fix", "extra 1", ...
    arg: str  # what the user passed
    trace: Any  # workbench.trace.Trace
    name: str
    sha256: str
    hash_kind: str  # "content_sha256" (stored trace) or "file sha256" (capture file)
    meta: dict = field(default_factory=dict)

    @property
    def workload(self) -> str | None:
        """The workload the manifest names (None for an imported capture)."""
        from ..trace.manifest import workload_name

        return workload_name(self.meta)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_trace(src, role: str, root=None) -> Input:
    """Open a stored trace (name or directory) or a capture file, with its identity."""
    from ..trace import Trace, open_trace
    from ..trace.manifest import CONTENT_SHA256, NAME, lookup
    from ..trace.store import MANIFEST, content_hash, is_trace_dir

    if isinstance(src, Trace):
        trace = src
        if not trace.path:
            raise WorkbenchError(trace.label, "an in-memory trace has no stored identity; save it first "
                                              "(workbench.save) so the report can name its content hash")
        arg = trace.name or trace.path
    else:
        arg = os.fspath(src)
        if not arg:
            raise WorkbenchError(role, "empty trace argument")
        trace = open_trace(arg, root)
    meta = dict(trace.meta)
    if trace.path and is_trace_dir(Path(trace.path)):
        # The hash the report prints must be the tables' real identity: recompute and compare.
        sha = content_hash(Path(trace.path))
        recorded = lookup(meta, CONTENT_SHA256)
        if recorded and recorded != sha:
            raise WorkbenchError(trace.path, f"tables do not match the manifest's content_sha256 ({str(recorded)[:12]}… "
                                             f"recorded, {sha[:12]}… found): modified after it was stored?")
        kind = "content_sha256"
        name = str(lookup(meta, NAME) or trace.name or Path(trace.path).name)
        if not (Path(trace.path) / MANIFEST).is_file():  # pragma: no cover - is_trace_dir checked it
            raise WorkbenchError(trace.path, "stored trace lacks manifest.json")
    else:
        sha = _file_sha256(Path(arg))
        kind = "file sha256"
        name = Path(arg).name
    return Input(role=role, arg=arg, trace=trace, name=name, sha256=str(sha), hash_kind=kind, meta=meta)


def load_traces(base, fix, more=(), *, root=None, allow_mixed: bool = False) -> list[Input]:
    if base is None or fix is None:
        raise WorkbenchError("report", "needs a BASE and a FIX trace")
    roles = ["base", "fix"] + [f"extra {i + 1}" for i in range(len(more))]
    inputs = [load_trace(src, role, root) for src, role in zip([base, fix, *more], roles)]
    check_workloads(inputs, allow_mixed)
    return inputs


def check_workloads(inputs: list[Input], allow_mixed: bool) -> None:
    """Refuse traces of different workloads (when their manifests record one)."""
    known = [(i, i.workload) for i in inputs if i.workload is not None]
    kinds = sorted({w for _, w in known})
    if len(kinds) > 1 and not allow_mixed:
        listing = ", ".join(f"{i.name}={w}" for i, w in known)
        raise WorkbenchError("report", f"traces of different workloads ({listing}); comparing them is "
                                       "meaningless unless intended: pass --allow-mixed (allow_mixed=True)")


@dataclass
class Sweep:
    """Normalized sweep results: one row per (series, context length) point."""

    source: str  # file name
    sha256: str
    rows: list[dict]  # {"series", "context", "metric", "median", "min", "max", "n"}
    meta: dict = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> list[str]:
        return sorted({r["metric"] for r in self.rows})

    @property
    def series(self) -> list[str]:
        return sorted({r["series"] for r in self.rows})


def is_sweep_file(src) -> bool:
    """A ``.json`` file without ``traceEvents`` is sweep results, not a torch.profiler trace."""
    if not isinstance(src, (str, os.PathLike)):
        return False
    p = Path(os.fspath(src))
    if p.suffix.lower() != ".json" or not p.is_file():
        return False
    with open(p, "rb") as fh:
        head = fh.read(1 << 20)
    if b'"traceEvents"' in head or re.search(rb'"ph"\s*:', head):  # Chrome trace, object or bare array
        return False
    return head.lstrip()[:1] in (b"{", b"[")


def load_sweep(path) -> Sweep:
    from ..analysis.sweeps import read
    from .sweep import normalize

    path = Path(path)
    points = read(path)
    rows, meta, not_run = normalize(points, path)
    if not rows:
        raise WorkbenchError(path, "sweep results hold no timed points (need context length and a latency per point)")
    return Sweep(path.name, points.sha256, rows, meta, not_run)
