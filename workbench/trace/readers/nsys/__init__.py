"""Nsight Systems importer: the SQLite export (plain or gzipped) and ``.nsys-rep`` via
``nsys export``.

Tables read (and the columns read from each, declared up front as nsys recipes do):
CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME (runtime *and* driver calls, e.g.
Triton's cuLaunchKernelEx), NVTX_EVENTS, CUPTI_ACTIVITY_KIND_MEMCPY/MEMSET, StringIds, and the
TARGET_INFO_* / META_DATA_* tables for the environment.

The event tables are read straight from the file's pages by a C accelerator, two at a time
on worker threads; any table that path cannot vouch for is read row by row through
``sqlite3``, which also words every error about bad input.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, as_completed
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from ....errors import TraceFormatError, WorkbenchError
from ...options import DEFAULT, ImportOptions
from ...schema import RawTables
from ...names import categorical, categorical_take, constant

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"

COLUMNS = {
    KERNEL: {"required": ("start", "end", "correlationId", "globalPid", "deviceId", "streamId"),
             "optional": ("demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "graphNodeId")},
    RUNTIME: {"required": ("start", "end", "globalTid", "correlationId", "nameId"), "optional": ()},
    NVTX: {"required": ("start", "end", "eventType", "globalTid"), "optional": ("text", "textId", "domainId", "endGlobalTid")},
    MEMCPY: {"required": ("start", "end", "globalPid"), "optional": ("deviceId", "streamId", "correlationId", "bytes", "copyKind")},
    MEMSET: {"required": ("start", "end", "globalPid"), "optional": ("deviceId", "streamId", "correlationId", "bytes")},
}

# NVTX event types: push/pop and start/end ranges (plain and NVTX-text variants), domain create.
_PUSHPOP = (59, 70)
_STARTEND = (60, 71)
_DOMAIN_CREATE = 75

# Rows read of each table, and the columns holding TEXT (every other column read holds integers).
WHERE_TYPES = {NVTX: _PUSHPOP + _STARTEND + (_DOMAIN_CREATE,)}
WHERE = {t: f"where eventType in ({', '.join(map(str, types))})" for t, types in WHERE_TYPES.items()}
TEXT = {NVTX: ("text",)}


def _pid(global_id: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # nsys packs (vm, pid, tid) into globalTid/globalPid: pid lives in bits 24..55.
    pid = np.right_shift(global_id, 24, out=out)
    pid &= 0xFFFFFFFF  # in place: one temporary less, at 10M rows 80 MB
    return pid


def _own_pid(global_pid: np.ndarray) -> np.ndarray:
    """pid made in place of ``global_pid``, a private column read from the file."""
    return _pid(global_pid, out=global_pid)


def _tid(global_tid: np.ndarray) -> np.ndarray:
    return global_tid & 0xFFFFFF


def _pid_tid(global_tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pid and tid, the tid made in place of ``global_tid`` (a private column read from the
    file): one 160 MB temporary less for 20M API calls."""
    pid = _pid(global_tid)
    global_tid &= 0xFFFFFF
    return pid, global_tid


def _uri(db_path: Path) -> str:
    # Percent-encoded: a '?' or '#' in a file name would otherwise end the path, and SQLite
    # would open (even create) some other file, without the ?mode=ro that follows.
    return f"file:{quote(os.path.abspath(db_path))}?mode=ro"


@contextmanager
def _sqlite_file(path: Path):
    """Yield a path SQLite can open: gzipped exports are unpacked to a private temp file."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if not gz:
        yield path
        return
    fd, tmp = tempfile.mkstemp(suffix=".sqlite", prefix="workbench-")
    try:
        with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as src:
            try:
                shutil.copyfileobj(src, out, 1 << 20)
            except (OSError, EOFError, zlib.error) as e:
                raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None
        yield Path(tmp)
    finally:
        os.unlink(tmp)


def _select_sql(table: str, cols: list[str]) -> str:
    names = ", ".join(f'"{c}"' for c in cols)
    return f'select {names} from "{table}" {WHERE.get(table, "")}'


def _frame(names: list[str], cols: list[np.ndarray]) -> pd.DataFrame:
    if not cols:
        return pd.DataFrame({n: [] for n in names})
    # Not copied (100s of MB): these frames are only read, into new columns of the trace.
    return pd.DataFrame(dict(zip(names, cols)), copy=False)


class _Db:
    def __init__(self, con: sqlite3.Connection, where: Path):
        self.con, self.where = con, where
        self._pages: _Pages | None = None
        self._columns: dict[str, set[str]] = {}  # asked for by prefetch and read alike
        try:
            self.tables = {r[0] for r in con.execute("select name from sqlite_master where type in ('table','view')")}
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(where, f"not a readable SQLite database ({e})") from None

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {r[1] for r in self.con.execute(f'pragma table_info("{table}")')}
        return self._columns[table]

    def wanted(self, table: str) -> list[str]:
        """The columns of ``table`` to read; raises if a required one is missing."""
        have = self.columns(table)
        spec = COLUMNS[table]
        missing = [c for c in spec["required"] if c not in have]
        if missing:
            raise TraceFormatError(self.where, f"table {table} lacks column(s) {', '.join(missing)}")
        return [c for c in spec["required"] + spec["optional"] if c in have]

    def prefetch(self, db_path: Path, options: ImportOptions) -> None:
        """Start reading the event tables from the file's pages. Only plain tables qualify:
        with no index (nsys creates none) a table can only be scanned in rowid order, which is
        the order of its pages. Problems found here are left for :meth:`read` to report, in
        its order."""
        try:
            from . import _sqlite_pages  # noqa: F401 - built by pip install where a C compiler is
        except ImportError:
            return
        if KERNEL not in self.tables or any(
            os.path.exists(f"{db_path}{suffix}") and os.path.getsize(f"{db_path}{suffix}") for suffix in ("-journal", "-wal")
        ):
            return
        try:
            schema = self.con.execute("select type, name, tbl_name, rootpage, sql from sqlite_master").fetchall()
            indexed = {str(tbl).lower() for kind, _, tbl, _, _ in schema if kind == "index"}
            jobs = {}
            for kind, name, _, root, sql in schema:
                if (name in COLUMNS and kind == "table" and str(name).lower() not in indexed
                        and str(sql).upper().startswith("CREATE TABLE") and isinstance(root, int)):
                    try:
                        job = _Pages.job(self.con, name, str(sql), root, self.wanted(name))
                    except TraceFormatError:
                        continue
                    if job is not None:
                        jobs[name] = job
        except (sqlite3.Error, UnicodeDecodeError):
            return
        if jobs:
            # Kernels first, whatever the file's order (nsys creates that table late): its wide
            # rows take longest to decode, and the main thread's turn for it comes last.
            self._pages = _Pages(db_path, {t: jobs[t] for t in COLUMNS if t in jobs}, options)

    def close(self) -> None:
        if self._pages is not None:
            self._pages.close()

    def read_order(self, tables: list[str]) -> Iterator[tuple[str, bool]]:
        """``tables`` in the order to :meth:`read` them: those sqlite3 reads first (while the
        reader threads decode the others), then each as its reader thread finishes; each
        with whether its pages were read, so that :meth:`read` needs no sqlite3 (which only
        the connection's own thread may use)."""
        jobs = self._pages.pending() if self._pages is not None else {}
        yield from ((t, False) for t in tables if t not in jobs)
        table_of = {jobs[t]: t for t in tables if t in jobs}
        for done in as_completed(table_of):
            yield table_of[done], done.exception() is None and done.result() is not None

    def read(self, table: str) -> pd.DataFrame:
        cols = self.wanted(table)
        got = self._pages.take(table) if self._pages is not None else None
        if got is not None and table in WHERE_TYPES:
            etype = got[cols.index("eventType")]
            if etype.dtype != np.int64:  # NULLs: rows no type matches
                etype = etype.to_numpy(dtype=np.int64, na_value=-1)
            keep = np.isin(etype, WHERE_TYPES[table])
            if not keep.all():  # often every row is a range (2M rows x 8 columns copied)
                got = [c[keep] for c in got]
        return _frame(cols, self._select(table, cols) if got is None else got)

    def _select(self, table: str, cols: list[str]) -> list[np.ndarray]:
        sql = _select_sql(table, cols)
        try:
            out = self._select_chunked(sql, len(cols))
            if out is None:  # columns whose type changes along the table: convert them whole
                rows = self.con.execute(sql).fetchall()
                out = [np.array(c, dtype=object) if _is_text(c) else np.array(c) for c in zip(*rows)]
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(self.where, f"cannot read {table} ({e})") from None
        return out

    _CHUNK_ROWS = 1 << 18

    def _select_chunked(self, sql: str, ncols: int):
        """Rows turned into numpy columns a chunk at a time, so the Python row objects of a
        large table never exist all at once. Gives exactly what converting each whole column
        gives (text decided on the first 1000 values), or None when the chunks disagree on a
        column's type and the caller must convert whole columns."""
        cur = self.con.execute(sql)
        parts: list[list[np.ndarray]] = [[] for _ in range(ncols)]
        text: list[bool] | None = None
        while True:
            rows = cur.fetchmany(self._CHUNK_ROWS)
            if not rows:
                break
            cols = list(zip(*rows))
            del rows
            if text is None:
                text = [_is_text(c) for c in cols]
            for i, c in enumerate(cols):
                parts[i].append(np.array(c, dtype=object) if text[i] else np.array(c))
        if text is None:
            return []
        out = []
        for p in parts:
            if len({a.dtype for a in p}) != 1:
                return None
            out.append(p[0] if len(p) == 1 else np.concatenate(p))
        return out

    def strings(self) -> dict[int, str]:
        if "StringIds" not in self.tables:
            return {}
        try:
            return dict(self.con.execute("select id, value from StringIds"))
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(self.where, f"cannot read StringIds ({e})") from None


class _Pages:
    """Event tables read straight from the file's pages by the ``_sqlite_pages`` accelerator
    (tens of milliseconds per million rows, where SQLite's own row stepping costs about a
    second), two at a time: it decodes without holding the GIL.

    A fast path only: :meth:`take` gives None, and the table is read through sqlite3 (with its
    results and its error messages), whenever the accelerator declines (a damaged page, a
    value of a type the column should not hold) and for tables whose records it cannot map
    to columns up front: a WITHOUT ROWID table, hidden or generated columns, a column with a
    default (rows written before an ALTER TABLE hold none), or changes still in a journal or
    WAL file. Text is decoded as the sqlite3 connection decodes it (invalid UTF-8 replaced)."""

    def __init__(self, db_path: Path, jobs: dict[str, tuple[int, list[int], list[bool], int]], options: ImportOptions):
        self._path = os.fsencode(db_path)
        self._pool = options.pool(2, "workbench-nsys")
        self._jobs = {}
        try:
            for table, job in jobs.items():
                self._jobs[table] = self._pool.submit(self._read, *job)
        except RuntimeError:  # no thread to be had (a process limit): sqlite3 reads the rest
            pass

    def pending(self) -> dict[str, Future]:
        return dict(self._jobs)

    def take(self, table: str) -> list[np.ndarray] | None:
        job = self._jobs.pop(table, None)
        return None if job is None else job.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _read(self, root: int, index: list[int], text: list[bool], rowid: int) -> list[np.ndarray] | None:
        from ._sqlite_pages import read_table

        order = sorted(range(len(index)), key=index.__getitem__)
        got = read_table(self._path, root, [index[i] for i in order], [text[i] for i in order], rowid)
        if got is None:
            return None
        values, nulls = got
        out: list[np.ndarray] = [np.empty(0)] * len(index)
        for i, v, null in zip(order, values, nulls):
            if text[i]:
                out[i] = _dictionary(np.frombuffer(v[0], np.int32), v[1])
            elif null is None:
                out[i] = np.frombuffer(v, np.int64)
            else:
                # Nullable integers, read as sqlite3's ints and None are (to_numeric, isna,
                # fillna) without a Python object per row: kernels' graphNodeId is NULL in
                # every row not launched by a graph.
                out[i] = pd.arrays.IntegerArray(np.frombuffer(v, np.int64), np.frombuffer(null, np.bool_))
        return out

    @staticmethod
    def job(con: sqlite3.Connection, table: str, sql: str, root: int, cols: list[str]):
        """What :meth:`_read` needs to read ``cols`` of ``table``, or None where sqlite3 must."""
        if "WITHOUT ROWID" in " ".join(sql.upper().split()):
            return None
        info = con.execute(f'pragma table_xinfo("{table}")').fetchall()  # cid, name, type, notnull, dflt, pk, hidden
        if any(r[6] for r in info):
            return None
        pos = {r[1]: i for i, r in enumerate(info)}
        if any(info[pos[c]][4] is not None for c in cols):
            return None
        pk = [r for r in info if r[5]]
        # An INTEGER PRIMARY KEY is the rowid: its record holds NULL.
        rowid = pos[pk[0][1]] if len(pk) == 1 and str(pk[0][2]).upper() == "INTEGER" else -1
        return int(root), [pos[c] for c in cols], [c in TEXT.get(table, ()) for c in cols], rowid


def _dictionary(codes: np.ndarray, values: list[str]) -> pd.Categorical:
    """A text column as the reader gives it (each row's index into the distinct values, -1
    for NULL), as a categorical. Distinct bytes can decode to one string (invalid UTF-8 is
    replaced): such values become one category."""
    uniq = pd.Index(values, dtype=object)
    if not uniq.is_unique:
        inv, uniq = pd.factorize(uniq)
        codes = np.append(inv, -1).astype(np.int32)[codes]
    return pd.Categorical.from_codes(codes, categories=uniq, validate=False)


def _is_text(col) -> bool:
    return any(isinstance(v, (str, bytes)) for v in col[:1000])


def _ints(df: pd.DataFrame, col: str, where: Path, table: str, default: int | None = None) -> np.ndarray:
    if col not in df:
        return np.full(len(df), -1 if default is None else default, dtype=np.int64)
    if df[col].dtype == np.int64:  # INTEGERs only: nothing to convert or refuse
        # The array itself, not to_numpy()'s read-only view: ``df`` is a private intermediate
        # whose columns are handed on to the trace's frames without a copy.
        return np.asarray(df[col].array)
    # Nullable dtypes: ints beside NULLs stay exact (through float64, 2**53 + 1 would not).
    s = pd.to_numeric(pd.Series(df[col]), errors="coerce", dtype_backend="numpy_nullable")
    if s.isna().any():
        if default is None:
            raise TraceFormatError(where, f"{table}.{col}: {int(s.isna().sum())} NULL or non-numeric value(s)")
        s = s.fillna(default)
    return _int64(s.to_numpy(), where, f"{table}.{col}")


def _int64(a: np.ndarray, where: Path, what: str) -> np.ndarray:
    """Cast to int64, refusing values (REAL in an INTEGER column) that int64 cannot hold."""
    if a.dtype.kind == "f" and len(a) and np.nanmax(np.abs(a)) >= 2.0**63:
        raise TraceFormatError(where, f"{what}: value out of range ({a[np.nanargmax(np.abs(a))]:.6g})")
    return a.astype(np.int64)


def _names(ids: np.ndarray, strings: dict[int, str], where: Path, what: str, clean=None) -> pd.Categorical:
    """``categorical(clean(strings[ids]))``: strings are looked up (and cleaned) once per
    distinct id, and the rows get their codes in one pass over the ids."""
    ids = np.asarray(ids, dtype=np.int64)
    uniq, take = _distinct_ids(ids)
    vals = np.empty(len(uniq), dtype=object)
    for j, v in enumerate(uniq.tolist()):
        s = strings.get(v)
        if s is None:
            missing = {u for u in uniq.tolist() if strings.get(u) is None}  # absent, or a NULL value
            first = next(x for x in ids.tolist() if x in missing)  # report the first in row order
            raise TraceFormatError(where, f"{what} refers to string id {first} missing from StringIds")
        vals[j] = s if clean is None else clean(s)
    return _spread_distinct(vals, take)


def _spread_distinct(values: np.ndarray, take) -> pd.Categorical:
    """``categorical(take(values))`` for a value per distinct id and :func:`_distinct_ids`'s
    ``take``: the values are factorized, and only their codes spread over the rows."""
    if not all(isinstance(v, str) for v in values.tolist()):  # a number in StringIds: unsortable,
        return categorical(take(values))  # so categories in order of first appearance in rows
    # Every distinct value is some row's: all of them are categories.
    small = categorical(values)
    return pd.Categorical.from_codes(take(small.codes), dtype=small.dtype, validate=False)


def _distinct_ids(ids: np.ndarray):
    """The distinct ``ids``, sorted, and a function taking a value per distinct id to the
    value of each row (``pd.factorize(ids, sort=True)``'s uniques, and ``values[codes]``).
    StringIds ids are small and dense: a table indexed by id instead of a hash (2.4x faster
    for the names of 10M kernels and 20M API calls), which maps each row straight to its
    value (one pass over the rows, not one for codes and one more for values)."""
    if len(ids):
        lo, hi = int(ids.min()), int(ids.max())
        if lo >= 0 and hi < max(1 << 16, 4 * len(ids)):
            seen = np.zeros(hi + 1, dtype=bool)
            seen[ids] = True
            uniq = np.flatnonzero(seen)

            def take(values: np.ndarray) -> np.ndarray:
                table = np.zeros(hi + 1, dtype=values.dtype)
                table[uniq] = values
                return table[ids]

            return uniq, take
    codes, uniq = pd.factorize(ids, sort=True)
    return uniq, lambda values: values[codes]


def read_nsys(path: str | Path, options: ImportOptions = DEFAULT) -> RawTables:
    """Import an Nsight Systems SQLite export (``nsys export --type sqlite``), optionally gzipped."""
    path = Path(path)
    with _sqlite_file(path) as db_path:
        try:
            con = sqlite3.connect(_uri(db_path), uri=True)
        except sqlite3.Error as e:
            raise TraceFormatError(path, f"cannot open SQLite file ({e})") from None
        # TEXT that is not valid UTF-8 (a damaged page, another writer) decodes with U+FFFD.
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        db = None
        try:
            db = _Db(con, path)
            db.prefetch(db_path, options)
            return _read(db, path, options)
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(path, f"damaged SQLite file ({e})") from None
        except UnicodeDecodeError:  # SQLite's own error message quoted damaged bytes
            raise TraceFormatError(path, "damaged SQLite file (malformed schema or page)") from None
        finally:
            if db is not None:
                db.close()  # before a gunzipped temp file goes
            con.close()


def _read(db: _Db, where: Path, options: ImportOptions) -> RawTables:
    if KERNEL not in db.tables:
        raise TraceFormatError(
            where, f"no {KERNEL} table: not an Nsight Systems export with CUDA trace (capture with -t cuda)"
        )
    strings = db.strings()
    make = {KERNEL: ("kernels", _kernels), RUNTIME: ("api", _api), NVTX: ("ranges", _ranges),
            MEMCPY: ("memcpy", _copies), MEMSET: ("memset", _copies)}
    making: dict[str, Future] = {}
    # Each table as soon as it has been read, while the reader threads are still decoding
    # the others (0.3-0.5 s sooner at 10M kernels): one read by sqlite3 on this thread, the
    # event tables read from their pages on two more, so that the last ones read are not
    # made one after the other (0.3 s at 10M kernels). That order is the threads', so where
    # several tables are bad, the error told is the one of the first in the fixed order, as
    # when every table is read in turn.
    with options.pool(2, "workbench-tables") as pool:
        for t, paged in db.read_order([t for t in make if t in db.tables]):
            anywhere = paged and t in _MADE_ANYWHERE
            making[t] = (pool.submit if anywhere else _made)(make[t][1], db, t, strings, where)
        tables = {key: making[t].result() for t, (key, _) in make.items() if t in making}
    return RawTables(tables, _meta(db, strings))


def _made(fn, *args) -> Future:
    """``fn(*args)`` made on this thread, its result or format error held as a thread's is."""
    done: Future = Future()
    try:
        done.set_result(fn(*args))
    except TraceFormatError as e:
        done.set_exception(e)
    return done


# Tables made from their columns alone (nothing more asked of the connection): when their
# pages were read, any thread may make them.
_MADE_ANYWHERE = (KERNEL, RUNTIME, NVTX)


def _kernels(db: _Db, table: str, strings, where) -> pd.DataFrame:
    k = db.read(table)
    n = len(k)
    if "shortName" not in k and "demangledName" not in k:
        raise TraceFormatError(where, f"table {KERNEL} lacks kernel name columns (shortName/demangledName)")
    name_ids = _ints(k, "demangledName" if "demangledName" in k else "shortName", where, KERNEL)
    short_ids = _ints(k, "shortName" if "shortName" in k else "demangledName", where, KERNEL)
    cols = {
        "name": _names(name_ids, strings, where, f"{KERNEL}.demangledName"),
        "short_name": _names(short_ids, strings, where, f"{KERNEL}.shortName"),
        "kind": constant("kernel", n),
        "start": _ints(k, "start", where, KERNEL),
        "end": _ints(k, "end", where, KERNEL),
        "device": _ints(k, "deviceId", where, KERNEL),
        "stream": _ints(k, "streamId", where, KERNEL),
        "pid": _own_pid(_ints(k, "globalPid", where, KERNEL)),
        "correlation": _ints(k, "correlationId", where, KERNEL),
    }
    for src, dst in (("gridX", "grid_x"), ("gridY", "grid_y"), ("gridZ", "grid_z"),
                     ("blockX", "block_x"), ("blockY", "block_y"), ("blockZ", "block_z")):
        cols[dst] = _ints(k, src, where, KERNEL, default=-1)
    cols["graph"] = pd.notna(k["graphNodeId"].array) if "graphNodeId" in k else np.zeros(n, bool)
    # One frame of the columns as they are: setting columns one by one would copy each.
    return pd.DataFrame(cols, copy=False)


def _api(db: _Db, table: str, strings, where) -> pd.DataFrame:
    r = db.read(table)
    gtid = _ints(r, "globalTid", where, RUNTIME)
    name = _names(_ints(r, "nameId", where, RUNTIME), strings, where, f"{RUNTIME}.nameId", _api_name)
    is_driver = np.array([c.startswith("cu") and not c.startswith("cuda") for c in name.categories.tolist()], dtype=bool)
    kinds = pd.Categorical(np.where(is_driver, "driver", "runtime"))
    # Every name is some row's, so every kind is.
    kind_codes = kinds.codes.astype(np.int8)[name.codes]
    pid, tid = _pid_tid(gtid)
    return pd.DataFrame({
        "name": name,
        "kind": pd.Categorical.from_codes(kind_codes, dtype=kinds.dtype, validate=False),
        "start": _ints(r, "start", where, RUNTIME),
        "end": _ints(r, "end", where, RUNTIME),
        "pid": pid,
        "tid": tid,
        "correlation": _ints(r, "correlationId", where, RUNTIME),
    }, copy=False)


def _api_name(name) -> str:
    """nsys suffixes runtime names with the API version ("cudaLaunchKernel_v7000")."""
    name = str(name)  # a number in StringIds too
    return name.split("_v")[0] if "_v" in name and name.rsplit("_v", 1)[-1].isdigit() else name


def _ranges(db: _Db, table: str, strings, where) -> pd.DataFrame:
    e = db.read(table)
    if not len(e):
        return pd.DataFrame()
    etype = _ints(e, "eventType", where, NVTX)
    # Text as codes into its distinct values (-1: none), so nothing here is a string per row.
    values, codes = _text_codes(e["text"]) if "text" in e else (np.zeros(0, dtype=object), np.full(len(e), -1, np.int32))
    if "textId" in e:
        tid_ids = pd.to_numeric(pd.Series(e["textId"]), errors="coerce")
        need = (codes < 0) & tid_ids.notna().to_numpy()
        if need.any():
            found = _names(tid_ids[need].astype(np.int64).to_numpy(), strings, where, f"{NVTX}.textId")
            codes[need] = found.codes.astype(np.int32) + len(values)
            values = np.concatenate([values, np.asarray(found.categories, dtype=object)])
    # Where a row has no text, None (as its value read whole would be), after the values.
    values = np.append(values, None)
    codes[codes < 0] = len(values) - 1
    domain_ids = _ints(e, "domainId", where, NVTX, default=0)
    domains = {0: "default"}
    create = etype == _DOMAIN_CREATE
    for d, t in zip(domain_ids[create], values[codes[create]]):
        domains[int(d)] = t if isinstance(t, str) else f"domain {d}"
    if create.any():
        keep = ~create
        e, etype, codes, domain_ids = e[keep], etype[keep], codes[keep], domain_ids[keep]
        if not len(e):
            return pd.DataFrame()
    ends = pd.to_numeric(pd.Series(e["end"]), errors="coerce").to_numpy()
    starts = _ints(e, "start", where, NVTX)
    gtid = _ints(e, "globalTid", where, NVTX)
    unended = np.isnan(ends) | (ends < 0)
    if unended.any():
        i = int(np.flatnonzero(unended)[0])
        raise TraceFormatError(
            where, f"NVTX range {str(values[codes[i]])[:80]!r} pushed at {starts[i]} ns on thread {_tid(gtid[i:i+1])[0]} never ends"
            f" ({int(unended.sum())} unmatched)"
        )
    # No text, or numbers in a TEXT column (sqlite3 gives them as such): no name.
    values = np.array([v if isinstance(v, str) else "" for v in values.tolist()], dtype=object)
    dom_ids, dom_take = _distinct_ids(domain_ids)
    domain = np.array([domains.get(d, f"domain {d}") for d in dom_ids.tolist()], dtype=object)
    pid, tid = _pid_tid(gtid)
    return pd.DataFrame({
        "name": categorical_take(values, codes),
        "start": starts,
        "end": _int64(ends, where, f"{NVTX}.end"),
        "pid": pid,
        "tid": tid,
        "domain": _spread_distinct(domain, dom_take),
    }, copy=False)


def _text_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A text column's distinct values (bytes decoded; non-UTF-8 with replacement characters)
    and each row's index into them as int32 (-1: NULL), from the reader's categorical or from
    sqlite3's values."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return np.asarray(col.cat.categories, dtype=object), col.cat.codes.to_numpy().astype(np.int32)
    codes, uniq = pd.factorize(col.to_numpy(dtype=object))
    values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in uniq.tolist()]  # BLOBs
    return np.array(values, dtype=object), codes.astype(np.int32)


def _copies(db: _Db, table: str, strings, where) -> pd.DataFrame:
    c = db.read(table)
    out = pd.DataFrame({
        "start": _ints(c, "start", where, table),
        "end": _ints(c, "end", where, table),
        "device": _ints(c, "deviceId", where, table, default=-1),
        "stream": _ints(c, "streamId", where, table, default=-1),
        "pid": _own_pid(_ints(c, "globalPid", where, table)),
        "correlation": _ints(c, "correlationId", where, table, default=-1),
        "bytes": _ints(c, "bytes", where, table, default=-1),
    }, copy=False)
    if table == MEMCPY:
        kinds = _enum(db, "ENUM_CUDA_MEMCPY_OPER")
        ck = _ints(c, "copyKind", where, table, default=-1)
        out["kind"] = pd.Categorical([kinds.get(int(x), str(x)) for x in ck])
    return out


def _enum(db: _Db, table: str) -> dict[int, str]:
    if table not in db.tables:
        return {}
    try:
        rows = db.con.execute(f'select id, label from "{table}"').fetchall()
    except sqlite3.DatabaseError:
        return {}
    # Labels are only shown (a kind without one shows its number): a damaged row is left out.
    return {i: str(label) for i, label in rows if isinstance(i, int)}


def _kv(db: _Db, table: str) -> dict[str, str]:
    if table not in db.tables:
        return {}
    try:
        rows = db.con.execute(f'select name, value from "{table}"').fetchall()
    except sqlite3.DatabaseError:
        return {}
    out: dict[str, str] = {}
    for k, v in rows:
        out.setdefault(str(k), str(v))
    return out


def _meta(db: _Db, strings) -> dict:
    export = _kv(db, "META_DATA_EXPORT")
    capture_rows = []
    if "META_DATA_CAPTURE" in db.tables:
        try:
            capture_rows = db.con.execute("select name, value from META_DATA_CAPTURE").fetchall()
        except sqlite3.DatabaseError:
            pass
    argv = [str(v) for k, v in capture_rows if str(k) == "PROCESS_0:COMMAND"]
    argv += [str(v) for k, v in capture_rows if str(k).startswith("PROCESS_0:ARGUMENT_")]
    system = _kv(db, "TARGET_INFO_SYSTEM_ENV")
    gpus = []
    if "TARGET_INFO_GPU" in db.tables:
        try:
            gpus = sorted({str(r[0]) for r in db.con.execute("select name from TARGET_INFO_GPU")})
        except sqlite3.DatabaseError:
            pass
    cuda = system.get("CudaDriverVersion")
    env = {
        "gpu": ", ".join(gpus),
        "driver": system.get("NvDriverVersion", ""),
        "cuda_driver_version": int(cuda) if cuda and cuda.isdigit() else cuda,
        "os": system.get("OsDescription", ""),
    }
    meta = {
        "source": {"format": "nsys-sqlite", "tool": "Nsight Systems",
                   "tool_version": export.get("EXPORT_PRODUCT_VERSION", ""),
                   "schema_version": export.get("EXPORT_SCHEMA_VERSION", "")},
        "env": {k: v for k, v in env.items() if v},
    }
    if argv:
        meta["source"]["command"] = argv
    return meta


def read_nsys_rep(path: str | Path, options: ImportOptions = DEFAULT) -> RawTables:
    """Export an ``.nsys-rep`` with ``nsys export --type sqlite`` (needs nsys on PATH) and import it."""
    path = Path(path)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise WorkbenchError(
            path, "an .nsys-rep needs the Nsight Systems CLI: 'nsys' is not on PATH "
            "(install Nsight Systems, or export it elsewhere with 'nsys export --type sqlite' and import the .sqlite)"
        )
    with tempfile.TemporaryDirectory(prefix="workbench-nsys-") as tmp:
        out = Path(tmp) / "export.sqlite"
        proc = subprocess.run(
            [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out), str(path)],
            capture_output=True, text=True,
        )
        if proc.returncode != 0 or not out.exists():
            msg = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise TraceFormatError(path, f"nsys export failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
        raw = read_nsys(out, options)
    raw.meta["source"]["format"] = "nsys-rep"
    return raw
