"""A TensorRT engine's layers as a table: from a trtexec import (its layer information and
profile), or from a capture of the engine running (the kernels under each layer's range).

With ``--profilingVerbosity=detailed`` TensorRT pushes an NVTX range per layer, named after the
layer, in the domain ``TensorRT``; the normal build already puts each kernel under the range
around its launch, so a capture's per-layer kernel counts are those ranges' totals.
:func:`layer_kernels` adds them up per layer name and, given the engine's layer information,
joins each to its layer type and precision.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..errors import WorkbenchError
from ..trace.manifest import TENSORRT, section
from ..trace.readers.trtexec import DOMAIN
from ..trace.readers.trtexec.files import find, load
from ..trace.readers.trtexec.layers import graph_layers
from ..trace.schema import Trace

_COLUMNS = ["index", "name", "type", "precision", "output_format", "tactic", "origin", "avg_ms", "median_ms",
            "percentage", "profiled"]


def engine_layers(trace: Trace) -> pd.DataFrame:
    """One row per layer of a trtexec-imported trace, in execution order: ``index``, ``name``,
    ``type``, ``precision``, ``output_format``, ``tactic``, ``origin``, ``avg_ms``, ``median_ms``,
    ``percentage``, ``profiled``. Usable in SQL: ``trace.sql(q, layers=engine_layers(trace))``."""
    layers = section(trace.meta, TENSORRT).get("layers")
    if not isinstance(layers, list):
        raise WorkbenchError(trace.label, "not a TensorRT engine trace (import trtexec's X.graph.json and "
                                          "X.profile.json to get one)")
    rows = []
    for i, layer in enumerate(layers):
        outputs = layer.get("outputs") or [{}]
        rows.append({"index": i, "name": layer["name"], "type": layer.get("type", ""),
                     "precision": layer.get("precision", ""), "output_format": outputs[0].get("format", ""),
                     "tactic": layer.get("tactic", ""), "origin": layer.get("origin", ""),
                     "avg_ms": _number(layer.get("average_ms")), "median_ms": _number(layer.get("median_ms")),
                     "percentage": _number(layer.get("percentage")), "profiled": bool(layer.get("profiled", True))})
    return pd.DataFrame(rows, columns=_COLUMNS)


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) else float("nan")


def layer_kernels(trace: Trace, graph: Trace | str | os.PathLike | None = None, domain: str = DOMAIN) -> pd.DataFrame:
    """Per layer range of a capture of a TensorRT engine (ranges in NVTX ``domain``): ``name``,
    ``instances`` (how many times it ran), ``kernels``, ``gpu_time_ns`` and
    ``kernels_per_instance``, in the order the layers first ran.

    ``graph`` (the engine's ``X.graph.json``, a folder holding it, or a trtexec-imported trace)
    adds each layer's ``index``, ``type`` and ``precision`` and orders the rows as the engine
    does; a graph layer that never ran is a row with 0 instances, a range the graph does not
    name has no type.
    """
    r = trace.columns("ranges", ["name", "domain", "start", "kernels", "gpu_time_ns"])
    r = r[r["domain"].astype(str) == domain]
    if not len(r):
        raise WorkbenchError(trace.label, f'no ranges in the NVTX domain "{domain}": TensorRT emits one per layer '
                                          "when the engine is built and run with --profilingVerbosity=detailed")
    g = (r.assign(name=r["name"].astype(str))
         .groupby("name", sort=False)
         .agg(first=("start", "min"), instances=("start", "size"), kernels=("kernels", "sum"),
              gpu_time_ns=("gpu_time_ns", "sum"))
         .reset_index().sort_values("first", kind="stable").drop(columns="first"))
    if graph is not None:
        layers = _graph(graph)[["index", "name", "type", "precision"]]
        g = layers.merge(g, on="name", how="outer", sort=False)
        g = g.sort_values("index", kind="stable", na_position="last").reset_index(drop=True)
        g[["instances", "kernels", "gpu_time_ns"]] = g[["instances", "kernels", "gpu_time_ns"]].fillna(0).astype("int64")
        g["index"] = g["index"].astype("Int64")
        g[["type", "precision"]] = g[["type", "precision"]].fillna("")
    g = g.reset_index(drop=True)
    g["kernels_per_instance"] = g["kernels"] / g["instances"].where(g["instances"] > 0)
    return g


def _graph(graph) -> pd.DataFrame:
    """The engine's layers, from a trtexec-imported trace or its layer information file."""
    if isinstance(graph, Trace):
        return engine_layers(graph)
    found = find(Path(graph))
    layers = graph_layers(load(found.graph, "trtexec --exportLayerInfo output"), found.graph)
    return pd.DataFrame([{"index": i, "name": layer["name"], "type": layer["type"], "precision": layer["precision"]}
                         for i, layer in enumerate(layers)])
