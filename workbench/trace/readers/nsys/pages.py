"""Where each event table's columns come from: the one place that chooses between the C page
reader ``_sqlite_pages`` and ``sqlite3``.

The page reader decodes a table straight from the file's pages without holding the GIL,
two tables at a time on threads from ``options.pool``. It is a fast path only: a table goes through
sqlite3 (with its results and its error messages) wherever the accelerator is not built,
declines (a damaged page, a value of a type the column should not hold), or cannot map the
table's records to columns up front: a WITHOUT ROWID table, a view, hidden or generated
columns, a column with a default (rows written before an ALTER TABLE hold none), or changes
still in a journal or WAL file. An indexed table is read from its pages all the same: an index
is a b-tree of its own and leaves the table's pages as they were, and sqlite3 is told not to
use it (``Database.select``), so both give the rows in rowid order. Text is decoded as the
sqlite3 connection decodes it (invalid UTF-8 replaced).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from concurrent.futures import Future, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...options import ImportOptions
from .database import COLUMNS, KERNEL, TEXT, WHERE_TYPES, Database

try:
    from ._sqlite_pages import read_table
except ImportError:  # built by pip install only where a C compiler is
    read_table = None

# What Pages._read needs to read a table: its root page, the position in each record of each
# column read, which of them hold text, and the position of the INTEGER PRIMARY KEY (-1: none).
Job = tuple[int, list[int], list[bool], int]


class Columns:
    """Each table's columns as a frame, from its pages where they were read, else through
    sqlite3. Shuts the page reader down when its block ends (before a gunzipped temp file
    goes)."""

    def __init__(self, db: Database, db_path: Path, options: ImportOptions):
        self.db = db
        self._pages = start(db, db_path, options)

    def __enter__(self) -> Columns:
        return self

    def __exit__(self, *exc) -> None:
        if self._pages is not None:
            self._pages.close()

    def order(self, tables: list[str]) -> Iterator[tuple[str, bool]]:
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
        """The wanted columns of the rows of ``table`` read (see ``WHERE_TYPES``)."""
        cols = self.db.wanted(table)
        got = self._pages.take(table) if self._pages is not None else None
        if got is None:
            got = self.db.select(table, cols)
        elif table in WHERE_TYPES:  # the page reader reads every row: keep those sqlite3 would
            etype = got[cols.index("eventType")]
            if etype.dtype != np.int64:  # NULLs: rows no type matches
                etype = etype.to_numpy(dtype=np.int64, na_value=-1)
            keep = np.isin(etype, WHERE_TYPES[table])
            if not keep.all():  # often every row is kept: no copy then
                got = [c[keep] for c in got]
        if not got:
            return pd.DataFrame({n: [] for n in cols})
        # Not copied: these frames are only read, into new columns of the trace.
        return pd.DataFrame(dict(zip(cols, got)), copy=False)


def start(db: Database, db_path: Path, options: ImportOptions) -> Pages | None:
    """The page reader started on every event table it can read, or None where it reads
    none. Only rowid tables qualify: their leaf pages hold the rows in rowid order, the order
    of sqlite3's full scan. Problems found here are left for sqlite3 to report, in the order
    the tables are made."""
    if read_table is None or KERNEL not in db.tables or any(
        os.path.exists(f"{db_path}{suffix}") and os.path.getsize(f"{db_path}{suffix}") for suffix in ("-journal", "-wal")
    ):
        return None
    try:
        schema = db.con.execute("select type, name, tbl_name, rootpage, sql from sqlite_master").fetchall()
        jobs = {}
        for kind, name, _, root, sql in schema:
            if (name in COLUMNS and kind == "table" and str(sql).upper().startswith("CREATE TABLE")
                    and isinstance(root, int)):
                try:
                    job = _job(db, name, str(sql), root)
                except TraceFormatError:
                    continue
                if job is not None:
                    jobs[name] = job
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    if not jobs:
        return None
    # Kernels first, whatever the file's order (nsys creates that table late): its wide rows
    # take longest to decode, and the main thread's turn for it comes last.
    return Pages(db_path, {t: jobs[t] for t in COLUMNS if t in jobs}, options)


def _job(db: Database, table: str, sql: str, root: int) -> Job | None:
    """What :meth:`Pages._read` needs to read the wanted columns of ``table``, or None where
    sqlite3 must."""
    cols = db.wanted(table)
    if "WITHOUT ROWID" in " ".join(sql.upper().split()):
        return None
    info = db.con.execute(f'pragma table_xinfo("{table}")').fetchall()  # cid, name, type, notnull, dflt, pk, hidden
    if any(r[6] for r in info):
        return None
    pos = {r[1]: i for i, r in enumerate(info)}
    if any(info[pos[c]][4] is not None for c in cols):
        return None
    pk = [r for r in info if r[5]]
    # An INTEGER PRIMARY KEY is the rowid: its record holds NULL.
    rowid = pos[pk[0][1]] if len(pk) == 1 and str(pk[0][2]).upper() == "INTEGER" else -1
    return int(root), [pos[c] for c in cols], [c in TEXT.get(table, ()) for c in cols], rowid


class Pages:
    """The page reader's jobs, one per table, on threads from ``options.pool``. A job's
    result is the table's columns, or None where the accelerator declined it."""

    def __init__(self, db_path: Path, jobs: dict[str, Job], options: ImportOptions):
        self._path = os.fsencode(db_path)
        self._pool = options.pool(2, "workbench-nsys")
        self._jobs: dict[str, Future] = {}
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


def _dictionary(codes: np.ndarray, values: list[str]) -> pd.Categorical:
    """A text column as the reader gives it (each row's index into the distinct values, -1
    for NULL), as a categorical. Distinct bytes can decode to one string (invalid UTF-8 is
    replaced): such values become one category."""
    uniq = pd.Index(values, dtype=object)
    if not uniq.is_unique:
        inv, uniq = pd.factorize(uniq)
        codes = np.append(inv, -1).astype(np.int32)[codes]
    return pd.Categorical.from_codes(codes, categories=uniq, validate=False)
