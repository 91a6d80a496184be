"""Which files make one engine's artifacts, and their JSON.

trtexec writes what it is asked to, under any names; TensorRT Engine Explorer's naming is the
one followed here: for one engine ``X``, ``X.graph.json`` (``--exportLayerInfo``),
``X.profile.json`` (``--exportProfile``), ``X.timing.json`` (``--exportTimes``, often gzipped)
and the metadata ``X.metadata.json``, ``X.build.metadata.json``, ``X.profile.metadata.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from ....errors import TraceFormatError, WorkbenchError
from ..source import GZIP_ERRORS, gzip_error, open_bytes

GRAPH = ".graph.json"
# Role -> the names it may have after the stem, the first present wins.
_BESIDE = {
    "profile": (".profile.json", ".profile.json.gz"),
    "timing": (".timing.json", ".timing.json.gz"),
    "metadata": (".metadata.json",),
    "build_metadata": (".build.metadata.json",),
    "profile_metadata": (".profile.metadata.json",),
}


@dataclass
class Artifacts:
    """One engine's files: the graph, and each other role's file where it is present."""

    graph: Path
    beside: dict[str, Path]

    @property
    def stem(self) -> str:
        return self.graph.name[: -len(GRAPH)] if self.graph.name.endswith(GRAPH) else self.graph.stem

    def sizes(self) -> dict[str, int]:
        return {p.name: p.stat().st_size for p in (self.graph, *self.beside.values())}


def graph_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob(f"*{GRAPH}") if p.is_file())


def find(path: Path) -> Artifacts:
    """The artifacts of ``path``: a graph file, or a folder holding exactly one."""
    if path.is_dir():
        graphs = graph_files(path)
        if not graphs:
            raise WorkbenchError(path, f"no *{GRAPH} (trtexec --exportLayerInfo) in this directory")
        if len(graphs) > 1:
            names = ", ".join(p.name for p in graphs[:4]) + (", ..." if len(graphs) > 4 else "")
            raise WorkbenchError(path, f"holds {len(graphs)} engines' *{GRAPH} ({names}): name one of them")
        path = graphs[0]
    stem = path.name[: -len(GRAPH)] if path.name.endswith(GRAPH) else path.stem
    beside = {}
    for role, suffixes in _BESIDE.items():
        found = next((path.with_name(stem + s) for s in suffixes if path.with_name(stem + s).is_file()), None)
        if found is not None:
            beside[role] = found
    return Artifacts(path, beside)


def load(path: Path, what: str):
    """The JSON of one artifact (plain or gzipped); ``what`` names it in an error."""
    try:
        with open_bytes(path) as fh:
            data = fh.read()
    except GZIP_ERRORS as e:
        if isinstance(e, OSError) and not isinstance(e, EOFError) and e.errno is not None:
            raise WorkbenchError(path, f"cannot read: {e.strerror or e}") from None
        raise gzip_error(path, e) from None
    if not data.strip():
        raise TraceFormatError(path, f"empty file (expected {what})")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise TraceFormatError(path, f"truncated or invalid JSON ({e}); expected {what}") from None
