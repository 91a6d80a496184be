"""Opening a stored trace: the manifest and the Parquet footers at once, each table's columns
when first asked for, checked as they are read (types, the range tree, range ids)."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from ...errors import WorkbenchError
from ..compiled import FILE as COMPILED_FILE
from ..manifest import ATTRIBUTION, NAME, SOURCE
from ..schema import SCHEMA, STATUSES, TABLES, Trace
from .layout import MANIFEST


def load(path: str | os.PathLike) -> Trace:
    """Open a stored trace directory.

    Only the manifest and the Parquet footers are read here (so a damaged or swapped file is
    reported at once); table data is read on first use, and only the columns asked for when
    analysis asks through ``Trace.columns``: the per-layer summary of a 10M-kernel trace
    reads four kernel columns, not twenty.
    """
    path = Path(path)
    if not path.is_dir():
        raise WorkbenchError(path, "not a directory")
    meta = read_manifest(path)
    tables = StoredTables(path)
    if not _attribution_ok(meta.get(ATTRIBUTION)):  # stored in format 1, or edited
        meta[ATTRIBUTION] = tables.attribution()[1]
    return Trace(tables, meta, name=meta.get(NAME, path.name), path=str(path), sites=_sites(path))


def _sites(path: Path):
    """The compiler's call sites stored with the trace (None: it has none)."""
    f = path / COMPILED_FILE
    if not f.is_file():
        return None
    import pyarrow.parquet as pq

    from ..compiled import sites_frame

    try:
        return sites_frame(pq.read_table(f).to_pandas())
    except Exception as e:  # pyarrow raises several types for damaged files
        raise WorkbenchError(f, f"damaged table: {str(e).splitlines()[0]}") from None



def read_manifest(path: Path) -> dict:
    """A stored trace directory's manifest, checked: a JSON object whose ``source`` is one."""
    man = path / MANIFEST
    if not man.is_file():
        raise WorkbenchError(path, "not a trace directory (no manifest.json)")
    try:
        meta = json.loads(man.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise WorkbenchError(man, f"unreadable manifest: {e}") from None
    if not isinstance(meta, dict):
        raise WorkbenchError(man, "manifest is not a JSON object")
    if not isinstance(meta.get(SOURCE, {}), dict):
        raise WorkbenchError(man, "manifest field 'source' is not an object")
    return meta


def manifest_or_empty(path: Path) -> dict:
    """:func:`read_manifest`, or ``{}`` where it refuses: for listings, where a trace whose
    manifest is missing or broken is one that matches nothing rather than an error."""
    try:
        return read_manifest(path)
    except WorkbenchError:
        return {}


def _attribution_ok(totals) -> bool:
    return isinstance(totals, dict) and all(isinstance(totals.get(s), dict) for s in STATUSES)


# Columns a format-1 trace (stored before the importer attributed kernels to ranges) lacks;
# they are derived on load.
_DERIVED = {("kernels", "range_id"), ("ranges", "kernels"), ("ranges", "gpu_time_ns"), ("ranges", "graph_kernels")}


class StoredTables(MutableMapping):
    """The tables of a stored trace, read from their Parquet files column by column on demand
    and checked as they are read (types, the range tree, range ids)."""

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self.path = path
        self._loaded: dict[str, Any] = {}
        self._cols: dict[str, dict[str, Any]] = {t: {} for t in TABLES}
        self._files = {}
        for t in TABLES:
            f = path / f"{t}.parquet"
            try:
                pf = pq.ParquetFile(f)
            except FileNotFoundError:
                raise WorkbenchError(path, f"trace is missing {t}.parquet") from None
            except Exception as e:  # pyarrow raises several types for damaged files
                raise WorkbenchError(f, f"damaged table: {str(e).splitlines()[0]}") from None
            have = set(pf.schema_arrow.names)
            missing = [c for c in SCHEMA[t] if c not in have and (t, c) not in _DERIVED]
            if missing:
                raise WorkbenchError(f, f"table lacks column(s) {', '.join(missing)}")
            self._files[t] = (f, pf, have)
        self._tree_checked = False
        self._attribution = None

    def rows(self, table: str) -> int:
        return self._files[table][1].metadata.num_rows

    def columns(self, table: str, cols: list[str]):
        """Just ``cols`` of ``table``, read (and checked) once each."""
        if table in self._loaded:
            return self._loaded[table][cols]
        import pandas as pd

        if table == "ranges":
            self._check_tree()
        cache = self._cols[table]
        need = [c for c in cols if c not in cache]
        if need:
            f, _, have = self._files[table]
            stored = [c for c in need if c in have]
            df = self._read(table, stored) if stored else pd.DataFrame(index=pd.RangeIndex(self.rows(table)))
            for c in stored:
                cache[c] = df[c]
            for c in need:
                if c not in have:
                    cache[c] = self._derive(table, c)
            if table == "kernels" and "range_id" in need:
                self._check_range_ids(cache["range_id"])
        return pd.DataFrame({c: cache[c] for c in cols}, copy=False)

    def _read(self, table: str, cols: list[str]):
        f, pf, _ = self._files[table]
        try:
            df = pf.read(columns=cols).to_pandas()
        except Exception as e:  # pyarrow raises several types for damaged files
            raise WorkbenchError(f, f"damaged table: {str(e).splitlines()[0]}") from None
        if "path" in df:
            df["path"] = df["path"].astype("string")
        return _checked(table, df, f, cols)

    def _derive(self, table: str, col: str):
        import pandas as pd

        from ..assemble.attribution import innermost_ranges

        if table == "kernels":
            k = self.columns("kernels", ["pid", "launch_tid", "launch_start"])
            r = self.columns("ranges", ["pid", "tid", "start", "end"])
            return pd.Series(innermost_ranges(k, r), name=col)
        return pd.Series(self.attribution()[0][col], name=col)

    def attribution(self):
        """``build.attribution.attribute`` of the stored kernels (what format 1 did not store), once."""
        if self._attribution is None:
            from ..assemble.attribution import attribute

            k = self.columns("kernels", ["start", "end", "graph", "launch_tid", "range_id"])
            self._attribution = attribute(k, self.rows("ranges"))
        return self._attribution

    def _check_tree(self) -> None:
        if not self._tree_checked:
            self._tree_checked = True
            try:
                _check_tree(self.columns("ranges", ["id", "parent", "depth", "pid", "tid", "start"]),
                            self._files["ranges"][0])
            except BaseException:
                self._tree_checked = False
                raise

    def _check_range_ids(self, rid) -> None:
        a = rid.to_numpy()
        if len(a) and (a.min() < -1 or a.max() >= self.rows("ranges")):
            raise WorkbenchError(self._files["kernels"][0], "damaged table: range_id refers to a range that does not exist")

    def __getitem__(self, table: str):
        if table not in self._files:
            raise KeyError(table)
        if table not in self._loaded:
            self._loaded[table] = self.columns(table, list(SCHEMA[table]))
            self._cols[table].clear()
        return self._loaded[table]

    def __setitem__(self, table: str, df) -> None:
        if table not in self._files:
            raise KeyError(table)
        self._loaded[table] = df

    def __delitem__(self, table: str) -> None:
        raise TypeError("tables of a stored trace cannot be removed")

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def _checked(table: str, df, f: Path, cols: list[str]):
    """A stored table has the types an import gives it; one edited on disk is re-typed (or
    refused: a NULL time, a name that is a number) before analysis sees it."""
    import numpy as np
    import pandas as pd

    def ok(col, dtype):
        s = df[col]
        if dtype == "category":
            return isinstance(s.dtype, pd.CategoricalDtype)
        if dtype == "string":
            return s.dtype == "string"
        return s.dtype == np.dtype(dtype)

    if all(ok(c, SCHEMA[table][c]) for c in cols):
        return df
    from ..schema import typed

    return typed(table, df, str(f), cols)


def _check_tree(r, f: Path) -> None:
    """The range tree as ``build`` derives it: ids 0..n-1, sorted by (pid, tid, start) per
    thread, parents in range, depth = parent's depth + 1 (so no cycles). Analysis relies on
    all of it; a crafted file that breaks it would index out of bounds or loop forever."""
    import numpy as np

    n = len(r)
    if not n:
        return
    idx = np.arange(n)
    parent, depth = r["parent"].to_numpy(), r["depth"].to_numpy()
    p, t, s = r["pid"].to_numpy(), r["tid"].to_numpy(), r["start"].to_numpy()
    good = bool((r["id"].to_numpy() == idx).all() and ((parent >= -1) & (parent < n) & (parent != idx)).all())
    if good:
        has = parent >= 0
        good = bool((depth[~has] == 0).all() and (depth[has] == depth[parent[has]] + 1).all())
    if good:
        same_p, same_t = p[1:] == p[:-1], t[1:] == t[:-1]
        good = bool(((p[1:] > p[:-1]) | (same_p & ((t[1:] > t[:-1]) | (same_t & (s[1:] >= s[:-1]))))).all())
    if not good:
        raise WorkbenchError(f, "damaged table: the range tree (id, parent, depth or order) is inconsistent")
