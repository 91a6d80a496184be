"""The Kineto importer's fast paths give exactly the tables of its plain paths.

- typed msgspec decoding vs orjson (forced for every piece) on real traces;
- ranges read by worker processes vs one pass, on a real trace and on a trace whose B/E
  ranges open in one range and close in another;
- the problem reported for a piece does not depend on how its rows are built.
"""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from workbench.errors import TraceFormatError
from workbench.trace import kineto
from workbench.trace.kineto_parallel import read_parallel

REAL = [
    ("reference", "kineto-kvwrite-unfused-cache-full.json.gz"),
    ("reference", "kineto-kvwrite-fused-cache-bucketed.json.gz"),
    ("external", "hta-trace-diff-control.json.gz"),
    ("external", "hta-trace-diff-test.json.gz"),
]


def assert_same(a, b):
    assert a.meta == b.meta
    assert list(a.tables) == list(b.tables)
    for name, x in a.tables.items():
        y = b.tables[name]
        assert list(x.dtypes) == list(y.dtypes), name
        pd.testing.assert_frame_equal(x, y, check_exact=True)
        for col in x.columns:  # category order too: it is part of the dtype
            if isinstance(x[col].dtype, pd.CategoricalDtype):
                assert list(x[col].cat.categories) == list(y[col].cat.categories), (name, col)


def typed_flags(monkeypatch) -> list[bool]:
    """Records, for each piece, whether it was decoded into typed structs."""
    seen = []
    part = kineto._part

    def spy(events, typed, *args):
        seen.append(typed)
        return part(events, typed, *args)

    monkeypatch.setattr(kineto, "_part", spy)
    return seen


@pytest.mark.parametrize("where,name", REAL)
def test_typed_and_orjson_pieces_give_the_same_tables(request, monkeypatch, where, name):
    path = request.getfixturevalue(where)(name)
    flags = typed_flags(monkeypatch)
    fast = kineto.read_kineto(path)
    assert flags and all(flags), "the typed decoder refused a piece of a real trace"
    flags.clear()
    # bad UTF-8 is the one thing the typed path checks before decoding: claiming it everywhere
    # sends every piece to orjson
    monkeypatch.setattr(kineto, "_utf8", lambda data: False)
    plain = kineto.read_kineto(path)
    assert flags and not any(flags)
    assert_same(fast, plain)


def unzip(src, tmp_path):
    out = tmp_path / src.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out


def one_pass(path, chunk, monkeypatch):
    monkeypatch.setattr(kineto, "_CHUNK", chunk)
    return kineto.read_kineto(path, workers=1)


def test_ranges_in_workers_give_the_one_pass_tables(external, tmp_path, monkeypatch):
    path = unzip(external("hta-trace-diff-control.json.gz"), tmp_path)
    chunk = 1 << 20
    stops = kineto._range_stops(path, chunk, 3)
    assert len(stops) == 2
    tables, header = read_parallel(path, chunk, stops)  # raises if it had to give up
    assert_same(tables.trace(header), one_pass(path, chunk, monkeypatch))
    # and read_kineto takes that path when told to
    assert_same(kineto.read_kineto(path, workers=3), one_pass(path, chunk, monkeypatch))


def begin_end_doc(n: int = 6000) -> dict:
    """B/E ranges that stay open across many pieces, X ranges at the very same times (their
    order then decides the tree), launches and kernels, with new names all along (their
    order is the categories'); args padded so that it spans MBs."""
    pad = {"pad": "p" * 300}
    ev = [{"ph": "B", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 0.0}]
    for i in range(n):
        t = 10.0 * i + 1
        ev.append({"ph": "B", "cat": "user_annotation", "name": f"be{i // 700}", "pid": 1, "tid": 1, "ts": t})
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"x{i // 500}", "pid": 1, "tid": 1, "ts": t, "dur": 5.0,
                   "args": pad})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 1,
                   "dur": 1.0, "args": {"correlation": i, **pad}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i // 300}", "pid": 0, "tid": 7, "ts": t + 2, "dur": 2.0,
                   "args": {"correlation": i, "device": 0, "stream": 7, "grid": [1, 2, 3], "block": [4, 1, 1], **pad}})
        ev.append({"ph": "E", "cat": "user_annotation", "name": f"be{i // 700}", "pid": 1, "tid": 1, "ts": t + 5})
    ev.append({"ph": "E", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 10.0 * n + 1})
    return {"schemaVersion": 1, "traceEvents": ev, "traceName": "after the events"}


def test_begin_end_ranges_across_workers(tmp_path, monkeypatch):
    path = tmp_path / "be.json"
    path.write_text(json.dumps(begin_end_doc(), indent=1))
    chunk = 256 << 10
    stops = kineto._range_stops(path, chunk, 2)
    tables, header = read_parallel(path, chunk, stops)
    assert header["traceName"] == "after the events"
    trace = tables.trace(header)
    assert_same(trace, one_pass(path, chunk, monkeypatch))
    assert len(trace.ranges) == 2 * 6000 + 1 and len(trace.kernels) == 6000


def test_a_worker_meeting_bad_input_reports_what_one_pass_reports(tmp_path, monkeypatch):
    doc = begin_end_doc()
    doc["traceEvents"][-40]["ts"] = "soon"  # late in the file: in the worker's range
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc, indent=1))
    monkeypatch.setattr(kineto, "_CHUNK", 256 << 10)
    with pytest.raises(TraceFormatError) as one:
        kineto.read_kineto(path, workers=1)
    with pytest.raises(TraceFormatError) as two:
        kineto.read_kineto(path, workers=2)
    assert str(one.value) == str(two.value)
    assert "range ts has a non-numeric value 'soon'" in str(two.value)


def test_first_problem_is_the_whole_pieces_not_the_first_slices(tmp_path):
    """Kernels are checked before API calls over a piece; slicing must not change that."""
    doc = begin_end_doc(2000)
    ev = doc["traceEvents"]
    api = next(i for i, e in enumerate(ev) if e["cat"] == "cuda_runtime")
    kernel = max(i for i, e in enumerate(ev) if e["cat"] == "kernel")
    assert kernel - api > 2 * kineto._SLICE
    ev[api]["dur"] = None
    ev[kernel]["dur"] = None
    path = tmp_path / "two-problems.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="kernel dur is missing or not finite in 1 event"):
        kineto.read_kineto(path)


def test_bad_utf8_in_a_field_never_read_is_still_bad_json(tmp_path):
    doc = begin_end_doc(50)
    data = json.dumps(doc).encode().replace(b'"pad": "ppp', b'"pad": "\xff\xfe', 1)
    path = tmp_path / "bad-utf8.json"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        kineto.read_kineto(path)
