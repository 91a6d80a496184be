"""The normalized trace: a few tables, one row per event, integer nanoseconds on one clock.

Every importer produces a :class:`Trace` through :func:`build`, which checks the tables, sets
types, derives the range tree and joins each kernel to its launching API call. Everything
downstream (analysis, figures, reports) reads only these tables.
"""

from __future__ import annotations

import re
import threading
from collections.abc import MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
import pandas as pd

from ..errors import TraceFormatError, WorkbenchError
from .names import code_dtype, constant
from .nesting import nest, thread_blocks
from .search import find

try:
    from ._group_totals import totals as _totals
except ImportError:  # built where the install had a C compiler
    _totals = None

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
        # The kernels whose innermost range this is: count, GPU time, launched by a CUDA graph.
        "kernels": "int64", "gpu_time_ns": "int64", "graph_kernels": "int64",
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

# Columns build derives, whatever an importer gave: not typed nor defaulted first.
_DERIVED = {
    "kernels": ("range_id",),
    "ranges": ("id", "parent", "depth", "path", "kernels", "gpu_time_ns", "graph_kernels"),
}
# Kernel columns the launch join fills: one an importer does not give is made by the join,
# not defaulted first only to be replaced (defaulted after it, where nothing was joined).
_LAUNCH = ("pid", "launch_tid", "launch_start", "launch_end", "launch_api", "graph")


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
                cols[col] = constant(default, n) if n else pd.Categorical([])
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
    # View name -> function of the trace that makes it, for views a query names before they
    # exist (analysis registers ``projected``: the trace layer cannot import analysis).
    view_makers: ClassVar[dict[str, Callable[[Trace], pd.DataFrame]]] = {}

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

        for view_name, make in self.view_makers.items():
            if view_name not in self.views and re.search(rf"\b{re.escape(view_name)}\b", query, re.IGNORECASE):
                self.views[view_name] = make(self)
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
    ranges that never end, and missing required columns. ``tables`` is emptied: the raw
    frames go as soon as they are typed, and columns replaced later are freed at once.
    """
    out = {}
    for t in TABLES:
        df = tables.pop(t, None)
        if df is None or len(df) == 0:
            out[t] = empty_table(t)
            continue
        missing = [c for c in REQUIRED[t] if c not in df]
        if missing:
            raise TraceFormatError(where, f"{t} lack column(s) {', '.join(missing)}")
        out[t] = _typed(t, df, where, [c for c in SCHEMA[t] if not _made_later(t, c, df)])
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
    # The range tree, the launch join and the attribution spend most of their time in numpy
    # and Arrow without the GIL, in two threads: this one joins each kernel to its launch and
    # finds its innermost range; the other nests the ranges (which that needs), then makes
    # the ranges' paths and names the kernels' launch calls. The trace is handed back
    # without those two columns: they are waited for when first asked for (a per-range
    # summary never does; at 10M kernels they take 1.1 s).
    pool = ThreadPoolExecutor(1, thread_name_prefix="workbench-tree")
    pending = {}
    try:
        nesting = pool.submit(_nested, out["ranges"])
        match = _join_launches(out["kernels"], out["api"])
        # The defaults of the launch columns the join did not make.
        columns = [c for c in SCHEMA["kernels"] if c not in _DERIVED["kernels"]]
        out["kernels"] = kernels = _typed("kernels", out["kernels"], where, columns)
        out["ranges"], parent, depth, timelines = nesting.result()
        if len(parent):
            pending["ranges"] = {"path": pool.submit(_paths, out["ranges"]["name"], parent, depth)}
        if match is not None:
            pending["kernels"] = {"launch_api": pool.submit(_merge_names, kernels["launch_api"], out["api"]["name"], *match)}
            graph = _graph_launched(kernels["launch_api"], out["api"]["name"], *match)
            if graph is not None:
                _put(kernels, "graph", kernels["graph"].to_numpy() | graph)
        _put(kernels, "range_id", innermost_ranges(kernels, out["ranges"], timelines))
        per_range, totals = attribute(kernels, len(out["ranges"]))
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise
    pool.shutdown(wait=False)  # the thread ends once the pending columns are made
    for col, values in per_range.items():
        _put(out["ranges"], col, values)
    # The derived columns were added last: each table in SCHEMA order (no data copied).
    frames = {t: df[[c for c in SCHEMA[t] if c not in pending.get(t, ())]] for t, df in out.items()}
    return Trace(BuiltTables(frames, pending), {**meta, "attribution": totals})


class BuiltTables(MutableMapping):
    """The tables of an imported trace, some of whose columns may still be being made on
    another thread (``pending``: table -> column -> Future of its values). A column is
    waited for, and put in its SCHEMA place, when its table or that column is first asked
    for; :meth:`columns` of the others never waits."""

    def __init__(self, frames: dict[str, pd.DataFrame], pending: dict[str, dict[str, Future]]):
        self._frames = frames
        self._pending = pending
        self._lock = threading.Lock()

    def _finish(self, table: str, cols) -> None:
        with self._lock:
            waiting = self._pending.get(table, {})
            for col in [c for c in SCHEMA.get(table, ()) if c in waiting and c in cols]:
                df = self._frames[table]
                order = list(SCHEMA[table])
                at = sum(c in df.columns for c in order[: order.index(col)])
                df.insert(at, col, pd.Series(waiting.pop(col).result(), index=df.index, copy=False))
            if not waiting:
                self._pending.pop(table, None)

    def rows(self, table: str) -> int:
        return len(self._frames[table])

    def columns(self, table: str, cols: list[str]) -> pd.DataFrame:
        self._finish(table, cols)
        return self._frames[table][cols]

    def __getitem__(self, table: str) -> pd.DataFrame:
        self._finish(table, SCHEMA.get(table, ()))
        return self._frames[table]

    def __setitem__(self, table: str, df: pd.DataFrame) -> None:
        with self._lock:
            self._pending.pop(table, None)
            self._frames[table] = df

    def __delitem__(self, table: str) -> None:
        with self._lock:
            self._pending.pop(table, None)
            del self._frames[table]

    def __iter__(self):
        return iter(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    def __getstate__(self) -> dict:  # a copied or pickled trace has every column
        for table in list(self._pending):
            self._finish(table, SCHEMA[table])
        return {"frames": self._frames}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["frames"], {})


def _made_later(table: str, col: str, raw: pd.DataFrame) -> bool:
    """Whether build makes the column after typing the importer's ``raw`` table: a derived
    column, or a launch column the importer did not give."""
    return col in _DERIVED.get(table, ()) or (table == "kernels" and col in _LAUNCH and col not in raw)


def _put(df: pd.DataFrame, col: str, values) -> None:
    """``df[col] = values`` for a new array of the frame's length, without the copy that
    assigning an array makes (a Series on the same index is taken as it is)."""
    df[col] = pd.Series(values, index=df.index, copy=False)


def _is_sorted(keys: list[np.ndarray], ascending: list[bool]) -> bool:
    """Whether the rows are in the order a stable sort by ``keys`` would give them."""
    tied = None
    for k, up in zip(keys, ascending):
        a, b = k[:-1], k[1:]
        wrong = b < a if up else b > a
        if (wrong if tied is None else wrong & tied).any():
            return False
        tied = b == a if tied is None else tied & (b == a)
        if not tied.any():
            return True
    return True


def _nest_threads(ranges: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, dict]:
    """Parent (range id) and depth of each range, and each thread's first range and timeline
    keyed by (pid, tid), for ranges sorted by (pid, tid, start)."""
    n = len(ranges)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    pid, tid = ranges["pid"].to_numpy(), ranges["tid"].to_numpy()
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    timelines = {}
    for lo, hi in thread_blocks(pid, tid):
        p, d, timeline = nest(start[lo:hi], end[lo:hi])
        parent[lo:hi] = np.where(p >= 0, p + lo, -1)
        depth[lo:hi] = d
        timelines[(int(pid[lo]), int(tid[lo]))] = (int(lo), timeline)
    return parent, depth, timelines


def _nested(ranges: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, dict]:
    """Ranges sorted by (pid, tid, start) with their id, parent and depth per thread (the
    path is left to :func:`_paths`), those two arrays, and each thread's first range and
    timeline keyed by (pid, tid)."""
    if not len(ranges):
        return ranges, np.zeros(0, np.int64), np.zeros(0, np.int64), {}
    keys, ascending = ["pid", "tid", "start", "end"], [True, True, True, False]
    if not _is_sorted([ranges[k].to_numpy() for k in keys], ascending):  # often they are
        ranges = ranges.sort_values(keys, ascending=ascending, kind="stable").reset_index(drop=True)
    parent, depth, timelines = _nest_threads(ranges)
    _put(ranges, "id", np.arange(len(ranges), dtype=np.int64))
    _put(ranges, "parent", parent)
    _put(ranges, "depth", depth)
    return ranges, parent, depth, timelines


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


def _paths(names: pd.Series, parent: np.ndarray, depth: np.ndarray):
    """Each range's path, level by level (a level only reads the finished level above it),
    joined by Arrow: no Python string per range until a path needs clipping."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cats = _clip(np.asarray(names.cat.categories.astype(str), dtype=object))
    codes = names.cat.codes.to_numpy()
    own = pc.take(pa.array(np.append(cats, ""), pa.large_string()), np.where(codes >= 0, codes, len(cats)))
    order = np.argsort(depth, kind="stable")
    cuts = np.flatnonzero(np.diff(depth[order])) + 1
    at = np.empty(len(depth), dtype=np.int64)  # each range's place in its level
    levels = []
    for level in np.split(order, cuts):
        at[level] = np.arange(len(level))
        mine = pc.take(own, level)
        if depth[level[0]] > 0:
            mine = pc.binary_join_element_wise(pc.take(levels[-1], at[parent[level]]), mine, pa.scalar("/", pa.large_string()))
            if pc.max(pc.utf8_length(mine)).as_py() > PATH_MAX:
                mine = pa.array(_clip(np.asarray(mine.to_pylist(), dtype=object)), pa.large_string())
        levels.append(mine)
    inverse = np.empty(len(depth), dtype=np.int64)
    inverse[order] = np.arange(len(depth))
    return pd.array(pc.take(pa.chunked_array(levels, pa.large_string()), inverse), dtype="string")


def _match_first(t_pid: np.ndarray | None, t_corr: np.ndarray, q_pid: np.ndarray | None, q_corr: np.ndarray) -> np.ndarray:
    """For each query (pid, correlation id), the first table row (in row order) with the same
    pair, -1 if none; with ``None`` pids, match on the correlation id alone."""
    if not len(t_corr) or not len(q_corr):
        return np.full(len(q_corr), -1, dtype=np.int64)
    pids = [None] if q_pid is None else [q_pid[0]] if q_pid.min() == q_pid.max() else pd.unique(q_pid)
    if len(pids) == 1:
        rows = _rows_of(t_pid, pids[0])
        if rows is not None and not len(rows):  # no call of that process
            return np.full(len(q_corr), -1, dtype=np.int64)
        # One process's ids, rising row after row (nsys's runtime table): a search finds
        # the only row with each id, and needs no memory beyond its answer.
        pos = find(t_corr if rows is None else t_corr[rows], q_corr)
        if pos is not None:
            if rows is not None:
                pos = np.where(pos >= 0, rows[np.maximum(pos, 0)], -1)
            return pos
    lo = min(int(t_corr.min()), int(q_corr.min()))
    span = max(int(t_corr.max()), int(q_corr.max())) - lo + 1
    if span <= len(t_corr) + len(q_corr) + (1 << 20) and len(pids) <= 8:
        # Correlation ids are dense counters: one direct-address table per process, no sort
        # (its memory is bounded by one int64 per row).
        table = np.empty(span, dtype=np.int64)
        out = np.full(len(q_corr), -1, dtype=np.int64)
        for p in pids:
            rows = _rows_of(t_pid, p)
            rows = np.arange(len(t_corr)) if rows is None else rows
            queries = np.arange(len(q_corr)) if len(pids) == 1 else np.flatnonzero(q_pid == p)
            at = t_corr[rows] - lo
            table.fill(len(t_corr))
            table[at] = rows
            # Which row a repeated id keeps is not defined: where one did not keep its
            # first row, take the first the slower way.
            if not (table[at] <= rows).all():
                np.minimum.at(table, at, rows)
            hit = table[q_corr[queries] - lo]
            out[queries] = np.where(hit < len(t_corr), hit, -1)
        return out
    # Sparse ids or many processes: one int64 key per pair (exact: rank-compressed when the
    # raw values do not fit side by side), a stable sort and a binary search.
    if q_pid is None:
        tk, qk = t_corr, q_corr
    else:
        _, inv_p = np.unique(np.concatenate([t_pid, q_pid]), return_inverse=True)
        vals_c, inv_c = np.unique(np.concatenate([t_corr, q_corr]), return_inverse=True)
        packed = inv_p.reshape(-1).astype(np.int64) * len(vals_c) + inv_c.reshape(-1)
        tk, qk = packed[: len(t_corr)], packed[len(t_corr):]
    order = np.argsort(tk, kind="stable")
    sk = tk[order]
    pos = np.minimum(np.searchsorted(sk, qk), len(sk) - 1)
    return np.where(sk[pos] == qk, order[pos], -1)


def _rows_of(t_pid: np.ndarray | None, p) -> np.ndarray | None:
    """The table rows of process ``p``; None for all of them (no subset copied)."""
    if p is None or t_pid.min() == t_pid.max() == p:
        return None
    return np.flatnonzero(t_pid == p)


def _join_launches(kernels: pd.DataFrame, api: pd.DataFrame) -> tuple[np.ndarray | None, np.ndarray] | None:
    """Fill launch_tid/start/end and pid of ``kernels`` (in place: a replaced column is
    freed at once) from the API call with the same (pid, correlation); a column the importer
    did not give is made here, or left out where nothing is joined. Returns the kernels that
    matched (None: all) and their API rows, for :func:`_merge_names`; None if none did.

    Importers that already know the launch (CPU-only traces) set launch_tid themselves; those
    rows are kept.
    """
    n = len(kernels)
    if not n or not len(api):
        return
    need = kernels["launch_tid"].to_numpy() < 0 if "launch_tid" in kernels else np.ones(n, dtype=bool)
    if not need.any():
        return
    a_corr = api["correlation"].to_numpy()
    a_pid = api["pid"].to_numpy()
    k_pid = kernels["pid"].to_numpy() if "pid" in kernels else np.full(n, -1)  # Kineto's: not known
    k_corr = kernels["correlation"].to_numpy()
    # Correlation ids repeat across processes: match within the same process (the first API
    # row of that pair). A kernel whose pid is unknown (-1, Kineto puts the device there)
    # matches the first API row with its correlation id in any process.
    # (Subsets are taken only where needed: at 1M kernels each copy is 8-16 MB.)
    valid = None if a_corr.min() >= 0 else np.flatnonzero(a_corr >= 0)
    if valid is not None and not len(valid):
        return  # no API call has a correlation id: every kernel is left unlaunched
    tp, tc = (a_pid, a_corr) if valid is None else (a_pid[valid], a_corr[valid])
    known = need & (k_pid >= 0)
    unknown = need & ~known
    any_unknown = bool(unknown.any())
    if known.all():
        match = _match_first(tp, tc, k_pid, k_corr)
    elif unknown.all():  # Kineto's kernels: no pid known
        match = _match_first(None, tc, None, k_corr)
    else:
        match = np.full(len(kernels), -1, dtype=np.int64)
        known = np.flatnonzero(known)
        match[known] = _match_first(tp, tc, k_pid[known], k_corr[known])
        unknown = np.flatnonzero(unknown)
        match[unknown] = _match_first(None, tc, None, k_corr[unknown])
    if valid is not None:
        match = np.where(match >= 0, valid[np.maximum(match, 0)], -1)
    hit = match >= 0
    found, m = (None, match) if hit.all() else (np.flatnonzero(hit), match[hit])
    # A kernel whose pid is known matched a call of that very process: only the others'
    # pids change (10M kernels: one 80 MB gather less).
    columns = (("launch_tid", "tid"), ("launch_start", "start"), ("launch_end", "end"))
    for col, src in columns + ((("pid", "pid"),) if any_unknown else ()):
        if found is None:  # every kernel matched: no copy of the old column
            _put(kernels, col, api[src].to_numpy()[m])
            continue
        vals = kernels[col].to_numpy().copy() if col in kernels else np.full(n, _DEFAULTS["int64"])
        vals[found] = api[src].to_numpy()[m]
        _put(kernels, col, vals)
    return found, m


def _graph_launched(target: pd.Series, names: pd.Series, found: np.ndarray | None, m: np.ndarray) -> np.ndarray | None:
    """Which kernels CUDA graphs launched, by the launch API name ``_merge_names`` gives them
    (an API call's name where the join matched one, else the importer's): None where no
    name is a graph launch. Tested once per distinct name, not per kernel."""
    def graph_codes(col: pd.Series) -> np.ndarray:
        # One more entry for a missing value's code (-1), which no graph launch has.
        return np.array(["GraphLaunch" in str(c) for c in col.cat.categories] + [False], dtype=bool)

    source, own = graph_codes(names), graph_codes(target)
    if not (source.any() or (found is not None and own.any())):
        return None
    graph = source[names.cat.codes.to_numpy()[m]]
    if found is None:
        return graph
    out = own[target.cat.codes.to_numpy()]
    out[found] = graph
    return out


def _merge_names(target: pd.Series, source: pd.Series, rows: np.ndarray | None, src_rows: np.ndarray) -> pd.Categorical:
    """``target`` with ``target[rows] = source[src_rows]`` (``rows`` None: all of them), as a
    categorical whose categories are the values present, sorted: what ``categorical()``
    gives, without a string per row."""
    t_cats = np.asarray(target.cat.categories.astype(str), dtype=object)
    s_cats = np.asarray(source.cat.categories.astype(str), dtype=object)
    # One code space: target's categories, then source's, then "" for missing values.
    # int32: a category count never nears 2**31, and these arrays are a row each.
    missing = len(t_cats) + len(s_cats)
    s_codes = source.cat.codes.to_numpy()[src_rows].astype(np.int32)
    s_codes = np.where(s_codes >= 0, s_codes + len(t_cats), missing)
    if rows is None:
        codes = s_codes
    else:
        t_codes = target.cat.codes.to_numpy().astype(np.int32)
        codes = np.where(t_codes >= 0, t_codes, missing)
        codes[rows] = s_codes
    values = np.concatenate([t_cats, s_cats, np.array([""], dtype=object)])
    used = np.flatnonzero(np.bincount(codes, minlength=len(values)))
    uniq, inv = np.unique(values[used], return_inverse=True)
    remap = np.zeros(len(values), dtype=code_dtype(len(uniq)))  # the codes' dtype in the result
    remap[used] = inv.reshape(-1)
    return pd.Categorical.from_codes(remap[codes], categories=pd.Index(uniq), validate=False)


def group_sums(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sum of ``values`` per key in 0..n-1."""
    # float64 holds every partial sum exactly below 2**53 ns (104 days of GPU time); the
    # bound from the extremes needs no row-sized temporary (|values| would).
    if not len(values) or max(-int(values.min()), int(values.max())) * len(values) < 2**53:
        return np.rint(np.bincount(keys, weights=values, minlength=n)).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, keys, values)
    return out


STATUSES = ("range", "no_range", "no_launch")


def attribute(kernels: pd.DataFrame, n_ranges: int) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
    """What the per-range tables are made of, computed once per trace: for each range the
    kernels whose innermost range it is (count, GPU time, CUDA-graph launched), and the same
    totals for kernels in a range, outside any range and without a launch record.

    Stored with the trace, so a per-layer summary of a stored trace needs no kernel rows.
    """
    rid = kernels["range_id"].to_numpy()
    start, end = kernels["start"].to_numpy(), kernels["end"].to_numpy()
    graph = kernels["graph"].to_numpy()
    graphed = graph.any()
    args = (rid, start, end, graph if graphed else None, n_ranges)
    per_range = _range_totals(*args)
    if per_range is None:
        per_range = _range_totals_numpy(*args)
    if int(per_range["kernels"].sum()) == len(rid):  # every kernel in a range (so launched): no mask per status
        zero = {"kernels": 0, "gpu_time_ns": 0, "graph_kernels": 0}
        inside = {"kernels": len(rid), "gpu_time_ns": int(per_range["gpu_time_ns"].sum()),
                  "graph_kernels": int(per_range["graph_kernels"].sum())}
        return per_range, {status: inside if status == "range" else dict(zero) for status in STATUSES}
    dur, has = end - start, rid >= 0
    nolaunch = kernels["launch_tid"].to_numpy() < 0
    totals = {
        status: {"kernels": int(m.sum()), "gpu_time_ns": int(_masked(dur, m).sum()),
                 "graph_kernels": int((graph & m).sum()) if graphed else 0}
        for status, m in zip(STATUSES, (has, ~has & ~nolaunch, nolaunch))
    }
    return per_range, totals


def _range_totals(rid: np.ndarray, start: np.ndarray, end: np.ndarray, graph: np.ndarray | None, n: int):
    """``attribute``'s per-range totals in one pass of the ``_group_totals`` accelerator; None
    where it was not built, or declines (a range id out of 0..n-1 other than -1)."""
    if _totals is None or not all(a.dtype == np.int64 for a in (rid, start, end)):
        return None
    out = {c: np.zeros(n, dtype=np.int64) for c in ("kernels", "gpu_time_ns", "graph_kernels")}
    flag = None if graph is None else np.ascontiguousarray(graph, dtype=bool)
    rows = [np.ascontiguousarray(a) for a in (rid, start, end)]
    return out if _totals(*rows, flag, out["kernels"], out["gpu_time_ns"], out["graph_kernels"]) else None


def _range_totals_numpy(rid: np.ndarray, start: np.ndarray, end: np.ndarray, graph: np.ndarray | None, n: int):
    """:func:`_range_totals` by numpy: a pass per total."""
    has = rid >= 0
    within = _masked(rid, has)
    return {
        "kernels": np.bincount(within, minlength=n).astype(np.int64),
        "gpu_time_ns": group_sums(within, _masked(end - start, has), n),
        "graph_kernels": (np.bincount(rid[has & graph], minlength=n).astype(np.int64) if graph is not None
                          else np.zeros(n, dtype=np.int64)),
    }


def _masked(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``a[mask]``, or ``a`` itself where the mask holds for every row (the usual case): no
    row-sized copy."""
    return a if mask.all() else a[mask]


def innermost_ranges(kernels: pd.DataFrame, ranges: pd.DataFrame, timelines: dict | None = None) -> np.ndarray:
    """Range id of the innermost range around each kernel's launch on its thread (-1: none).

    ``ranges`` must be in ``_nested`` order: sorted by (pid, tid, start), ids 0..n-1;
    ``timelines`` is what ``_nested`` gives with them (computed here when not given).
    """
    def none() -> np.ndarray:
        return np.full(len(kernels), -1, dtype=np.int64)

    if not len(ranges) or not len(kernels):
        return none()
    kp, kt = kernels["pid"].to_numpy(), kernels["launch_tid"].to_numpy()
    ks = kernels["launch_start"].to_numpy()
    if timelines is None:
        timelines = _nest_threads(ranges)[2]
    launched = kt >= 0
    out = None  # made only where kernels of several threads fill it: 80 MB at 10M kernels
    for rows in _by_thread(kp, kt, None if launched.all() else np.flatnonzero(launched)) if launched.any() else ():
        first = 0 if rows is None else rows[0]
        found = timelines.get((int(kp[first]), int(kt[first])))
        if found is None:
            continue
        lo, timeline = found
        local = timeline.innermost_at(ks if rows is None else ks[rows])
        if lo:
            local[local >= 0] += lo
        if rows is None:  # every kernel, launched on one thread
            return local
        if out is None:
            out = none()
        out[rows] = local
    return none() if out is None else out


def _by_thread(pid: np.ndarray, tid: np.ndarray, rows: np.ndarray | None) -> list[np.ndarray | None]:
    """``rows`` (None: all rows) split by (pid, tid), each part in row order: hashing, then a
    radix sort of the small group numbers, or nothing at all for the usual single launching
    thread (all rows stay None: no index array)."""
    if rows is None:
        if pid.min() == pid.max() and tid.min() == tid.max():
            return [None]
        rows = np.arange(len(pid))
    cp, up = pd.factorize(pid[rows])
    ct, ut = pd.factorize(tid[rows])
    groups = cp.astype(np.int64) * len(ut) + ct
    if len(up) * len(ut) > 1:
        sort = np.argsort(groups.astype(np.int16) if len(up) * len(ut) < 2**15 else groups, kind="stable")
        rows, groups = rows[sort], groups[sort]
    cuts = np.flatnonzero(groups[1:] != groups[:-1]) + 1
    return np.split(rows, cuts)


_LAYER_DEFAULT = r"(?:^|[^A-Za-z0-9])layers?[._\-]?(\d+)(?![0-9])"


def layer_pattern(pattern: str | None = None) -> re.Pattern:
    """Compiled layer pattern: its first group is the layer index.

    The default maps ``layer_03``, ``layers.3``, ``model.layers.3.self_attn`` and
    ``decoder_layer_12`` to 3, 3, 3 and 12.
    """
    return re.compile(pattern or _LAYER_DEFAULT, re.IGNORECASE)
