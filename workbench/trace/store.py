"""The trace store: ``traces/<name>/`` holds one Parquet file per table and ``manifest.json``.

Writes are atomic: a trace is assembled in a hidden temporary directory beside its final
place and renamed into it, so a reader (or a crash, or ``kill -9``) sees the complete new
trace or nothing. Replacing a trace renames the old one away first and deletes it last.
The hidden directory a killed writer leaves behind is removed by a later save once it is an
hour old.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import WorkbenchError
from .schema import SCHEMA, STATUSES, TABLES, Trace

MANIFEST = "manifest.json"
# Hidden directories of a save: the trace being written, and the old one moved aside to be
# deleted where a replace cannot swap the two in one step.
_TMP, _OLD = ".tmp-", ".old-"
_STALE_S = 3600
# 2: kernels carry range_id (format-1 traces get it derived on load).
FORMAT_VERSION = 2
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")


def default_root() -> Path:
    """``$WORKBENCH_TRACES`` or ``./traces``."""
    return Path(os.environ.get("WORKBENCH_TRACES", "traces"))


def check_name(name: str) -> str:
    """Reject names that could escape the store or hide files (``..``, ``/``, leading dot)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise WorkbenchError(
            name, "invalid trace name: use letters, digits and . _ + = - (no path separators, no leading dot, at most 128)"
        )
    return name


def is_trace_dir(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def _json_default(o: Any):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def content_hash(path: Path) -> str:
    """SHA-256 over the table files of a stored trace, in table order: its identity."""
    h = hashlib.sha256()
    for t in TABLES:
        f = path / f"{t}.parquet"
        h.update(t.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def save(trace: Trace, name: str, root: str | os.PathLike | None = None, *, overwrite: bool = False) -> Path:
    """Store ``trace`` as ``<root>/<name>/`` atomically and return that directory."""
    check_name(name)
    root = Path(root) if root is not None else default_root()
    final = root / name
    try:
        root.mkdir(parents=True, exist_ok=True)
        if final.exists() and not overwrite:
            raise WorkbenchError(final, "a trace with this name exists (choose another --name, or overwrite)")
        _sweep(root)
        tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP}{name}-", dir=root))
    except OSError as e:
        raise WorkbenchError(root, f"cannot write to the trace store: {e.strerror or e}") from None
    try:
        # Two tables at a time (Arrow writes without the GIL): the kernels' and the API
        # calls' are about the same size.
        with ThreadPoolExecutor(2, thread_name_prefix="workbench-save") as pool:
            for done in [pool.submit(_write_table, trace.tables[t][list(SCHEMA[t])], tmp / f"{t}.parquet") for t in TABLES]:
                done.result()
        meta = dict(trace.meta)
        meta["name"] = name
        meta["format_version"] = FORMAT_VERSION
        meta["counts"] = {t: int(len(trace.tables[t])) for t in TABLES}
        meta["content_sha256"] = content_hash(tmp)
        with open(tmp / MANIFEST, "w") as fh:
            json.dump(meta, fh, indent=2, sort_keys=True, default=_json_default)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        _publish(tmp, final, overwrite)
    except OSError as e:  # disk full, permissions, a vanished directory: nothing is published
        shutil.rmtree(tmp, ignore_errors=True)
        raise WorkbenchError(final, f"cannot store trace: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    trace.name, trace.path, trace.meta = name, str(final), meta
    return final


def _write_table(df, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    # Integers delta-encoded (timestamps, ids and counters rise or repeat): at 1M kernels
    # 2.5x faster to write, faster to read and 6x smaller than dictionary-then-plain. Fixed
    # writer settings keep files byte-identical for identical tables.
    pq.write_table(table, path, compression="zstd", write_statistics=True,
                   use_dictionary=[c for c in table.column_names if c not in ints],
                   column_encoding=dict.fromkeys(ints, "DELTA_BINARY_PACKED"))


def _sweep(root: Path) -> None:
    """Removes what writers killed mid-save left behind (``kill -9``, a power cut): temporary
    directories untouched for longer than any save takes. A live writer's directory changes
    with every table it writes, so it is never this old."""
    now = time.time()
    for p in [*root.glob(f"{_TMP}*"), *root.glob(f"{_OLD}*")]:
        try:
            stale = p.is_dir() and not p.is_symlink() and now - p.lstat().st_mtime > _STALE_S
        except OSError:  # gone meanwhile: another writer swept it
            continue
        if stale:
            shutil.rmtree(p, ignore_errors=True)


def _publish(tmp: Path, final: Path, overwrite: bool) -> None:
    if not overwrite:
        try:
            os.rename(tmp, final)  # fails if another writer got there first: no clobbering
        except OSError:
            raise WorkbenchError(final, "a trace with this name exists (another writer stored it first)") from None
        return
    # Replace: swap the new directory with the old one in one atomic step (Linux renameat2
    # RENAME_EXCHANGE), so a kill at any point leaves the old or the new trace at ``final``,
    # never neither. Concurrent replacers each swap in turn; the last one's trace stays.
    for _ in range(100):
        swapped = _exchange(tmp, final)
        if swapped:
            shutil.rmtree(tmp, ignore_errors=True)  # now holds the old trace
            return
        if swapped is None:  # no renameat2 here: move the old trace aside, then rename
            old = Path(tempfile.mkdtemp(prefix=f"{_OLD}{final.name}-", dir=final.parent))
            try:
                os.rename(final, old / "trace")
            except FileNotFoundError:
                pass
        try:
            os.rename(tmp, final)
            if swapped is None:
                shutil.rmtree(old, ignore_errors=True)
            return
        except OSError as e:
            if swapped is None:
                shutil.rmtree(old, ignore_errors=True)
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            # another writer published between our two steps: swap with theirs
    raise WorkbenchError(final, "could not replace the trace: other writers keep replacing it")


def _exchange(a: Path, b: Path) -> bool | None:
    """Atomically swap two paths. True: swapped; False: ``b`` does not exist; None: unsupported."""
    global _renameat2
    if _renameat2 is None:
        try:
            import ctypes

            _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError):
            _renameat2 = False
    if _renameat2 is False:
        return None
    import ctypes

    at_fdcwd, rename_exchange = -100, 2
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        return False
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return None
    raise OSError(err, os.strerror(err), os.fspath(b))


_renameat2 = None


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
    man = path / MANIFEST
    if not man.is_file():
        raise WorkbenchError(path, "not a trace directory (no manifest.json)")
    try:
        meta = json.loads(man.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise WorkbenchError(man, f"unreadable manifest: {e}") from None
    if not isinstance(meta, dict):
        raise WorkbenchError(man, "manifest is not a JSON object")
    if not isinstance(meta.get("source", {}), dict):
        raise WorkbenchError(man, "manifest field 'source' is not an object")
    tables = StoredTables(path)
    if not _attribution_ok(meta.get("attribution")):  # stored in format 1, or edited
        meta["attribution"] = tables.attribution()[1]
    return Trace(tables, meta, name=meta.get("name", path.name), path=str(path))


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

        from .build.attribution import innermost_ranges

        if table == "kernels":
            k = self.columns("kernels", ["pid", "launch_tid", "launch_start"])
            r = self.columns("ranges", ["pid", "tid", "start", "end"])
            return pd.Series(innermost_ranges(k, r), name=col)
        return pd.Series(self.attribution()[0][col], name=col)

    def attribution(self):
        """``build.attribution.attribute`` of the stored kernels (what format 1 did not store), once."""
        if self._attribution is None:
            from .build.attribution import attribute

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
    from .schema import typed

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


def list_traces(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the stored traces under ``root``, sorted."""
    root = Path(root) if root is not None else default_root()
    if not root.is_dir():
        return []
    # Only names ``check_name`` accepts: a directory someone made by hand called "\x1b[31m"
    # (a terminal escape) or "a b" is not a trace the workbench stored and is not listed.
    return sorted(p.name for p in root.iterdir() if _NAME.fullmatch(p.name) and ".." not in p.name and is_trace_dir(p))
