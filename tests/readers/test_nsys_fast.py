"""The nsys importer's fast path (event tables read from the file's pages by the C
accelerator) gives exactly what its sqlite3 path gives.

Each file is imported twice: as usual and with the page reader not started (every table through
sqlite3, the importer's reference). Tables, categories and
meta must be identical, or both must fail with the same message; where the fast path must
give up (a type it cannot vouch for), the table must really have gone through sqlite3.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from workbench.errors import WorkbenchError
from workbench.trace.readers.nsys import pages, read, values
from workbench.trace.readers.nsys.database import KERNEL, NVTX, RUNTIME

from helpers import SHARED
import tracegen as tg

REAL = sorted([*(SHARED / "reference-captures" / "h200").glob("nsys-*.sqlite*"),
               *(SHARED / "external-traces").glob("nsys-*.sqlite*")])
EVENT_TABLES = (KERNEL, RUNTIME, NVTX)


def _import(path: Path, monkeypatch, fast: bool):
    """(the Trace or the error text, the tables the fast path delivered)."""
    delivered = []
    take = pages.Pages.take

    def spy(self, table):
        got = take(self, table)
        if got is not None:
            delivered.append(table)
        return got

    with monkeypatch.context() as m:
        m.setattr(pages.Pages, "take", spy)
        if not fast:
            m.setattr(pages, "start", lambda db, db_path, options: None)
        try:
            return read(path), delivered
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
    """Every column of the trace is writable: its users edit it."""
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
    assert 9223372036854775807 in set(trace.tables["ranges"]["end"].tolist())


LAST = "(select max(rowid) from {t})"
LONG = "'" + "kv_write/" * 2000 + "'"  # spills onto overflow pages
FALLBACKS = {
    "late-real": (KERNEL, "update {t} set start = 1.5 where rowid = " + LAST),
    "late-huge-real": (RUNTIME, "update {t} set end = 1e300 where rowid = " + LAST),
    "late-text": (KERNEL, "update {t} set gridX = 'abc' where rowid = " + LAST),
    "first-text": (RUNTIME, "update {t} set correlationId = '12' where rowid = 1"),
    "first-blob": (KERNEL, "update {t} set streamId = x'ff00' where rowid = 1"),
    "text-column-integer": (NVTX, "update {t} set text = 42 where rowid = " + LAST),
    "text-column-blob": (NVTX, "update {t} set text = x'6b76' where rowid = 2"),
    "view": (KERNEL, "alter table {t} rename to k0; create view {t} as select * from k0"),
    # rows written before the column was added hold no value: they read as its default
    "added-column-default": (KERNEL, "alter table {t} rename column graphNodeId to g0; "
                                          "alter table {t} add column graphNodeId default 7"),
    "without-rowid": (RUNTIME, "create table r0 (start, end, globalTid, correlationId, nameId, "
                                    "primary key (start, correlationId)) without rowid; "
                                    "insert into r0 select start, end, globalTid, correlationId, nameId from {t}; "
                                    "drop table {t}; alter table r0 rename to {t}"),
}
DELIVERED = {
    # an index is a b-tree of its own: the table's pages are as they were
    "indexed": (KERNEL, "create index i on {t}(start); create index j on {t}(end, start, correlationId, deviceId, streamId)"),
    "text-column-bad-utf8": (NVTX, "update {t} set text = cast(x'6b76fffe' as text) where rowid = 1"),
    # distinct bytes, one string once decoded: one category
    "text-column-bad-utf8-twice": (NVTX, "update {t} set text = cast(x'6b76ff' as text) where rowid = 1; "
                                              "update {t} set text = cast(x'6b76fe' as text) where rowid = 2"),
    "late-null-then-text": (NVTX, "update {t} set text = NULL; update {t} set text = 'x' where rowid = " + LAST),
    "overflow-pages": (NVTX, "update {t} set text = " + LONG + " || rowid where eventType = 59"),
    "added-column-null": (KERNEL, "alter table {t} rename column graphNodeId to g0; "
                                       "alter table {t} add column graphNodeId"),
    "rowid-alias": (RUNTIME, "create table r0 (correlationId integer primary key, start, end, globalTid, nameId); "
                                  "insert into r0 select correlationId, start, end, globalTid, nameId from {t}; "
                                  "drop table {t}; alter table r0 rename to {t}"),
    "vacuumed-64k-pages": (KERNEL, "pragma page_size = 65536; vacuum"),
    # labels are only shown: a damaged row is left out, no traceback
    "enum-row-without-id": (KERNEL, "update ENUM_CUDA_MEMCPY_OPER set id = NULL where id = 1"),
}


def _edited(tmp_path, case: tuple[str, str]) -> Path:
    table, sql = case
    return _loose_file(tmp_path / "t.sqlite", lambda con: con.executescript(sql.format(t=table)))


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_fallback_identical(tmp_path, monkeypatch, case):
    _, delivered = _compare(_edited(tmp_path, FALLBACKS[case]), monkeypatch)
    assert FALLBACKS[case][0] not in delivered


@pytest.mark.parametrize("case", sorted(DELIVERED))
def test_fast_path_identical(tmp_path, monkeypatch, case):
    trace, delivered = _compare(_edited(tmp_path, DELIVERED[case]), monkeypatch)
    assert not isinstance(trace, str), trace
    assert set(EVENT_TABLES) <= set(delivered)


def test_pending_wal_read_by_sqlite(tmp_path, monkeypatch):
    """Changes still in a WAL file are not in the pages the accelerator reads."""
    path = _loose_file(tmp_path / "t.sqlite")
    con = sqlite3.connect(path)
    con.execute("pragma journal_mode = wal")
    con.execute("pragma wal_autocheckpoint = 0")
    con.execute(f"update {KERNEL} set start = start + 1")
    con.commit()
    try:
        assert (tmp_path / "t.sqlite-wal").stat().st_size > 0
        trace, delivered = _compare(path, monkeypatch)
        assert delivered == [] and not isinstance(trace, str)
    finally:
        con.close()


def _leaf_cells(path: Path, table: str) -> tuple[bytearray, list[int]]:
    """The file's bytes and where each cell of ``table`` starts; the table must fit one leaf page."""
    con = sqlite3.connect(path)
    root = con.execute("select rootpage from sqlite_master where name = ?", (table,)).fetchone()[0]
    page_size = con.execute("pragma page_size").fetchone()[0]
    con.close()
    data = bytearray(path.read_bytes())
    page = (root - 1) * page_size
    assert data[page] == 0x0D, f"{table} fits one leaf page"
    ncells = int.from_bytes(data[page + 3 : page + 5], "big")
    return data, [page + int.from_bytes(data[page + 8 + 2 * i : page + 10 + 2 * i], "big") for i in range(ncells)]


def test_huge_payload_size_declined(tmp_path, monkeypatch):
    """A damaged cell claiming a payload of ~2**64 bytes (which once wrapped an allocation
    size): the page reader declines and sqlite3 reports the damage, no crash."""
    path = _loose_file(tmp_path / "t.sqlite")
    data, cells = _leaf_cells(path, KERNEL)
    data[cells[0] : cells[0] + 9] = b"\xff" * 9  # a 9-byte varint: 2**64 - 1
    path.write_bytes(bytes(data))
    _compare(path, monkeypatch)


def _varint(data, at: int) -> tuple[int, int]:
    """A SQLite varint at ``at``: its value and the position after it."""
    v = 0
    for i in range(9):
        b = data[at + i]
        if i == 8:
            return (v << 8) | b, at + 9
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, at + i + 1
    raise AssertionError("unreachable")


@pytest.mark.parametrize("damage", ["type-shortens-record", "rowid-out-of-order"])
def test_damaged_record_read_by_sqlite(tmp_path, monkeypatch, damage):
    """A record whose serial types no longer fill it (a damaged type shifts every value after
    it) and a rowid out of order: the page reader declines the table, as sqlite3's own checks
    may call it malformed, instead of reading shifted values."""
    path = _loose_file(tmp_path / "t.sqlite")
    data, cells = _leaf_cells(path, NVTX)
    if damage == "rowid-out-of-order":
        _, at0 = _varint(data, cells[0])
        _, at1 = _varint(data, cells[1])
        assert data[at0] < 0x80 and data[at1] < 0x80
        data[at1] = data[at0]  # the second row's rowid now equals the first's
    else:
        _, at = _varint(data, cells[0])
        _, rec = _varint(data, at)
        hsize, h = _varint(data, rec)
        while data[h] not in range(1, 7):  # the first integer stored in 1-8 bytes
            h += 1
        assert h < rec + hsize
        data[h] = 8  # now the constant 0, with no bytes: the record outlasts its columns
    path.write_bytes(bytes(data))
    _, delivered = _compare(path, monkeypatch)
    assert NVTX not in delivered


def test_damaged_file_identical(tmp_path, monkeypatch):
    path = _loose_file(tmp_path / "t.sqlite")
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data), 97):
        data[i] ^= 0x5A
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(bytes(data))
    _compare(bad, monkeypatch)


def test_first_bad_table_in_fixed_order_is_told(tmp_path, monkeypatch):
    """Tables are turned into columns in the order their reader threads finish; where two are
    bad, the error told is still the one of the first in the fixed order (kernels before API
    calls), whichever finished first."""
    path = _loose_file(tmp_path / "t.sqlite", lambda con: con.executescript(
        f"update {KERNEL} set start = NULL where rowid = 1; "
        f"update {RUNTIME} set globalTid = NULL where rowid = 1"))
    told = set()
    for backwards in (False, True):
        order = pages.Columns.order
        with monkeypatch.context() as m:
            m.setattr(pages.Columns, "order", lambda self, tables: list(order(self, tables))[:: -1 if backwards else 1])
            with pytest.raises(WorkbenchError) as e:
                read(path)
        told.add(str(e.value))
    assert len(told) == 1 and f"{KERNEL}.start" in told.pop()


def test_randomly_damaged_exports_read_alike(tmp_path, monkeypatch):
    """Exports with a few random bytes changed in their pages: the fast path gives what
    sqlite3 gives (the same trace or the same error) for every one."""
    import random

    base = _loose_file(tmp_path / "base.sqlite").read_bytes()
    rng = random.Random(11)
    outcomes = set()
    for i in range(150):
        data = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data) // 3, len(data))] = rng.randrange(256)
        path = tmp_path / f"damaged-{i}.sqlite"
        path.write_bytes(bytes(data))
        trace, _ = _compare(path, monkeypatch)
        outcomes.add(isinstance(trace, str))
        path.unlink()
    assert outcomes == {True, False}  # some read, some refused


@pytest.mark.parametrize("ids", [
    [7, 3, 3, 9, 7, 0],  # dense, StringIds-like
    [5] * 10,
    [2**40, 3, 2**40],  # too sparse for a table: hashed
    [-1, 4, 4],  # negative: hashed
    [],
], ids=["dense", "one", "sparse", "negative", "empty"])
def test_string_ids_factorized_as_pandas_does(ids):
    import numpy as np

    ids = np.array(ids, dtype=np.int64)
    uniq, take = values.distinct_ids(ids)
    want_codes, want_uniq = pd.factorize(ids, sort=True)
    assert uniq.tolist() == want_uniq.tolist()
    assert take(np.arange(len(uniq), dtype=np.int8)).tolist() == want_codes.tolist()
    assert take(np.array([f"s{u}" for u in uniq], dtype=object)).tolist() == [f"s{i}" for i in ids.tolist()]


NAME_EDITS = {
    # a number where a name should be: an API name is text, a kernel name keeps its type
    "number-in-string-ids": "update StringIds set value = 42 where id = (select nameId from {r} limit 1); "
                            "update StringIds set value = 7 where id = (select shortName from {k} limit 1)",
    # a created domain named like the default one: one category
    "domain-named-default": "insert into {n} (start, end, eventType, globalTid, text, domainId) "
                            "values (1, NULL, 75, (select globalTid from {n} limit 1), 'default', 5); "
                            "update {n} set domainId = 5 where rowid % 3 = 0 and eventType = 59",
}


@pytest.mark.parametrize("case", sorted(NAME_EDITS))
def test_names_looked_up_once_per_id(tmp_path, monkeypatch, case):
    """Names are looked up per distinct id and spread over the rows by code: what a lookup
    per row would give."""
    sql = NAME_EDITS[case].format(r=RUNTIME, k=KERNEL, n=NVTX)
    trace, _ = _compare(_loose_file(tmp_path / "t.sqlite", lambda con: con.executescript(sql)), monkeypatch)
    con = sqlite3.connect(tmp_path / "t.sqlite")
    strings = dict(con.execute("select id, value from StringIds"))
    if case == "number-in-string-ids":
        api = [str(strings[i]).split("_v")[0] for (i,) in con.execute(f"select nameId from {RUNTIME}")]
        short = [strings[i] for (i,) in con.execute(f"select shortName from {KERNEL}")]
        assert sorted(trace.tables["api"]["name"].tolist()) == sorted(api) and "42" in api
        assert sorted(trace.tables["kernels"]["short_name"].tolist(), key=str) == sorted(short, key=str) and 7 in short
    else:
        assert trace.tables["ranges"]["domain"].cat.categories.tolist() == ["default"]
    con.close()


def _random_table(path: Path, ncols: int, rows: int, seed: int) -> list[str]:
    """A table of ``rows`` rows: an INTEGER PRIMARY KEY, a TEXT column and ``ncols`` integer
    columns whose values have every stored length (NULL, the constants 0 and 1, 1 to 8
    bytes, negative), so that records come in hundreds of header shapes; its column names."""
    import random

    rng = random.Random(seed)
    ints = [None, 0, 1, 7, -3, 300, -40000, 1 << 20, 1 << 30, -(1 << 40), 1 << 47, 1 << 55, 2**63 - 1, -(2**63)]
    texts = [None, "", "kv_write", "kv_read_", "attention", "é" * 40, "layer_07/" * 12]
    cols = ["id", "name", *(f"c{i}" for i in range(ncols))]
    con = sqlite3.connect(path)
    con.execute(f"create table t (id INTEGER PRIMARY KEY, name TEXT, {', '.join(f'{c} INTEGER' for c in cols[2:])})")
    # Runs of one shape with new values in it, then a random one: cached shapes are hit,
    # missed and evicted.
    shape = None
    data = []
    for r in range(rows):
        if shape is None or rng.random() < 0.3:
            shape = [rng.randrange(len(ints)) for _ in range(ncols)], rng.randrange(len(texts))
        vals = [ints[k] if ints[k] in (None, 0, 1) else ints[k] ^ (r % 2) for k in shape[0]]
        text = texts[shape[1]]
        data.append((r * 3 + 1, text if text is None else text[:-1] + "xy"[r % 2] if text else text, *vals))
    con.executemany(f"insert into t values ({', '.join('?' * len(cols))})", data)
    con.commit()
    con.close()
    return cols


@pytest.mark.parametrize("ncols", [12, 70], ids=["short-headers", "headers-past-the-shape-cache"])
def test_reader_matches_sqlite_over_many_record_shapes(tmp_path, ncols):
    """The page reader against sqlite3 on records of hundreds of header shapes, alike shapes
    holding different values, and headers too long to be cached."""
    pages = pytest.importorskip("workbench.trace.readers.nsys._sqlite_pages")
    path = tmp_path / "shapes.sqlite"
    cols = _random_table(path, ncols, 4000, seed=ncols)
    want = [0, 1, *range(2, len(cols), 3)]  # the rowid, the text and every third integer
    con = sqlite3.connect(path)
    root = con.execute("select rootpage from sqlite_master where name = 't'").fetchone()[0]
    rows = con.execute(f"select {', '.join(cols[i] for i in want)} from t order by rowid").fetchall()
    con.close()
    values, nulls = pages.read_table(str(path).encode(), root, want, [i == 1 for i in want], 0)
    import numpy as np

    for j, i in enumerate(want):
        expect = [r[j] for r in rows]
        if i == 1:
            codes, distinct = values[j]
            got = [None if c < 0 else distinct[c] for c in np.frombuffer(codes, np.int32).tolist()]
        else:
            got = np.frombuffer(values[j], np.int64).tolist()
            if nulls[j] is not None:
                got = [None if n else v for v, n in zip(got, bytes(nulls[j]))]
        assert got == expect, cols[i]
