"""Real nsys exports with indexes added, as nsys-ai adds them to the user's file (and people do
for their own SQL), read alike by every path: the page reader, sqlite3 (the path an install
without the C accelerator takes) and the same file without the indexes. Tables are compared
exactly, row order included.

An index is a b-tree of its own: the table's pages stay as they were, so the page reader reads
them. sqlite3 is told not to use an index (a covering one would change the order of its rows).
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from workbench.trace.readers.nsys import pages, read
from workbench.trace.readers.nsys.database import COLUMNS, KERNEL, RUNTIME

from helpers import CORPUS, DATA, SHARED

REAL = sorted([*(CORPUS).glob("nsys-*.sqlite.gz"), *(DATA).glob("nsys-*.sqlite.gz"),
               *(SHARED / "reference-captures" / "h200").glob("nsys-*.sqlite.gz"),
               *(SHARED / "external-traces").glob("nsys-*.sqlite.gz")])

# nsys-ai 0.3.0's indexes (nsys_ai/indexing.py: ensure_performance_indexes), by table.
NSYS_AI_INDEXES = {
    KERNEL: ["_nsysai_kernel_start (start)", "_nsysai_kernel_corr (correlationId)", "_nsysai_kernel_short (shortName)",
             "_nsysai_kernel_stream (streamId, start)"],
    RUNTIME: ["_nsysai_runtime_corr (correlationId)", "_nsysai_runtime_tid (globalTid, start)"],
    "NVTX_EVENTS": ["_nsysai_nvtx_start (start)", "_nsysai_nvtx_tid (globalTid, start)",
                    "_nsysai_nvtx_range (globalTid, start, [end])"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["_nsysai_memcpy_corr (correlationId)", "_nsysai_memcpy_kind (copyKind, start)"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["_nsysai_memset_corr (correlationId)"],
}
# Covering the runtime columns read, led by a column out of rowid order: sqlite3 left to itself
# scans this index instead of the table, and gives the rows in another order.
COVERING = f"CREATE INDEX cover_runtime ON {RUNTIME}(nameId, globalTid, correlationId, start, [end])"


def _gunzipped(src: Path, dest: Path) -> Path:
    with gzip.open(src, "rb") as fin, open(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    return dest


def _add_indexes(path: Path, extra: tuple[str, ...] = ()) -> int:
    """nsys-ai's indexes on the tables and columns ``path`` has (as nsys-ai skips the others;
    exports nsys-ai has read hold them already), then ``extra``; how many indexes the event
    tables have then."""
    con = sqlite3.connect(path)
    for table, specs in NSYS_AI_INDEXES.items():
        for spec in specs:
            name, cols = spec.split(" ", 1)
            try:
                con.execute(f'CREATE INDEX IF NOT EXISTS {name} ON "{table}"{cols}')
            except sqlite3.OperationalError:  # no such table or column
                pass
    for sql in extra:
        con.execute(sql)
    con.commit()
    tables = [r[0] for r in con.execute("select tbl_name from sqlite_master where type = 'index'")]
    con.close()
    return sum(t in COLUMNS for t in tables)


def _read(path: Path, monkeypatch, accelerated: bool):
    """The raw tables, and the tables the page reader delivered."""
    delivered = []
    take = pages.Pages.take

    def spy(self, table):
        got = take(self, table)
        if got is not None:
            delivered.append(table)
        return got

    with monkeypatch.context() as m:
        m.setattr(pages.Pages, "take", spy)
        if not accelerated:  # what an install without a C compiler has
            m.setattr(pages, "read_table", None)
        return read(path), delivered


def _assert_same(a, b):
    assert a.meta == b.meta
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        x, y = a.tables[name], b.tables[name]
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=name)
        for col in x.columns:
            if isinstance(x[col].dtype, pd.CategoricalDtype):
                assert x[col].cat.categories.equals(y[col].cat.categories), (name, col)


def _event_tables(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    have = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    con.close()
    return have & set(COLUMNS)


@pytest.mark.skipif(pages.read_table is None, reason="C page reader not built (python setup.py build_ext --inplace)")
@pytest.mark.parametrize("src", REAL, ids=[p.name for p in REAL])
def test_indexed_export_read_alike(src, tmp_path, monkeypatch):
    plain = _gunzipped(src, tmp_path / "plain.sqlite")
    indexed = _gunzipped(src, tmp_path / "indexed.sqlite")
    assert _add_indexes(indexed, (COVERING,)) >= 4
    fast, delivered = _read(indexed, monkeypatch, accelerated=True)
    assert set(delivered) == _event_tables(indexed)  # every event table from its pages
    slow, none = _read(indexed, monkeypatch, accelerated=False)
    assert none == []
    _assert_same(fast, slow)
    _assert_same(fast, _read(plain, monkeypatch, accelerated=True)[0])


def test_covering_index_does_not_reorder_sqlite3(tmp_path, monkeypatch):
    """Where sqlite3 left to itself reads a covering index, in another order than the table's,
    the fallback still gives the rows in the table's order: what the page reader gives, and
    what the file gave before the index was added."""
    src = next(p for p in REAL if p.name == "nsys-graph-probe.sqlite.gz")
    plain = _gunzipped(src, tmp_path / "plain.sqlite")
    indexed = _gunzipped(src, tmp_path / "indexed.sqlite")
    _add_indexes(indexed, (COVERING,))
    con = sqlite3.connect(indexed)
    cols = "start, [end], globalTid, correlationId, nameId"
    assert con.execute(f"select {cols} from {RUNTIME}").fetchall() != con.execute(
        f"select {cols} from {RUNTIME} order by rowid").fetchall()  # the index reorders a plain select
    con.close()
    before, _ = _read(plain, monkeypatch, accelerated=False)
    after, _ = _read(indexed, monkeypatch, accelerated=False)
    _assert_same(before, after)
