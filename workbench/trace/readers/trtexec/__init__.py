"""TensorRT engine artifacts written by ``trtexec``: ``read(path, options) -> RawTables``.

``path`` is an engine's ``X.graph.json`` (``--exportLayerInfo``) with ``X.profile.json``
(``--exportProfile``) beside it, and where present ``X.timing.json[.gz]`` and metadata (see
``files``), or a folder holding one such set.

A profile times layers, not kernels, over the iterations it ran: the trace is one average
inference on a timeline of its own. Each layer is a range (domain ``TensorRT``, thread 0), laid
end to end in execution order, and each profiled layer is one work unit in the kernel table
(kind ``trt_layer``) spanning its average time, launched at its range's start, so the normal
build puts it under its layer. The layers' attributes (type, precision, tensors, tactic,
origin, times) are ``meta["tensorrt"]["layers"]``, a list in execution order; the timing
file's per-iteration latencies are ``meta["timing"]["call_ms"]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...manifest import ENV, SOURCE, TENSORRT, TIMING
from ...options import DEFAULT, ImportOptions
from ...schema import RawTables
from . import files as artifacts
from .layers import graph_layers, joined, profile_records
from .meta import environment, timing

__all__ = ["read", "WORK_UNITS", "DOMAIN"]

WORK_UNITS = "trt_layer"
DOMAIN = "TensorRT"  # as TensorRT names the NVTX domain of its per-layer ranges
_NS_PER_MS = 1_000_000


def read(path: str | Path, options: ImportOptions = DEFAULT) -> RawTables:
    """The raw tables of one engine's trtexec artifacts (``options`` is not needed: the files
    are small)."""
    found = artifacts.find(Path(path))
    layers = graph_layers(artifacts.load(found.graph, "trtexec --exportLayerInfo output"), found.graph)
    if "profile" not in found.beside:
        raise TraceFormatError(found.graph, f"no {found.stem}.profile.json beside it (trtexec --exportProfile): "
                                            "no per-layer times to import")
    profile = found.beside["profile"]
    count, records = profile_records(artifacts.load(profile, "trtexec --exportProfile output"), profile)
    layers = joined(layers, records, found.graph, profile)
    env, engine = environment(found)
    tables = _tables(layers)
    meta = {
        SOURCE: {"format": "trtexec", "tool": "trtexec", "work_units": WORK_UNITS,
                 "files": found.sizes()},
        ENV: env,
        TENSORRT: {**engine, "count": count, "layers": layers, "profiled_layers": len(records),
                   "unprofiled_layers": len(layers) - len(records),
                   "total_ms": sum(r["average_ms"] for r in records)},
    }
    if "timing" in found.beside:
        meta[TIMING] = timing(found.beside["timing"])
    return RawTables(tables, meta)


def _tables(layers: list[dict]) -> dict[str, pd.DataFrame]:
    """One range per layer, end to end; one work unit per profiled layer, inside its range."""
    dur = np.array([round((layer["average_ms"] or 0.0) * _NS_PER_MS) for layer in layers], dtype=np.int64)
    # A layer timed at 0 ms still gets a 1 ns range: an empty range holds no work unit, and its
    # own would then be counted under the next layer.
    span = np.maximum(dur, 1)
    start = np.r_[0, np.cumsum(span)[:-1]].astype(np.int64)
    names = [layer["name"] for layer in layers]
    ranges = pd.DataFrame({"name": names, "start": start, "end": start + span, "pid": 0, "tid": 0,
                           "domain": DOMAIN})
    timed = np.array([layer["profiled"] for layer in layers], dtype=bool)
    s = start[timed]
    units = pd.DataFrame({
        "name": [n for n, t in zip(names, timed) if t], "kind": WORK_UNITS,
        "start": s, "end": s + dur[timed], "device": -1, "stream": -1, "pid": 0, "correlation": -1,
        "launch_tid": 0, "launch_start": s, "launch_end": s, "launch_api": WORK_UNITS,
    })
    units["short_name"] = units["name"]
    return {"ranges": ranges, "kernels": units}
