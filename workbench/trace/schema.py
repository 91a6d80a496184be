"""The normalized trace: its tables and their types, and :class:`Trace`.

Every reader produces :class:`RawTables`; ``build`` turns them into a :class:`Trace` of these
tables. Everything downstream (analysis, figures, reports) reads only these tables.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from .manifest import SOURCE, section
# Imported from here by viz/notebook.py and tests, as before the manifest had its module.
from .manifest import graph_note, work_units  # noqa: F401
from .names import constant

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

DEFAULTS = {"int64": -1, "bool": False, "category": "", "string": ""}

def empty_table(table: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in SCHEMA[table].items()})


def typed(table: str, df: pd.DataFrame, where: str, only: list[str] | None = None) -> pd.DataFrame:
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
            default = DEFAULTS[dtype]
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

    ``meta`` is the trace's manifest: the source format and tool version, GPU, driver, CUDA,
    torch and git revisions, the command, the variant and timings when the workbench captured
    it (:mod:`.manifest` names its sections and reads them).
    """

    tables: MutableMapping[str, pd.DataFrame]  # a stored trace's are read on first use
    meta: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    path: str | None = None  # the stored trace directory, once saved or loaded
    # The compiler's call sites (``compiled.py``), where the capture recorded them.
    sites: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    # Derived tables (analysis attaches ``projected``), visible to :meth:`sql`.
    views: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    # Analysis results keyed by their parameters, so repeated calls don't recompute.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # View name -> function of the trace that makes it, for views a query names before they
    # exist (analysis registers ``projected``: the trace layer cannot import analysis).
    view_makers: ClassVar[dict[str, Callable[[Trace], pd.DataFrame]]] = {}

    kernels = property(lambda self: self.tables["kernels"], doc="One row per kernel (or CPU work unit).")
    ranges = property(lambda self: self.tables["ranges"], doc="One row per NVTX / record_function range.")
    api = property(lambda self: self.tables["api"], doc="One row per runtime or driver API call.")
    memcpy = property(lambda self: self.tables["memcpy"], doc="One row per memory copy.")
    memset = property(lambda self: self.tables["memset"], doc="One row per memory set.")

    @property
    def label(self) -> str:
        return self.name or section(self.meta, SOURCE).get("file", "trace")

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
        ``memset``; ``compiled``: the compiler's call sites, empty where none were recorded), any derived views analysis has attached (``projected``: each kernel with
        its innermost range, path and layer) and any ``extra`` DataFrames by keyword. One
        read-only statement, reading nothing else (:mod:`.sql`).
        """
        from .compiled import sites_frame
        from .sql import check_query, connection, run_query

        check_query(query, self.label)  # before any view is made for it
        for view_name, make in self.view_makers.items():
            if view_name not in self.views and re.search(rf"\b{re.escape(view_name)}\b", query, re.IGNORECASE):
                self.views[view_name] = make(self)
        with connection() as con:
            for t in TABLES:
                con.register(t, self.tables[t])
            con.register("compiled", self.sites if self.sites is not None else sites_frame([]))
            for view_name, df in {**self.views, **extra}.items():
                con.register(view_name, df)
            return run_query(con, query, self.label)

    def _repr_html_(self) -> str:
        """In a notebook: what it holds and where it came from (:mod:`.card`), from the manifest."""
        from .card import trace_page
        from .display import page_html

        return page_html(*trace_page(self))

    def __repr__(self) -> str:
        from .card import trace_page
        from .display import page_text

        return page_text(*trace_page(self))


# How a kernel was attributed: in a range, launched outside every range, no launch record.
STATUSES = ("range", "no_range", "no_launch")


@dataclass
class RawTables:
    """What a reader gives: table name -> frame with the columns it found (any subset of
    SCHEMA's, REQUIRED ones included), and what it learned of the source and environment."""

    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any]


def set_column(df: pd.DataFrame, col: str, values) -> None:
    """``df[col] = values`` for a new array of the frame's length, without the copy that
    assigning an array makes (a Series on the same index is taken as it is)."""
    df[col] = pd.Series(values, index=df.index, copy=False)
