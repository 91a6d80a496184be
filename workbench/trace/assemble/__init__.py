"""From a reader's raw tables to a finished :class:`Trace`: check and type the tables, nest
the ranges, join each kernel to its launch, find its innermost range and add up each range's
kernels. Every column is made before the trace is handed back.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import TraceFormatError
from ..inferred.ranges import inferred_ranges
from ..manifest import ATTRIBUTION, GRAPH_KERNELS, INFERRED, graph_note, inferred_note
from ..options import DEFAULT, ImportOptions
from ..schema import REQUIRED, SCHEMA, TABLES, RawTables, Trace, empty_table, set_column, typed
from ..compiled import compiled_note, inductor_kernels, sites_frame
from .attribution import attribute, innermost_ranges
from .compiled_runs import compiled_ranges
from .captured_launches import captured_nodes
from .graph_ranges import capture_ranges, merged
from .launches import graph_launched, join_launches, merge_names
from .nesting import nested
from .paths import range_paths

# Columns build derives, whatever a reader gave: not typed nor defaulted first.
_DERIVED = {
    "kernels": ("range_id",),
    "ranges": ("id", "parent", "depth", "path", "kernels", "gpu_time_ns", "graph_kernels"),
}
# Kernel columns the launch join fills: one a reader does not give is made by the join, not
# defaulted first only to be replaced (defaulted after it, where nothing was joined).
_LAUNCH = ("pid", "launch_tid", "launch_start", "launch_end", "launch_api", "graph")


def build(raw: RawTables, where: str, options: ImportOptions = DEFAULT) -> Trace:
    """Check, type and complete a reader's raw tables into a :class:`Trace`.

    Raises :class:`TraceFormatError` naming ``where`` for an empty trace, negative durations
    and missing required columns. ``raw.tables`` is emptied: the raw frames go as soon as
    they are typed, and columns replaced later are freed at once.
    """
    # What a reader gives of CUDA-graph nodes (nsys --cuda-graph-trace=node): the node each
    # kernel ran as, and the node events. Not trace columns: used here, then dropped.
    nodes = raw.tables.pop("graph_nodes", None)
    # The compiler's call sites (``trace/compiled.py``), where the capture recorded them: kept
    # with the trace, and what compiled kernels are matched to.
    sites = raw.tables.pop("compiled", None)
    sites = sites_frame(sites) if sites is not None else None
    node_of = raw.tables["kernels"].pop("graph_node").to_numpy() if "graph_node" in raw.tables.get("kernels", ()) else None
    out = _checked(raw.tables, where)
    # Two threads: this one joins each kernel to its launch and finds its innermost range;
    # the other nests the ranges (which that needs), then makes the ranges' paths and names
    # the kernels' launch calls. Most of the time of both is spent in numpy and Arrow,
    # without the GIL.
    with options.pool(1, "workbench-tree") as pool:
        nesting = pool.submit(nested, out["ranges"])
        match = join_launches(out["kernels"], out["api"])
        # The defaults of the launch columns the join did not make.
        columns = [c for c in SCHEMA["kernels"] if c not in _DERIVED["kernels"]]
        out["kernels"] = kernels = typed("kernels", out["kernels"], where, columns)
        out["ranges"], parent, depth, timelines = nesting.result()
        set_column(kernels, "range_id", innermost_ranges(kernels, out["ranges"], timelines))
        names = None
        if match is not None:
            names = pool.submit(merge_names, kernels["launch_api"], out["api"]["name"], *match)
            graph = graph_launched(kernels["launch_api"], out["api"]["name"], *match)
            if graph is not None:
                set_column(kernels, "graph", kernels["graph"].to_numpy() | graph)
        ambiguous = 0
        if node_of is None and match is not None:
            # No node per kernel (torch.profiler): the launches recorded at capture stand in.
            found = captured_nodes(kernels, kernels["graph"].to_numpy(), out["ranges"], timelines, out["api"],
                                   match[1])
            if found is not None:
                node_of, nodes, ambiguous = found
        graphs = None
        if node_of is not None:
            ranges, range_id, graphs = capture_ranges(kernels, node_of, out["ranges"], timelines, out["api"],
                                                      nodes if nodes is not None else pd.DataFrame())
            if ranges is not None:
                out["ranges"] = ranges
                parent, depth = ranges["parent"].to_numpy(), ranges["depth"].to_numpy()
                set_column(kernels, "range_id", range_id)
        compiled = None
        if sites is not None and len(sites):
            ranges, range_id, compiled = compiled_ranges(kernels, out["ranges"], sites)
            if ranges is not None:
                out["ranges"] = ranges
                parent, depth = ranges["parent"].to_numpy(), ranges["depth"].to_numpy()
                set_column(kernels, "range_id", range_id)
        inferred = None
        # A CPU-only capture's work units are its top-level CPU ops, timed on threads: no
        # device gaps or launches tell steps apart there, so none are inferred.
        if options.infer and raw.meta.get("source", {}).get("work_units", "kernel") != "cpu_op":
            added, range_id, inferred, base = inferred_ranges(kernels, out["ranges"], options.layers)
            if added is not None:
                ranges, range_id = merged(base, added, range_id)
                for col in ("name", "domain"):  # the inferred names join the trace's categories
                    ranges[col] = ranges[col].astype("string").astype("category")
                out["ranges"] = ranges
                parent, depth = ranges["parent"].to_numpy(), ranges["depth"].to_numpy()
                set_column(kernels, "range_id", range_id)
        paths = pool.submit(range_paths, out["ranges"]["name"], parent, depth) if len(parent) else None
        per_range, totals = attribute(kernels, len(out["ranges"]))
        if paths is not None:
            set_column(out["ranges"], "path", paths.result())
        if names is not None:
            set_column(kernels, "launch_api", names.result())
    for col, values in per_range.items():
        set_column(out["ranges"], col, values)
    # The derived columns were added last: each table in SCHEMA order (no data copied).
    tables = {t: df[list(SCHEMA[t])] for t, df in out.items()}
    meta = {**raw.meta, ATTRIBUTION: totals}
    n_graph = sum(t["graph_kernels"] for t in totals.values())
    if sites is not None and len(sites):
        meta["compiled"] = {"graphs": int(sites["graph"].nunique()), "call_sites": len(sites), **(compiled or {})}
    else:
        generated = inductor_kernels(tables["kernels"]["name"])
        if generated:  # compiled code whose capture did not record what it computes
            meta["compiled"] = {"graphs": 0, "call_sites": 0, "kernels": 0, "generated": generated}
    if "compiled" in meta:
        meta["compiled"]["note"] = compiled_note(meta)
    if inferred is not None:
        meta[INFERRED] = {**inferred, "note": inferred_note({INFERRED: inferred})}
    if n_graph:  # how they were attributed, in the manifest too
        meta[GRAPH_KERNELS] = {"kernels": n_graph, "by_capture": graphs["by_capture"] if graphs else 0,
                               "by_compiler": int((compiled or {}).get("graph_kernels", 0))}
        if ambiguous:
            meta[GRAPH_KERNELS]["ambiguous"] = ambiguous
        meta[GRAPH_KERNELS]["note"] = graph_note(meta)
    return Trace(tables, meta, sites=sites if sites is not None and len(sites) else None)


def _checked(tables: dict[str, pd.DataFrame], where: str) -> dict[str, pd.DataFrame]:
    out = {}
    for t in TABLES:
        df = tables.pop(t, None)
        if df is None or len(df) == 0:
            out[t] = empty_table(t)
            continue
        missing = [c for c in REQUIRED[t] if c not in df]
        if missing:
            raise TraceFormatError(where, f"{t} lack column(s) {', '.join(missing)}")
        out[t] = typed(t, df, where, [c for c in SCHEMA[t] if not _made_later(t, c, df)])
    if not (len(out["kernels"]) or len(out["ranges"]) or len(out["api"])):
        raise TraceFormatError(where, "empty trace: no kernels, ranges or API calls")
    for t in TABLES:
        df = out[t]
        neg = df["end"].to_numpy() < df["start"].to_numpy()
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            what = f" ({df['name'].iloc[i]!s:.80})" if "name" in df else ""
            raise TraceFormatError(
                where, f"{int(neg.sum())} {t} event(s) with negative duration, first at {df['start'].iloc[i]} ns{what}"
            )
    return out


def _made_later(table: str, col: str, raw: pd.DataFrame) -> bool:
    """Whether build makes the column after typing the reader's ``raw`` table: a derived
    column, or a launch column the reader did not give."""
    return col in _DERIVED.get(table, ()) or (table == "kernels" and col in _LAUNCH and col not in raw)
