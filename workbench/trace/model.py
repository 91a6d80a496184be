"""The normalized trace: a few tables, one row per event, integer nanoseconds on one clock.

Every importer produces a :class:`Trace` through :func:`build`, which checks the tables, sets
types, derives the range tree and joins each kernel to its launching API call. Everything
downstream (analysis, figures, reports) reads only these tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceFormatError, WorkbenchError
from .names import categorical, category_values
from .nesting import nest

# Column -> dtype of each table. Strings are categoricals: names repeat millions of times.
SCHEMA: dict[str, dict[str, str]] = {
    "kernels": {
        "name": "category", "short_name": "category", "kind": "category",
        "start": "int64", "end": "int64", "device": "int64", "stream": "int64",
        "pid": "int64", "correlation": "int64",
        "grid_x": "int64", "grid_y": "int64", "grid_z": "int64",
        "block_x": "int64", "block_y": "int64", "block_z": "int64",
        "graph": "bool",
        "launch_tid": "int64", "launch_start": "int64", "launch_end": "int64",
        "launch_api": "category",
    },
    "ranges": {
        "id": "int64", "name": "category", "start": "int64", "end": "int64",
        "pid": "int64", "tid": "int64", "depth": "int64", "parent": "int64",
        "domain": "category", "path": "string",
    },
    "api": {
        "name": "category", "kind": "category", "start": "int64", "end": "int64",
        "pid": "int64", "tid": "int64", "correlation": "int64",
    },
    "memcpy": {
        "kind": "category", "start": "int64", "end": "int64", "device": "int64",
        "stream": "int64", "pid": "int64", "correlation": "int64", "bytes": "int64",
    },
    "memset": {
        "start": "int64", "end": "int64", "device": "int64", "stream": "int64",
        "pid": "int64", "correlation": "int64", "bytes": "int64",
    },
}

TABLES = tuple(SCHEMA)

# Columns an importer must supply; the rest default (-1, "", False) when a source lacks them.
REQUIRED = {
    "kernels": ("name", "start", "end"),
    "ranges": ("name", "start", "end", "pid", "tid"),
    "api": ("name", "start", "end", "pid", "tid", "correlation"),
    "memcpy": ("start", "end"),
    "memset": ("start", "end"),
}

_DEFAULTS = {"int64": -1, "bool": False, "category": "", "string": ""}


def empty_table(table: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in SCHEMA[table].items()})


def _typed(table: str, df: pd.DataFrame, where: str) -> pd.DataFrame:
    cols = {}
    n = len(df)
    for col, dtype in SCHEMA[table].items():
        if col in df:
            s = df[col]
            if dtype == "int64" and s.dtype != np.int64:
                s = pd.to_numeric(s, errors="coerce")
                if s.isna().any():
                    bad = int(s.isna().sum())
                    raise TraceFormatError(where, f"{table}.{col}: {bad} missing or non-numeric value(s)")
                s = s.astype(np.int64)
            elif dtype == "category" and not isinstance(s.dtype, pd.CategoricalDtype):
                s = s.astype("string").fillna("").astype("category")
            elif dtype == "string" and s.dtype != "string":
                s = s.astype("string").fillna("")
            elif dtype == "bool" and s.dtype != bool:
                s = s.fillna(False).astype(bool)
            cols[col] = s.reset_index(drop=True)
        else:
            default = _DEFAULTS[dtype]
            if dtype == "category":
                cols[col] = pd.Categorical([default] * n) if n else pd.Categorical([])
            elif dtype == "string":
                cols[col] = pd.array([default] * n, dtype="string")
            else:
                cols[col] = np.full(n, default, dtype=dtype)
    return pd.DataFrame(cols)


@dataclass
class Trace:
    """One imported trace: the normalized tables and what is known about where it came from.

    ``meta`` holds the source format and tool version, GPU, driver, CUDA, torch and git
    revisions, the command, the variant and timings when the workbench captured it.
    """

    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    path: str | None = None  # the stored trace directory, once saved or loaded
    # Derived tables (analysis attaches ``projected``), visible to :meth:`sql`.
    views: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    # Analysis results keyed by their parameters, so repeated calls don't recompute.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def kernels(self) -> pd.DataFrame:
        return self.tables["kernels"]

    @property
    def ranges(self) -> pd.DataFrame:
        return self.tables["ranges"]

    @property
    def api(self) -> pd.DataFrame:
        return self.tables["api"]

    @property
    def memcpy(self) -> pd.DataFrame:
        return self.tables["memcpy"]

    @property
    def memset(self) -> pd.DataFrame:
        return self.tables["memset"]

    @property
    def label(self) -> str:
        return self.name or self.meta.get("source", {}).get("file", "trace")

    def sql(self, query: str, **extra: pd.DataFrame) -> pd.DataFrame:
        """Run DuckDB SQL over the tables (``kernels``, ``ranges``, ``api``, ``memcpy``,
        ``memset``), any derived views analysis has attached (``projected``: each kernel with
        its innermost range, path and layer) and any ``extra`` DataFrames by keyword.
        """
        import duckdb

        con = duckdb.connect()
        try:
            for t in TABLES:
                con.register(t, self.tables[t])
            for view_name, df in {**self.views, **extra}.items():
                con.register(view_name, df)
            return con.execute(query).df()
        except duckdb.Error as e:
            raise WorkbenchError(self.label, f"SQL error: {str(e).splitlines()[0]}") from None
        finally:
            con.close()

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}={len(self.tables[t])}" for t in TABLES)
        return f"Trace({self.label!r}, {counts})"


def build(tables: dict[str, pd.DataFrame], meta: dict[str, Any], where: str) -> Trace:
    """Check, type and complete an importer's raw tables into a :class:`Trace`.

    Raises :class:`TraceFormatError` naming ``where`` for an empty trace, negative durations,
    ranges that never end, and missing required columns.
    """
    out = {}
    for t in TABLES:
        df = tables.get(t)
        if df is None or len(df) == 0:
            out[t] = empty_table(t)
            continue
        missing = [c for c in REQUIRED[t] if c not in df]
        if missing:
            raise TraceFormatError(where, f"{t} lack column(s) {', '.join(missing)}")
        out[t] = _typed(t, df, where)
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
    out["ranges"] = _tree(out["ranges"])
    out["kernels"] = _join_launches(out["kernels"], out["api"])
    return Trace(out, meta)


def _tree(ranges: pd.DataFrame) -> pd.DataFrame:
    """Sort ranges by (pid, tid, start) and derive id, parent, depth and path per thread."""
    if not len(ranges):
        return ranges
    ranges = ranges.sort_values(["pid", "tid", "start", "end"], ascending=[True, True, True, False], kind="stable")
    ranges = ranges.reset_index(drop=True)
    n = len(ranges)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    pid = ranges["pid"].to_numpy()
    tid = ranges["tid"].to_numpy()
    start = ranges["start"].to_numpy()
    end = ranges["end"].to_numpy()
    bounds = np.flatnonzero((np.diff(pid) != 0) | (np.diff(tid) != 0)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
        p, d, _ = nest(start[lo:hi], end[lo:hi])
        parent[lo:hi] = np.where(p >= 0, p + lo, -1)
        depth[lo:hi] = d
    ranges["id"] = np.arange(n, dtype=np.int64)
    ranges["parent"] = parent
    ranges["depth"] = depth
    ranges["path"] = pd.array(_paths(category_values(ranges["name"]), parent, depth), dtype="string")
    return ranges


# A path longer than this keeps its first and last PATH_MAX/2 characters around "/…/", so a
# 10,000-deep nesting or a 50 MB range name costs bounded memory per range (not O(depth)).
PATH_MAX = 1024


def _clip(paths: np.ndarray) -> np.ndarray:
    long = np.flatnonzero(np.fromiter(map(len, paths), dtype=np.int64, count=len(paths)) > PATH_MAX)
    if len(long):
        half = PATH_MAX // 2 - 2
        paths = paths.copy()
        paths[long] = [p[:half] + "/…/" + p[-half:] for p in paths[long]]
    return paths


def _paths(names: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    names = _clip(names)
    paths = names.copy()
    order = np.argsort(depth, kind="stable")
    d_sorted = depth[order]
    cuts = np.flatnonzero(np.diff(d_sorted)) + 1
    for level in np.split(order, cuts):
        if depth[level[0]] == 0:
            continue
        # Each level only reads the finished level above it.
        pp = paths[parent[level]]
        paths[level] = _clip(pp + "/" + names[level])
    return paths


def _join_launches(kernels: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Fill launch_tid/start/end/api from the API call with the same (pid, correlation).

    Importers that already know the launch (CPU-only traces) set launch_tid themselves; those
    rows are kept. Kernels launched through cudaGraphLaunch are flagged ``graph``.
    """
    if not len(kernels) or not len(api):
        return kernels
    need = kernels["launch_tid"].to_numpy() < 0
    if not need.any():
        return kernels
    a = api[api["correlation"] >= 0]
    # Correlation ids repeat across processes: match within the same process. A kernel whose
    # pid is unknown (-1, Kineto puts the device there) matches on the correlation alone.
    a = a.drop_duplicates(["pid", "correlation"], keep="first")
    k = kernels.loc[need, ["pid", "correlation"]].reset_index()
    known = k["pid"] >= 0
    m1 = k[known].merge(a[["pid", "correlation", "tid", "start", "end", "name"]], on=["pid", "correlation"], how="left")
    by_corr = a.drop_duplicates(["correlation"], keep="first")
    m2 = k[~known].drop(columns="pid").merge(
        by_corr[["pid", "correlation", "tid", "start", "end", "name"]], on="correlation", how="left"
    )
    m = pd.concat([m1, m2], ignore_index=True)
    found = m["tid"].notna()
    m = m[found]
    idx = m["index"].to_numpy()
    kernels = kernels.copy()
    kernels.loc[idx, "launch_tid"] = m["tid"].astype(np.int64).to_numpy()
    kernels.loc[idx, "launch_start"] = m["start"].astype(np.int64).to_numpy()
    kernels.loc[idx, "launch_end"] = m["end"].astype(np.int64).to_numpy()
    kernels.loc[idx, "pid"] = m["pid"].astype(np.int64).to_numpy()
    names = m["name"]
    api_names = category_values(names) if isinstance(names.dtype, pd.CategoricalDtype) else names.astype(object).to_numpy()
    launch_api = category_values(kernels["launch_api"])
    launch_api[idx] = api_names
    launch = categorical(launch_api)
    kernels["launch_api"] = launch
    # Tested once per distinct API name (np.char on the column would widen every row to the longest name).
    is_graph = np.array(["GraphLaunch" in str(c) for c in launch.categories], dtype=bool)
    graph = is_graph[launch.codes] & (launch.codes >= 0) if len(is_graph) else np.zeros(len(launch), bool)
    kernels["graph"] = kernels["graph"].to_numpy() | graph
    return kernels


_LAYER_DEFAULT = r"(?:^|[^A-Za-z0-9])layers?[._\-]?(\d+)(?![0-9])"


def layer_pattern(pattern: str | None = None) -> re.Pattern:
    """Compiled layer pattern: its first group is the layer index.

    The default maps ``layer_03``, ``layers.3``, ``model.layers.3.self_attn`` and
    ``decoder_layer_12`` to 3, 3, 3 and 12.
    """
    return re.compile(pattern or _LAYER_DEFAULT, re.IGNORECASE)
