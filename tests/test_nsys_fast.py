"""The nsys importer's ADBC fast path gives exactly what its sqlite3 path gives.

Each file is imported twice: as usual (event tables through ADBC) and with the ADBC prefetch
switched off (every table through sqlite3, the importer's reference). Tables, categories and
meta must be identical, or both must fail with the same message; where the fast path must
give up (a type it cannot vouch for), the table must really have gone through sqlite3.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pandas as pd
import pytest

from workbench.errors import WorkbenchError
from workbench.trace import nsys

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "badinput"))
import tracegen as tg  # noqa: E402

SHARED = HERE.parents[1] / "shared"
REAL = sorted([*(SHARED / "reference-captures" / "h200").glob("nsys-*.sqlite*"),
               *(SHARED / "external-traces").glob("nsys-*.sqlite*")])
EVENT_TABLES = (nsys.KERNEL, nsys.RUNTIME, nsys.NVTX)


def _import(path: Path, monkeypatch, fast: bool):
    """(the Trace or the error text, the tables the ADBC path delivered)."""
    delivered = []
    take = nsys._Arrow.take

    def spy(self, table):
        got = take(self, table)
        if got is not None:
            delivered.append(table)
        return got

    with monkeypatch.context() as m:
        m.setattr(nsys._Arrow, "take", spy)
        if not fast:
            m.setattr(nsys._Db, "prefetch", lambda self, db_path: None)
        try:
            return nsys.read_nsys(path), delivered
        except WorkbenchError as e:
            return str(e), delivered


def _assert_same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert a.meta == b.meta
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        x, y = a.tables[name], b.tables[name]
        pd.testing.assert_frame_equal(x, y, check_exact=True)
        for col in x.columns:
            if isinstance(x[col].dtype, pd.CategoricalDtype):
                assert x[col].cat.categories.equals(y[col].cat.categories), (name, col)
                assert x[col].cat.categories.dtype == y[col].cat.categories.dtype, (name, col)


def _assert_writable(trace):
    """Arrow's buffers are read-only: none may end up in the trace, whose users edit it."""
    for df in trace.tables.values():
        for j in range(df.shape[1]):
            if len(df):
                df.iloc[0, j] = df.iloc[0, j]


def _compare(path: Path, monkeypatch):
    fast, delivered = _import(path, monkeypatch, fast=True)
    slow, none = _import(path, monkeypatch, fast=False)
    assert none == []
    _assert_same(fast, slow)
    return fast, delivered


@pytest.mark.skipif(not REAL, reason="shared nsys exports not present")
@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_exports_identical(path, monkeypatch):
    trace, delivered = _compare(path, monkeypatch)
    assert not isinstance(trace, str), trace
    assert set(EVENT_TABLES) <= set(delivered)


def _loose_file(path: Path, edit=None) -> Path:
    """A tracegen export without column types or constraints (any value can go anywhere),
    then ``edit(con)``."""
    spec = tg.simple_spec(steps=2, layers=3, kernels_per_range=3)
    loose = {t: ", ".join(p.strip().split()[0] for p in ddl.split(",")) for t, ddl in tg.NSYS_SCHEMA.items()}
    tg.write_sqlite(tg.nsys_rows(spec), path, schema=loose)
    if edit is not None:
        con = sqlite3.connect(path)
        edit(con)
        con.commit()
        con.close()
    return path


@pytest.mark.parametrize("name", ["plain.sqlite", "gz.sqlite.gz", "odd ?#%41 näme.sqlite"])
def test_generated_identical(tmp_path, monkeypatch, name):
    path = tg.write_nsys(tg.simple_spec(), tmp_path / name, gz=name.endswith(".gz"))
    trace, delivered = _compare(path, monkeypatch)
    assert not isinstance(trace, str), trace
    assert set(EVENT_TABLES) <= set(delivered)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no stray database created
    _assert_writable(trace)


def _null_and_huge(con):
    # A domain-create row (NULL end) is dropped before ends are converted: the other ends must
    # stay exact int64, not pass through float64.
    con.execute("update NVTX_EVENTS set eventType = 75, end = NULL, domainId = 9007199254740993 where rowid = 1")
    con.execute("update NVTX_EVENTS set start = 9007199254740993, end = 9223372036854775807 where rowid = 2")
    con.execute("update CUPTI_ACTIVITY_KIND_KERNEL set gridX = NULL, graphNodeId = 5 where rowid = 1")
    con.execute("update CUPTI_ACTIVITY_KIND_KERNEL set gridX = 9007199254740993 where rowid = 2")


def test_nulls_beside_huge_integers(tmp_path, monkeypatch):
    trace, delivered = _compare(_loose_file(tmp_path / "t.sqlite", _null_and_huge), monkeypatch)
    assert not isinstance(trace, str), trace
    assert set(EVENT_TABLES) <= set(delivered)
    assert 9223372036854775807 in set(trace.ranges["end"].tolist())


LAST = "(select max(rowid) from {t})"
FALLBACKS = {
    # a REAL after the rows the driver inferred int64 from (batches of 4 rows here)
    "late-real": (nsys.KERNEL, "update {t} set start = 1.5 where rowid = " + LAST),
    "late-huge-real": (nsys.RUNTIME, "update {t} set end = 1e300 where rowid = " + LAST),
    "late-text": (nsys.KERNEL, "update {t} set gridX = 'abc' where rowid = " + LAST),
    "first-text": (nsys.RUNTIME, "update {t} set correlationId = '12' where rowid = 1"),
    "first-blob": (nsys.KERNEL, "update {t} set streamId = x'ff00' where rowid = 1"),
    "text-column-integer": (nsys.NVTX, "update {t} set text = 42 where rowid = " + LAST),
    "text-column-blob": (nsys.NVTX, "update {t} set text = x'6b76' where rowid = 2"),
    "text-column-bad-utf8": (nsys.NVTX, "update {t} set text = cast(x'6b76fffe' as text) where rowid = 1"),
    "late-null-then-text": (nsys.NVTX, "update {t} set text = NULL; update {t} set text = 'x' where rowid = " + LAST),
    "indexed": (nsys.KERNEL, "create index i on {t}(start)"),
    "view": (nsys.KERNEL, "alter table {t} rename to k0; create view {t} as select * from k0"),
}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_fallback_identical(tmp_path, monkeypatch, case):
    table, sql = FALLBACKS[case]
    path = _loose_file(tmp_path / "t.sqlite", lambda con: con.executescript(sql.format(t=table)))
    monkeypatch.setattr(nsys._Arrow, "_BATCH_ROWS_MAX", 4)
    _, delivered = _compare(path, monkeypatch)
    assert table not in delivered


def test_damaged_file_identical(tmp_path, monkeypatch):
    path = _loose_file(tmp_path / "t.sqlite")
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data), 97):
        data[i] ^= 0x5A
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(bytes(data))
    _compare(bad, monkeypatch)
