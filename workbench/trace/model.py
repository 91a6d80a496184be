"""The normalized trace: a few tables, one row per event, integer nanoseconds on one clock.

Every importer produces a :class:`Trace` through :func:`build`, which checks the tables, sets
types, derives the range tree and joins each kernel to its launching API call. Everything
downstream (analysis, figures, reports) reads only these tables.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceFormatError, WorkbenchError
from .names import category_values
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
        # The innermost range enclosing the launching API call on its thread (-1: none).
        "range_id": "int64",
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


def _typed(table: str, df: pd.DataFrame, where: str, only: list[str] | None = None) -> pd.DataFrame:
    cols = {}
    n = len(df)
    for col in only if only is not None else SCHEMA[table]:
        dtype = SCHEMA[table][col]
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
    return pd.DataFrame(cols, copy=False)  # no consolidation: each column stays its own array


@dataclass
class Trace:
    """One imported trace: the normalized tables and what is known about where it came from.

    ``meta`` holds the source format and tool version, GPU, driver, CUDA, torch and git
    revisions, the command, the variant and timings when the workbench captured it.
    """

    tables: MutableMapping[str, pd.DataFrame]  # a stored trace's are read on first use
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

    def columns(self, table: str, cols: list[str]) -> pd.DataFrame:
        """Just ``cols`` of ``table``: a stored trace reads only those from disk."""
        read = getattr(self.tables, "columns", None)
        return read(table, cols) if read is not None else self.tables[table][cols]

    def rows(self, table: str) -> int:
        """Number of rows of ``table``, without reading a stored table."""
        count = getattr(self.tables, "rows", None)
        return count(table) if count is not None else len(self.tables[table])

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
        counts = ", ".join(f"{t}={self.rows(t)}" for t in TABLES)
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
    out["kernels"]["range_id"] = innermost_ranges(out["kernels"], out["ranges"])
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


def _first_per_key(*keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Rows holding the first occurrence (in row order) of each distinct key tuple, sorted by
    key, and the keys' columns at those rows (for ``searchsorted``-style lookups)."""
    order = np.lexsort((np.arange(len(keys[0])),) + tuple(reversed(keys)))
    sk = [k[order] for k in keys]
    new = np.ones(len(order), dtype=bool)
    if len(order):
        new[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in sk])
    return order[new], [k[new] for k in sk]


def _lookup_pairs(table_p, table_c, p, c) -> np.ndarray:
    """Index into the sorted unique (table_p, table_c) pairs of each (p, c) query, -1 if absent.

    The pair is packed into one int64 when both fit (pids < 2**31, correlation ids < 2**32:
    every real trace), else both sides are rank-compressed first so the packing is exact.
    """
    if not len(table_p) or not len(p):
        return np.full(len(p), -1, dtype=np.int64)
    lo = min(int(table_c.min()), int(c.min()))
    hi = max(int(table_c.max()), int(c.max()))
    if lo >= 0 and hi < 2**32 and max(int(table_p.max()), int(p.max())) < 2**31 and min(int(table_p.min()), int(p.min())) >= 0:
        tk, qk = (table_p << 32) | table_c, (p << 32) | c
    else:
        _, inv_p = np.unique(np.concatenate([table_p, p]), return_inverse=True)
        vals_c, inv_c = np.unique(np.concatenate([table_c, c]), return_inverse=True)
        packed = inv_p.reshape(-1).astype(np.int64) * len(vals_c) + inv_c.reshape(-1)
        tk, qk = packed[: len(table_p)], packed[len(table_p):]
    pos = np.searchsorted(tk, qk)
    pos_c = np.minimum(pos, len(tk) - 1)
    return np.where(tk[pos_c] == qk, pos_c, -1)


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
    a_corr = api["correlation"].to_numpy()
    a_pid = api["pid"].to_numpy()
    valid = np.flatnonzero(a_corr >= 0)
    k_pid = kernels["pid"].to_numpy()
    k_corr = kernels["correlation"].to_numpy()
    # Correlation ids repeat across processes: match within the same process (the first API
    # row of that pair). A kernel whose pid is unknown (-1, Kineto puts the device there)
    # matches the first API row with its correlation id in any process.
    rows_pc, (tp, tc) = _first_per_key(a_pid[valid], a_corr[valid])
    rows_c, (tc_only,) = _first_per_key(a_corr[valid])
    match = np.full(len(kernels), -1, dtype=np.int64)
    known = np.flatnonzero(need & (k_pid >= 0))
    hit = _lookup_pairs(tp, tc, k_pid[known], k_corr[known])
    match[known] = np.where(hit >= 0, valid[rows_pc[np.maximum(hit, 0)]], -1)
    unknown = np.flatnonzero(need & (k_pid < 0))
    hit = _lookup_pairs(np.zeros(len(tc_only), np.int64), tc_only, np.zeros(len(unknown), np.int64), k_corr[unknown])
    match[unknown] = np.where(hit >= 0, valid[rows_c[np.maximum(hit, 0)]], -1)
    found = np.flatnonzero(match >= 0)
    m = match[found]
    kernels = kernels.copy(deep=False)  # copy-on-write: the caller's frame is untouched
    for col, src in (("launch_tid", "tid"), ("launch_start", "start"), ("launch_end", "end"), ("pid", "pid")):
        vals = kernels[col].to_numpy().copy()
        vals[found] = api[src].to_numpy()[m]
        kernels[col] = vals
    kernels["launch_api"] = _merge_names(kernels["launch_api"], api["name"], found, m)
    launch = kernels["launch_api"].array
    # Tested once per distinct API name (np.char on the column would widen every row to the longest name).
    is_graph = np.array(["GraphLaunch" in str(c) for c in launch.categories], dtype=bool)
    graph = is_graph[launch.codes] & (launch.codes >= 0) if len(is_graph) else np.zeros(len(launch), bool)
    kernels["graph"] = kernels["graph"].to_numpy() | graph
    return kernels


def _merge_names(target: pd.Series, source: pd.Series, rows: np.ndarray, src_rows: np.ndarray) -> pd.Categorical:
    """``target`` with ``target[rows] = source[src_rows]``, as a categorical whose categories
    are the values present, sorted: what ``categorical()`` gives, without a string per row."""
    t_cats = np.asarray(target.cat.categories.astype(str), dtype=object)
    s_cats = np.asarray(source.cat.categories.astype(str), dtype=object)
    t_codes = target.cat.codes.to_numpy().astype(np.int64)
    s_codes = source.cat.codes.to_numpy().astype(np.int64)[src_rows]
    # One code space: target's categories, then source's, then "" for missing values.
    codes = np.where(t_codes >= 0, t_codes, len(t_cats) + len(s_cats))
    codes[rows] = np.where(s_codes >= 0, s_codes + len(t_cats), len(t_cats) + len(s_cats))
    values = np.concatenate([t_cats, s_cats, np.array([""], dtype=object)])
    used = np.unique(codes)
    uniq, inv = np.unique(values[used], return_inverse=True)
    remap = np.zeros(len(values), dtype=np.int64)
    remap[used] = inv.reshape(-1)
    return pd.Categorical.from_codes(remap[codes], categories=pd.Index(uniq))


def innermost_ranges(kernels: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """Range id of the innermost range around each kernel's launch on its thread (-1: none).

    ``ranges`` must be in ``_tree`` order: sorted by (pid, tid, start), ids 0..n-1.
    """
    out = np.full(len(kernels), -1, dtype=np.int64)
    if not len(ranges) or not len(kernels):
        return out
    kp, kt = kernels["pid"].to_numpy(), kernels["launch_tid"].to_numpy()
    ks = kernels["launch_start"].to_numpy()
    rp, rt = ranges["pid"].to_numpy(), ranges["tid"].to_numpy()
    rs, re_ = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    bounds = np.flatnonzero((np.diff(rp) != 0) | (np.diff(rt) != 0)) + 1
    launched = np.flatnonzero(kt >= 0)
    if not len(launched):
        return out
    # Group the launched kernels by thread with one sort, then look each thread's kernels up
    # in its own block of ranges.
    order = launched[np.lexsort((kt[launched], kp[launched]))]
    gp, gt = kp[order], kt[order]
    cuts = np.flatnonzero((gp[1:] != gp[:-1]) | (gt[1:] != gt[:-1])) + 1
    blocks = {(int(rp[lo]), int(rt[lo])): (lo, hi) for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(ranges)])}
    for lo_k, hi_k in zip(np.r_[0, cuts], np.r_[cuts, len(order)]):
        block = blocks.get((int(gp[lo_k]), int(gt[lo_k])))
        if block is None:
            continue
        lo, hi = block
        _, _, timeline = nest(rs[lo:hi], re_[lo:hi])
        rows = order[lo_k:hi_k]
        local = timeline.innermost_at(ks[rows])
        out[rows] = np.where(local >= 0, local + lo, -1)
    return out


_LAYER_DEFAULT = r"(?:^|[^A-Za-z0-9])layers?[._\-]?(\d+)(?![0-9])"


def layer_pattern(pattern: str | None = None) -> re.Pattern:
    """Compiled layer pattern: its first group is the layer index.

    The default maps ``layer_03``, ``layers.3``, ``model.layers.3.self_attn`` and
    ``decoder_layer_12`` to 3, 3, 3 and 12.
    """
    return re.compile(pattern or _LAYER_DEFAULT, re.IGNORECASE)
