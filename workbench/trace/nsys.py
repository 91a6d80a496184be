"""Nsight Systems importer: the SQLite export (plain or gzipped) and ``.nsys-rep`` via
``nsys export``.

Tables read (and the columns read from each, declared up front as nsys recipes do):
CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME (runtime *and* driver calls, e.g.
Triton's cuLaunchKernelEx), NVTX_EVENTS, CUPTI_ACTIVITY_KIND_MEMCPY/MEMSET, StringIds, and the
TARGET_INFO_* / META_DATA_* tables for the environment.

The event tables are read by the ADBC SQLite driver straight into Arrow, two at a time on
worker threads; any table that path cannot vouch for is read row by row through ``sqlite3``,
which also words every error about bad input.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from ..errors import TraceFormatError, WorkbenchError
from .model import Trace, build
from .names import categorical, categorical_take

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
WHERE = {NVTX: f"where eventType in ({', '.join(map(str, _PUSHPOP + _STARTEND + (_DOMAIN_CREATE,)))})"}
TEXT = {NVTX: ("text",)}


def _pid(global_id: np.ndarray) -> np.ndarray:
    # nsys packs (vm, pid, tid) into globalTid/globalPid: pid lives in bits 24..55.
    return (global_id >> 24) & 0xFFFFFFFF


def _tid(global_tid: np.ndarray) -> np.ndarray:
    return global_tid & 0xFFFFFF


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
        self._arrow: _Arrow | None = None
        try:
            self.tables = {r[0] for r in con.execute("select name from sqlite_master where type in ('table','view')")}
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(where, f"not a readable SQLite database ({e})") from None

    def columns(self, table: str) -> set[str]:
        return {r[1] for r in self.con.execute(f'pragma table_info("{table}")')}

    def wanted(self, table: str) -> list[str]:
        """The columns of ``table`` to read; raises if a required one is missing."""
        have = self.columns(table)
        spec = COLUMNS[table]
        missing = [c for c in spec["required"] if c not in have]
        if missing:
            raise TraceFormatError(self.where, f"table {table} lacks column(s) {', '.join(missing)}")
        return [c for c in spec["required"] + spec["optional"] if c in have]

    def prefetch(self, db_path: Path) -> None:
        """Start reading the event tables through ADBC. Only plain tables qualify: with no
        index (nsys creates none) a table can only be scanned in rowid order, so this SQLite
        and the driver's own build return the rows in the same order. Problems found here
        are left for :meth:`read` to report, in its order."""
        if KERNEL not in self.tables:
            return
        try:
            schema = self.con.execute("select type, name, tbl_name, sql from sqlite_master").fetchall()
        except (sqlite3.Error, UnicodeDecodeError):
            return
        indexed = {str(tbl).lower() for kind, _, tbl, _ in schema if kind == "index"}
        plain = {name for kind, name, _, sql in schema
                 if kind == "table" and str(name).lower() not in indexed and str(sql).upper().startswith("CREATE TABLE")}
        jobs = {}
        for table in COLUMNS:
            if table in plain:
                try:
                    jobs[table] = self.wanted(table)
                except (TraceFormatError, sqlite3.Error, UnicodeDecodeError):
                    pass
        if jobs:
            self._arrow = _Arrow(db_path, jobs)

    def close(self) -> None:
        if self._arrow is not None:
            self._arrow.close()

    def read(self, table: str) -> pd.DataFrame:
        cols = self.wanted(table)
        got = self._arrow.take(table) if self._arrow is not None else None
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


class _Arrow:
    """Tables read whole into Arrow by the ADBC SQLite driver (~6x faster than sqlite3's rows
    turned into numpy), two at a time: the driver steps SQLite without holding the GIL, so
    the kernel and API tables are read at once. (Splitting one table into rowid ranges read
    in parallel did not pay on two cores.)

    A fast path only: :meth:`take` gives None, and the table is read through sqlite3 (with
    its results and its error messages), on any driver error (damaged file, a value of
    another type after the rows the driver inferred a column's type from) and wherever
    Arrow's types leave doubt about what sqlite3 would give: a column not int64 (REAL, BLOB,
    TEXT where integers belong), a text column holding a non-text value anywhere (the driver
    would turn it into its text) or invalid UTF-8 (sqlite3 decodes it with U+FFFD)."""

    # One batch per table, so a column reaches numpy without a copy (at 10M kernels 1M-row
    # batches cost a combining copy: +0.35 GB peak, ~4 s). The driver reserves memory for a
    # whole batch up front, so the batch is sized to the table, never beyond this.
    _BATCH_ROWS_MAX = 1 << 26

    def __init__(self, db_path: Path, jobs: dict[str, list[str]]):
        self._uri = _uri(db_path)
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="workbench-nsys")
        self._jobs = {}
        try:
            for table, cols in jobs.items():
                self._jobs[table] = self._pool.submit(self._read, table, cols)
        except RuntimeError:  # no thread to be had (a process limit): sqlite3 reads the rest
            pass

    def take(self, table: str) -> list[np.ndarray] | None:
        job = self._jobs.pop(table, None)
        return None if job is None else job.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _read(self, table: str, cols: list[str]) -> list[np.ndarray] | None:
        try:
            import adbc_driver_sqlite.dbapi as adbc

            with adbc.connect(self._uri) as con, con.cursor() as cur:
                for col in TEXT.get(table, ()):
                    if col in cols:
                        cur.execute(f'select 1 from "{table}" where typeof("{col}") not in (\'text\', \'null\') limit 1')
                        if cur.fetchone() is not None:
                            return None
                cur.execute(f'select count(*) from "{table}"')
                rows = min(max(int(cur.fetchone()[0]), 1), self._BATCH_ROWS_MAX)
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(rows)})
                cur.execute(_select_sql(table, cols))
                tabs = [cur.fetch_arrow_table()]
            return _from_arrow(tabs, [c in TEXT.get(table, ()) for c in cols])
        except Exception:  # noqa: BLE001 - whatever went wrong, sqlite3 reads it and words the error
            return None


def _from_arrow(tabs: list, text: list[bool]) -> list[np.ndarray] | None:
    """The same columns :meth:`_Db._select` makes of the same rows (int64; object arrays of
    str and None, or of int and None for integers with NULLs), or None.

    ``tabs`` holds the only reference to the table, which is taken apart column by column:
    each column becomes an owned, writable numpy array and its Arrow buffer is freed at once,
    so a table never exists twice in memory (the caller's frames then need no copy)."""
    import pyarrow as pa

    tab = tabs.pop()
    if tab.num_rows == 0:
        return []
    out = []
    for is_text in text:
        col = tab.column(0).combine_chunks()
        tab = tab.remove_column(0)
        if is_text and pa.types.is_string(col.type):
            col.validate(full=True)  # invalid UTF-8 raises: sqlite3 decodes it with U+FFFD
            out.append(col.to_numpy(zero_copy_only=False))
        elif is_text and col.null_count == len(col):  # the driver types an all-NULL column int64
            out.append(np.full(len(col), None, dtype=object))
        elif not is_text and col.type == pa.int64():
            if col.null_count:
                # Not float64 with NaN: rows without NULLs, once filtered out of such a column
                # (NVTX ends without domain rows), must still give exact int64.
                ints = col.fill_null(0).to_numpy().astype(object)
                ints[col.is_null().to_numpy(zero_copy_only=False)] = None
                out.append(ints)
            else:
                out.append(col.to_numpy().copy())
        else:
            return None
        del col
    return out


def _is_text(col) -> bool:
    return any(isinstance(v, (str, bytes)) for v in col[:1000])


def _ints(df: pd.DataFrame, col: str, where: Path, table: str, default: int | None = None) -> np.ndarray:
    if col not in df:
        return np.full(len(df), -1 if default is None else default, dtype=np.int64)
    if df[col].dtype == np.int64:  # INTEGERs only: nothing to convert or refuse
        # The array itself, not to_numpy()'s read-only view: ``df`` is a private intermediate
        # whose columns are handed on to the trace's frames without a copy.
        return np.asarray(df[col].array)
    s = pd.to_numeric(pd.Series(df[col]), errors="coerce")
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


def _lookup(ids: np.ndarray, strings: dict[int, str], where: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The string of each distinct id (in id order) and each row's index into them: strings
    are looked up once per distinct id, and names become categoricals from those codes."""
    ids = np.asarray(ids, dtype=np.int64)
    codes, uniq = pd.factorize(ids, sort=True)
    vals = np.empty(len(uniq), dtype=object)
    for j, v in enumerate(uniq.tolist()):
        s = strings.get(v)
        if s is None:
            missing = {u for u in uniq.tolist() if strings.get(u) is None}  # absent, or a NULL value
            first = next(x for x in ids.tolist() if x in missing)  # report the first in row order
            raise TraceFormatError(where, f"{what} refers to string id {first} missing from StringIds")
        vals[j] = s
    return vals, codes


def _text(values: np.ndarray) -> np.ndarray:
    """Decode bytes columns (non-UTF-8 text is shown with replacement characters)."""
    return np.array([v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values], dtype=object)


def read_nsys(path: str | Path) -> Trace:
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
            db.prefetch(db_path)
            return _read(db, path)
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(path, f"damaged SQLite file ({e})") from None
        except UnicodeDecodeError:  # SQLite's own error message quoted damaged bytes
            raise TraceFormatError(path, "damaged SQLite file (malformed schema or page)") from None
        finally:
            if db is not None:
                db.close()  # before a gunzipped temp file goes
            con.close()


def _read(db: _Db, where: Path) -> Trace:
    if KERNEL not in db.tables:
        raise TraceFormatError(
            where, f"no {KERNEL} table: not an Nsight Systems export with CUDA trace (capture with -t cuda)"
        )
    strings = db.strings()
    tables = {"kernels": _kernels(db, strings, where)}
    if RUNTIME in db.tables:
        tables["api"] = _api(db, strings, where)
    if NVTX in db.tables:
        tables["ranges"] = _ranges(db, strings, where)
    for t, key in ((MEMCPY, "memcpy"), (MEMSET, "memset")):
        if t in db.tables:
            tables[key] = _copies(db, t, where, strings)
    return build(tables, _meta(db, strings), str(where))


def _kernels(db: _Db, strings, where) -> pd.DataFrame:
    k = db.read(KERNEL)
    n = len(k)
    if "shortName" not in k and "demangledName" not in k:
        raise TraceFormatError(where, f"table {KERNEL} lacks kernel name columns (shortName/demangledName)")
    name_ids = _ints(k, "demangledName" if "demangledName" in k else "shortName", where, KERNEL)
    short_ids = _ints(k, "shortName" if "shortName" in k else "demangledName", where, KERNEL)
    out = pd.DataFrame({
        "name": categorical_take(*_lookup(name_ids, strings, where, f"{KERNEL}.demangledName")),
        "short_name": categorical_take(*_lookup(short_ids, strings, where, f"{KERNEL}.shortName")),
        "kind": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=["kernel"]),
        "start": _ints(k, "start", where, KERNEL),
        "end": _ints(k, "end", where, KERNEL),
        "device": _ints(k, "deviceId", where, KERNEL),
        "stream": _ints(k, "streamId", where, KERNEL),
        "pid": _pid(_ints(k, "globalPid", where, KERNEL)),
        "correlation": _ints(k, "correlationId", where, KERNEL),
    }, copy=False)
    for src, dst in (("gridX", "grid_x"), ("gridY", "grid_y"), ("gridZ", "grid_z"),
                     ("blockX", "block_x"), ("blockY", "block_y"), ("blockZ", "block_z")):
        out[dst] = _ints(k, src, where, KERNEL, default=-1)
    out["graph"] = k["graphNodeId"].notna().to_numpy() if "graphNodeId" in k else np.zeros(n, bool)
    out["launch_tid"] = -1
    return out


def _api(db: _Db, strings, where) -> pd.DataFrame:
    r = db.read(RUNTIME)
    gtid = _ints(r, "globalTid", where, RUNTIME)
    name_ids = _ints(r, "nameId", where, RUNTIME)
    names, inv_id = _lookup(name_ids, strings, where, f"{RUNTIME}.nameId")
    # nsys suffixes runtime names with the API version ("cudaLaunchKernel_v7000").
    # Distinct names via the distinct ids: sorting millions of strings costs seconds.
    uniq, inv_u = np.unique(names.astype(str), return_inverse=True)
    inv = inv_u.reshape(-1)[inv_id]
    clean = np.array([u.split("_v")[0] if "_v" in u and u.rsplit("_v", 1)[-1].isdigit() else u for u in uniq], dtype=object)
    is_driver = np.array([u.startswith("cu") and not u.startswith("cuda") for u in clean])
    kinds = pd.Categorical(np.where(is_driver, "driver", "runtime"))
    return pd.DataFrame({
        "name": categorical_take(clean, inv),
        "kind": pd.Categorical.from_codes(kinds.codes[inv], dtype=kinds.dtype),  # every clean name is used
        "start": _ints(r, "start", where, RUNTIME),
        "end": _ints(r, "end", where, RUNTIME),
        "pid": _pid(gtid),
        "tid": _tid(gtid),
        "correlation": _ints(r, "correlationId", where, RUNTIME),
    }, copy=False)


def _ranges(db: _Db, strings, where) -> pd.DataFrame:
    e = db.read(NVTX)
    if not len(e):
        return pd.DataFrame()
    etype = _ints(e, "eventType", where, NVTX)
    text = _text(e["text"].to_numpy()) if "text" in e else np.full(len(e), None, dtype=object)
    if "textId" in e:
        tid_ids = pd.to_numeric(pd.Series(e["textId"]), errors="coerce")
        need = pd.isna(text) & tid_ids.notna().to_numpy()
        if need.any():
            vals, codes = _lookup(tid_ids[need].astype(np.int64).to_numpy(), strings, where, f"{NVTX}.textId")
            text[need] = vals[codes]
    domain_ids = _ints(e, "domainId", where, NVTX, default=0)
    domains = {0: "default"}
    for d, t in zip(domain_ids[etype == _DOMAIN_CREATE], text[etype == _DOMAIN_CREATE]):
        domains[int(d)] = t if isinstance(t, str) else f"domain {d}"
    keep = etype != _DOMAIN_CREATE
    e, etype, text, domain_ids = e[keep], etype[keep], text[keep], domain_ids[keep]
    if not len(e):
        return pd.DataFrame()
    ends = pd.to_numeric(pd.Series(e["end"]), errors="coerce").to_numpy()
    starts = _ints(e, "start", where, NVTX)
    gtid = _ints(e, "globalTid", where, NVTX)
    unended = np.isnan(ends) | (ends < 0)
    if unended.any():
        i = int(np.flatnonzero(unended)[0])
        raise TraceFormatError(
            where, f"NVTX range {str(text[i])[:80]!r} pushed at {starts[i]} ns on thread {_tid(gtid[i:i+1])[0]} never ends"
            f" ({int(unended.sum())} unmatched)"
        )
    text = np.array([t if isinstance(t, str) else "" for t in text], dtype=object)
    dom_ids, dom_codes = np.unique(domain_ids, return_inverse=True)
    return pd.DataFrame({
        "name": categorical(text),
        "start": starts,
        "end": _int64(ends, where, f"{NVTX}.end"),
        "pid": _pid(gtid),
        "tid": _tid(gtid),
        "domain": categorical_take([domains.get(int(d), f"domain {d}") for d in dom_ids], dom_codes),
    }, copy=False)


def _copies(db: _Db, table: str, where, strings) -> pd.DataFrame:
    c = db.read(table)
    out = pd.DataFrame({
        "start": _ints(c, "start", where, table),
        "end": _ints(c, "end", where, table),
        "device": _ints(c, "deviceId", where, table, default=-1),
        "stream": _ints(c, "streamId", where, table, default=-1),
        "pid": _pid(_ints(c, "globalPid", where, table)),
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
        return {int(i): str(label) for i, label in db.con.execute(f'select id, label from "{table}"')}
    except sqlite3.DatabaseError:
        return {}


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


def read_nsys_rep(path: str | Path) -> Trace:
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
        trace = read_nsys(out)
    trace.meta["source"]["format"] = "nsys-rep"
    return trace
