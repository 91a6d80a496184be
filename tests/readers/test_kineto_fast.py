"""The Kineto importer's fast paths give exactly the tables of its plain paths.

- the C scanner vs the library decoder (orjson; each forced for every piece) on real
  traces, and the scanner vs the library on tricky but valid input;
- what the scanner declines gets the library path's tables or problem;
- ranges read by threads vs one pass, on a real trace and on a trace whose B/E ranges open
  in one range and close in another;
- the problem reported for a piece does not depend on how its rows are built.
"""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pandas as pd
import pytest

from workbench.errors import TraceFormatError
from workbench.trace.options import ImportOptions
from workbench.trace.readers import kineto
from workbench.trace.readers.kineto import columns, decode, events, parallel
from workbench.trace.readers.kineto.pieces import OnePass

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


def library_pieces(monkeypatch) -> list[int]:
    """Records the events of each piece the scanner left to the library decoder."""
    seen = []
    part = events.part

    def spy(decoded, where):
        seen.append(len(decoded))
        return part(decoded, where)

    monkeypatch.setattr(events, "part", spy)
    return seen


def scanned_flags(monkeypatch) -> list[bool]:
    """Records, for each piece, whether the C scanner read it."""
    seen = []
    scan = decode.scan

    def spy(data, *bounds, **options):
        out = scan(data, *bounds, **options)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(decode, "scan", spy)
    return seen


def no_scanner(monkeypatch):
    monkeypatch.setattr(decode, "scanner", lambda: None)


@pytest.mark.parametrize("where,name", REAL)
def test_scanned_and_library_pieces_give_the_same_tables(request, monkeypatch, where, name):
    path = request.getfixturevalue(where)(name)
    scanned = scanned_flags(monkeypatch)
    library = library_pieces(monkeypatch)
    fast = kineto.read(path)
    assert scanned and all(scanned) and not library, "the scanner declined a piece of a real trace"
    no_scanner(monkeypatch)
    plain = kineto.read(path)
    assert library and sum(library) == plain.meta["source"]["events"], "a piece was not decoded by the library"
    assert_same(fast, plain)


def unzip(src, tmp_path):
    out = tmp_path / src.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out


def one_pass(path, chunk, monkeypatch):
    monkeypatch.setattr(kineto, "_CHUNK", chunk)
    return kineto.read(path, ImportOptions(threads=1))


def in_ranges(path, chunk: int, stops: list[int], threads: int):
    """The file read in the ranges ending at ``stops``; raises where it had to give up."""
    tables, header = parallel.read_ranges(path, chunk, stops, threads, ImportOptions(threads=threads))
    return tables.raw(header)


def threaded(path, threads: int, monkeypatch):
    """``kineto.read`` with ``threads`` threads on a file of any size: the trace or the
    problem reported, and whether the ranges were read apart (not given up for one pass)."""
    monkeypatch.setattr(parallel, "RANGE_MIN", 1)
    read_ranges, outcomes = parallel.read_ranges, []

    def spy(*args):
        try:
            out = read_ranges(*args)
        except OnePass:
            outcomes.append("one pass")
            raise
        except TraceFormatError:
            outcomes.append("problem")
            raise
        outcomes.append("tables")
        return out

    monkeypatch.setattr(parallel, "read_ranges", spy)
    try:
        result = kineto.read(path, ImportOptions(threads=threads))
    except TraceFormatError as e:
        result = str(e)
    return result, outcomes in (["tables"], ["problem"])


def test_ranges_in_threads_give_the_one_pass_tables(external, tmp_path, monkeypatch):
    path = unzip(external("hta-trace-diff-control.json.gz"), tmp_path)
    chunk = 1 << 20
    stops = parallel.range_stops(path, chunk, 3)
    assert len(stops) == 2
    assert_same(in_ranges(path, chunk, stops, 3), one_pass(path, chunk, monkeypatch))
    # and kineto.read takes that path when given threads
    trace, apart = threaded(path, 3, monkeypatch)
    assert apart
    assert_same(trace, one_pass(path, chunk, monkeypatch))


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


def test_begin_end_ranges_across_threads(tmp_path, monkeypatch):
    path = tmp_path / "be.json"
    path.write_text(json.dumps(begin_end_doc(), indent=1))
    chunk = 256 << 10
    stops = parallel.range_stops(path, chunk, 2)
    tables, header = parallel.read_ranges(path, chunk, stops, 2, ImportOptions(threads=2))
    assert header["traceName"] == "after the events"
    trace = tables.raw(header)
    assert_same(trace, one_pass(path, chunk, monkeypatch))
    assert len(trace.tables["ranges"]) == 2 * 6000 + 1 and len(trace.tables["kernels"]) == 6000


def test_a_thread_meeting_bad_input_reports_what_one_pass_reports(tmp_path, monkeypatch):
    doc = begin_end_doc()
    doc["traceEvents"][-40]["ts"] = "soon"  # late in the file: in the second thread's range
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc, indent=1))
    monkeypatch.setattr(kineto, "_CHUNK", 256 << 10)
    with pytest.raises(TraceFormatError) as one:
        kineto.read(path, ImportOptions(threads=1))
    two, apart = threaded(path, 2, monkeypatch)
    assert apart and str(one.value) == two
    assert "range ts has a non-numeric value 'soon'" in two


def test_first_problem_is_the_whole_pieces_not_the_first_slices(tmp_path):
    """Kernels are checked before API calls over a piece; slicing must not change that."""
    doc = begin_end_doc(2000)
    ev = doc["traceEvents"]
    api = next(i for i, e in enumerate(ev) if e["cat"] == "cuda_runtime")
    kernel = max(i for i, e in enumerate(ev) if e["cat"] == "kernel")
    assert kernel - api > 2 * events.SLICE
    ev[api]["dur"] = None
    ev[kernel]["dur"] = None
    path = tmp_path / "two-problems.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="kernel dur is missing or not finite in 1 event"):
        kineto.read(path)


def test_bad_utf8_in_a_field_never_read_is_still_bad_json(tmp_path):
    doc = begin_end_doc(50)
    data = json.dumps(doc).encode().replace(b'"pad": "ppp', b'"pad": "\xff\xfe', 1)
    path = tmp_path / "bad-utf8.json"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        kineto.read(path)


def test_gzip_broken_off_after_a_key_without_an_array_is_corrupt_gzip(tmp_path):
    """Reading on to word what the document is meets the broken stream: reported as every
    damaged gzip stream is, not as the decompressor's exception."""
    doc = b'{"schemaVersion": 1, "traceEvents": 5, "pad": "' + b"x" * (3 << 20) + b'"}'
    data = gzip.compress(doc, mtime=0)
    path = tmp_path / "broken.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
        kineto.read(path)


# ---------------------------------------------------------------- the C scanner on odd input

# Events as (key, JSON text) pairs, written as given: the ways a writer may put valid JSON.
TRICKY = [
    [("ph", '"X"'), ("cat", '"kernel"'), ("name", r'"void k<\"a\\b\">\n\t\u00e9\/"'), ("pid", "0"), ("tid", "7"),
     ("ts", "1.5e3"), ("dur", "2E-1"),
     ("args", '{"nested": {"a": [1, {"b": null}], "c": "}],{"}, "grid": [2, 3], "block": [4, 5, 6, 7], '
              '"device": 0, "stream": 7, "correlation": 1, "bytes": 12, "External id": 1e-5}')],
    [("args", '{"correlation": 2, "device": 1, "stream": 9, "grid": [], "block": [1,1,1]}'), ("dur", "3"),
     ("ts", "1600"), ("name", '"中文 \U0001F680 kernel"'), ("cat", '"kernel"'), ("ph", '"X"')],
    [("ph", '"X"'), ("cat", '"kernel"'), ("name", '"k"'), ("ts", "1601.25"), ("dur", "1"), ("args", "null")],
    [("ph", '"X"'), ("cat", '"cuda_runtime"'), ("name", '"cudaLaunchKernel"'), ("pid", "-5"),
     ("tid", "9223372036854775807"), ("ts", "1499.999"), ("dur", "0.5e1"), ("args", '{"correlation": 1}')],
    [("p\\u0068", '"X"'), ("cat", r'"cuda\u005fdriver"'), ("name", '"cuLaunchKernelEx"'), ("pid", "5"), ("tid", "6"),
     ("ts", "1599.0"), ("dur", "1"), ("args", '{"correlation": 2}')],
    [("ph", '"X"'), ("cat", '"cpu_op"'), ("name", '"aten::mm"'), ("tid", "null"), ("ts", "1400"), ("dur", "500")],
    [("ph", '"X"'), ("cat", '"user_annotation"'), ("name", r'"step \"0\""'), ("pid", "5"), ("tid", "6"),
     ("ts", "1000"), ("dur", "1000.000"), ("args", '"not an object, and not read for ranges"')],
    [("ph", '"B"'), ("cat", '"user_annotation"'), ("name", r'"b\u00e9"'), ("pid", "5"), ("tid", "6"), ("ts", "1100")],
    [("ph", '"E"'), ("cat", '"user_annotation"'), ("name", "7"), ("pid", "5"), ("tid", "6"), ("ts", "1.9e3")],
    [("ph", '"X"'), ("cat", '"gpu_memcpy"'), ("name", '"Memcpy HtoD"'), ("pid", "0"), ("tid", "7"), ("ts", "1700"),
     ("dur", "10"), ("args", '{"device": 0, "stream": 7, "correlation": 3, "bytes": 1048576}')],
    [("ph", '"X"'), ("cat", '"gpu_memset"'), ("name", "null"), ("ts", "1710"), ("dur", "1"), ("args", "null")],
    [("ph", '"X"'), ("cat", '"gpu_user_annotation"'), ("name", '"x"'), ("pid", "0"), ("tid", "7"), ("ts", "1"),
     ("dur", "1")],
    [("ph", '"M"'), ("name", '"process_name"'), ("pid", '"Spans"'), ("tid", '"x"'), ("ts", '"soon"'),
     ("args", '{"name": "python3", "deep": [[[[{"x": [true, false, null, -0.0, 1e-5, 12345678901234567890123]}]]]]}')],
    [("ph", '"i"'), ("cat", '{"an": "object"}'), ("s", '"g"'), ("name", "[1, 2]")],
    [("ph", "1"), ("cat", '"kernel"'), ("name", "2")],
    [("ph", '"X"'), ("cat", '"Kernels"'), ("dur", "true")],
    [],
]


def tricky_events(copies: int) -> str:
    ws = [" ", "\n", "\t", "\r\n  ", ""]
    out = []
    for i in range(copies):
        for e in TRICKY:
            sep = ws[i % len(ws)]
            out.append("{" + ("," + sep).join(f'"{k}"{sep}:{sep}{v}' for k, v in e) + sep + "}")
    return "[\n" + ",\n".join(out) + "\n]"


def outcome(path, monkeypatch, scanner: bool):
    """The trace or the problem reported, and whether the scanner read every piece."""
    with monkeypatch.context() as m:
        scanned = scanned_flags(m)
        if not scanner:
            no_scanner(m)
        try:
            result = kineto.read(path)
        except TraceFormatError as e:
            result = str(e)
    return result, bool(scanned) and all(scanned)


def assert_same_outcome(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, str):
        assert a == b
    else:
        assert_same(a, b)


@pytest.mark.parametrize("form", ["document", "array"])
def test_scanner_reads_tricky_valid_input_as_the_other_paths(tmp_path, monkeypatch, form):
    events = tricky_events(3000)  # a few MB: cut into many pieces with small reads
    text = events if form == "array" else '{"schemaVersion": 1, "traceEvents":' + events + ', "after": [1]}'
    path = tmp_path / "tricky.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(kineto, "_CHUNK", 64 << 10)
    fast, all_scanned = outcome(path, monkeypatch, True)
    assert all_scanned
    plain, _ = outcome(path, monkeypatch, False)
    assert_same_outcome(fast, plain)
    k = fast.tables["kernels"]
    assert len(k) == 3 * 3000 and '"a\\b">\n\t\u00e9/' in k["name"].iloc[0]
    assert list(k[["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].iloc[0]) == [2, 3, 1, 4, 5, 6]
    assert list(k[["grid_x", "block_x"]].iloc[2]) == [-1, -1]
    assert fast.meta["source"]["gpu_user_annotations_skipped"] == 3000


# One change to a valid kernel event each: what the scanner declines; the other paths then
# give the tables (string and float ids, a surrogate pair, a repeated field) or the problem.
KERNEL = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2, "args": %s}'
ARGS = '{"device": 0, "stream": 7, "correlation": 1, "grid": [1, 1, 1], "block": [32, 1, 1]}'
API = KERNEL.replace('"kernel"', '"cuda_runtime"')
DECLINED = {
    "string ts": KERNEL.replace("10.5", '"soon"') % ARGS,
    "missing name": KERNEL.replace('"name": "k", ', "") % ARGS,
    "null dur": KERNEL.replace('"dur": 2', '"dur": null') % ARGS,
    "bool ts": KERNEL.replace("10.5", "true") % ARGS,
    "huge ts": KERNEL.replace("10.5", "5e15") % ARGS,
    "long exponent": KERNEL.replace("10.5", "1e300") % ARGS,
    "args not an object": KERNEL % '"x"',
    "bool in grid": KERNEL % ARGS.replace("[1, 1, 1]", "[1, true, 1]"),
    "float device": KERNEL % ARGS.replace('"device": 0', '"device": 1.5'),
    "integral float device": KERNEL % ARGS.replace('"device": 0', '"device": 1.0'),
    "string stream": KERNEL % ARGS.replace('"stream": 7', '"stream": "stream 7"'),
    "correlation beyond int64": KERNEL % ARGS.replace('"correlation": 1', '"correlation": 18446744073709551616'),
    "repeated ts": KERNEL.replace('"dur": 2', '"dur": 2, "ts": 11') % ARGS,
    "surrogate pair": KERNEL.replace('"k"', r'"k\ud83d\ude80"') % ARGS,
    "lone surrogate": KERNEL.replace('"k"', r'"k\ud800"') % ARGS,
    "control character": KERNEL.replace('"k"', '"k\x01"') % ARGS,
    "deep args": KERNEL % ARGS.replace('"grid"', '"deep": ' + "[" * 100 + "]" * 100 + ', "grid"'),
    "trailing comma": KERNEL % ARGS.replace("}", ", }"),
    # Thread ids as text that only Python's str methods read right: left to them.
    "padded string tid of an API call": API.replace('"tid": 7', '"tid": " Spans"') % ARGS,
    "escaped string tid of an API call": API.replace('"tid": 7', r'"tid": "stream\u0020 7"') % ARGS,
    "non-ASCII string tid of an API call": API.replace('"tid": 7', '"tid": "fl\u00fcgel"') % ARGS,
    "two minus signs in a tid": API.replace('"tid": 7', '"tid": "--5"') % ARGS,
    "a tid of more digits than int64": API.replace('"tid": 7', '"tid": "' + "9" * 19 + '"') % ARGS,
    "B without pid": '{"ph": "B", "cat": "user_annotation", "name": "r", "tid": 1, "ts": 1}',
    "B without name": '{"ph": "B", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 1}',
}


@pytest.mark.parametrize("case", list(DECLINED))
def test_what_the_scanner_declines_gets_the_other_paths_result(tmp_path, monkeypatch, case):
    other = KERNEL.replace('"name": "k"', '"name": "other"') % ARGS
    path = tmp_path / "declined.json"
    path.write_text('{"traceEvents": [' + other + ",\n" + DECLINED[case] + "]}", encoding="utf-8")
    from workbench.trace.readers.kineto import _kineto_scan

    assert _kineto_scan.scan(("[" + DECLINED[case] + "]").encode()) is None
    fast, all_scanned = outcome(path, monkeypatch, True)
    assert not all_scanned
    plain, _ = outcome(path, monkeypatch, False)
    assert_same_outcome(fast, plain)


# Thread and process ids written as text, as 2020-2021 PyTorch wrote them (CPU threads as
# digits, GPU streams as "stream 7"; tests/corpus/kineto-202*-tbplugin-*): the scanner reads
# them as columns.ident codes them.
STRING_IDS = ['"4093687616"', '"-12"', '"0"', '"007"', '"stream 7"', '"Spans"', '""', '"-"', '"0x1f"', '"7 "']


@pytest.mark.parametrize("tid", STRING_IDS)
def test_string_ids_are_read_by_the_scanner_as_by_the_other_paths(tmp_path, monkeypatch, tid):
    events = [API.replace('"tid": 7', f'"tid": {tid}') % ARGS,
              API.replace('"pid": 0', f'"pid": {tid}').replace('"correlation": 1', '"correlation": 2') % ARGS,
              '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": %s, "ts": 9, "dur": 3}' % tid,
              KERNEL % ARGS]
    path = tmp_path / "ids.json"
    path.write_text('{"traceEvents": [' + ",\n".join(events) + "]}", encoding="utf-8")
    fast, all_scanned = outcome(path, monkeypatch, True)
    # A tid with a trailing space is Python's to strip: the scanner declines it.
    assert all_scanned == (tid != '"7 "')
    plain, _ = outcome(path, monkeypatch, False)
    assert_same_outcome(fast, plain)
    assert isinstance(fast, str) or len(fast.tables["api"]) == 2


def test_bad_utf8_is_declined(tmp_path, monkeypatch):
    from workbench.trace.readers.kineto import _kineto_scan

    good = (KERNEL % ARGS).encode()
    for bad in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"):
        assert _kineto_scan.scan(b"[" + good.replace(b'"k"', b'"k' + bad + b'"') + b"]") is None
    assert _kineto_scan.scan(b"[" + good.replace(b'"k"', "\"k\u20ac\U0001F680\"".encode()) + b"]") is not None


def test_scanned_times_are_python_floats_in_ns(monkeypatch):
    """Numbers of every form give the value Python's float() gives them, then ``_ns``."""
    rng = random.Random(7)
    texts = []
    for _ in range(4000):
        x = rng.choice([rng.uniform(0, 1e13), rng.uniform(-1e6, 1e6), rng.expovariate(1e-9), rng.random()])
        form = rng.choice(["%.3f", "%.17g", "%.6e", "%r", "%d", "%.25f", "%.0f", "%.12E"])
        texts.append(form % (int(x) if form == "%d" else x))
    texts += ["0", "-0", "-0.0", "1e15", "1e-22", "4503599627370497.5", "5080807972648.400000000001", "1E+2"]
    # three decimals (torch.profiler's), which the scanner takes as ns where a double keeps
    # them exact: around the bound, 2**43 us, every ending
    texts += ["%d.%03d" % (a, b) for a in (2**43 - 2, 2**43 - 1, 2**43, 2**43 + 1, 5080807972648, 0) for b in range(1000)]
    texts += ["%.3f" % rng.uniform(0, 10.0 ** rng.randint(0, 15)) for _ in range(4000)]
    body = ",".join(KERNEL.replace("10.5", t) % "null" for t in texts)
    end, (rows, *_) = decode.scan(memoryview(("[" + body + "]").encode()))
    expected = columns.ns(np.array([float(t) for t in texts]))
    assert (rows["kernels"]["start"] == expected).all()


# ---------------------------------------------------------------- the scanner's layouts and memos

def varied_events(n: int, seed: int) -> str:
    """Events of a few fixed byte layouts whose values vary in length, form and type: what the
    scanner reads along learnt layouts and remembered values (see ``shapes`` there)."""
    rng = random.Random(seed)
    ints = ["0", "7", "12", "123", "-1", "9223372036854775807", "-9223372036854775808", "1000000000000"]
    nums = ints + ["1.5", "12.25", "1e3", "1E-2", "0.000", "5080807972648.400", "-0.0", "2.5e+1"]
    strs = ['"k"', '"kk"', r'"k\"q"', r'"\u00e9t\u00e9"', '"中文"', '"a\\\\b"', '""', '"k\\n"']
    times = [t for t in nums if len(t) < 19]  # beyond ~140 years the scanner leaves it to the checks
    skips = nums + strs + ["null", "true", "false", "[]", "{}", '[1, {"a": [2, "]"]}]', '{"x": {"y": null}}']
    grids = ["[1, 1, 1]", "[4, 7, 1]", "[4, 7]", "[12, 1, 1, 1]", "[]", "null", "[1,1,1]"]
    ids = ints + ["null"]
    # ph and cat: the scanner branches on them (see shapes); some are prefixes of others, one
    # is escaped, and some values make the event go to no table
    phs = ['"X"'] * 6 + ['"i"', '"XX"']
    cats = ['"kernel"'] * 6 + ['"kernel2"', '"cuda_runtime"', '"cuda_driver"', r'"cuda\u005fruntime"', '"cpu_op"',
                              '"user_annotation"', '""']
    layouts = [
        '{\n    "ph": %(ph)s, "cat": %(cat)s, "name": %(name)s, "pid": 0, "tid": %(id)s,\n    "ts": %(ts)s, '
        '"dur": %(dur)s,\n    "args": {\n      "External id": %(skip)s, "device": %(id2)s, "stream": 7, '
        '"correlation": %(id3)s, "grid": %(grid)s, "block": %(grid2)s, "occupancy": %(skip2)s\n    }\n  }',
        '{\n    "ph": "X", "cat": "cuda_runtime", "name": %(name)s, "pid": %(id)s, "tid": 5,\n    "ts": %(ts)s, '
        '"dur": %(dur)s,\n    "args": {\n      "cbid": %(skip)s, "correlation": %(id3)s\n    }\n  }',
        '{"ph": "X", "cat": "cpu_op", "name": %(name)s, "pid": 5, "tid": %(id)s, "ts": %(ts)s, "dur": %(dur)s, '
        '"args": {"skip": %(skip)s, "more": %(skip2)s}}',
        '{"ph": "f", "id": %(skip)s, "pid": 0, "tid": 7, "ts": %(ts)s, "cat": "ac2g", "name": "ac2g", "bp": "e"}',
    ]
    out = []
    for _ in range(n):
        # a few values repeat for a while, as a kernel's grid does, then change
        values = {
            "name": rng.choice(strs), "id": rng.choice(ids), "id2": rng.choice(ids), "id3": rng.choice(ids),
            "ts": rng.choice(times), "dur": rng.choice([t for t in times if t[0] != "-"]), "skip": rng.choice(skips), "skip2": rng.choice(skips),
            "grid": rng.choice(grids), "grid2": rng.choice(grids[:3]), "ph": rng.choice(phs), "cat": rng.choice(cats),
        }
        event = rng.choice(layouts) % values
        if rng.random() < 0.02:
            event = event.replace(", ", ",  ", 1)  # a layout seen once
        out.append(event)
    return "[\n  " + ",\n  ".join(out) + "\n]"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scanner_reads_varied_values_in_repeated_layouts_as_the_other_paths(tmp_path, monkeypatch, seed):
    path = tmp_path / "varied.json"
    path.write_text('{"traceEvents": ' + varied_events(6000, seed) + "}", encoding="utf-8")
    monkeypatch.setattr(kineto, "_CHUNK", 64 << 10)
    fast, all_scanned = outcome(path, monkeypatch, True)
    assert all_scanned
    plain, _ = outcome(path, monkeypatch, False)
    assert_same_outcome(fast, plain)
    assert len(fast.tables["kernels"]) > 500 and len(fast.tables["api"]) > 100 and len(fast.tables["ranges"]) > 50


def test_scanner_declines_a_repeated_layout_gone_bad(tmp_path, monkeypatch):
    """A value that the learnt layout read before, now of a type the scanner leaves to the
    other paths (a string ts) or a field given twice, is declined there too."""
    good = KERNEL % ARGS
    for bad in (good.replace("10.5", '"soon"'), good.replace('"dur": 2', '"dur": 2, "dur": 2'),
                good.replace('"name": "k"', '"ph": "X", "name": "k"'), good.replace('"name": "k"', '"cat": "kernel", "name": "k"'),
                good.replace('"ts": 10.5', '"ts": 10.5 ').replace('"dur": 2', '"dur": 2, "ts": 3')):
        text = "[" + ",".join([good] * 50 + [bad] + [good] * 5) + "]"
        from workbench.trace.readers.kineto import _kineto_scan

        assert _kineto_scan.scan(text.encode()) is None, bad


def test_scanner_with_more_layouts_than_it_remembers(monkeypatch):
    """Every event of its own layout (unique keys): the trie fills up and the rest is read
    generically, with the same rows."""
    events = [KERNEL.replace('"pid": 0', f'"pid": 0, "extra{i}": {i}') % ARGS for i in range(6000)]
    body = ("[" + ",".join(events) + "]").encode()
    end, (rows, *_) = decode.scan(memoryview(body))
    assert end == len(body) and len(rows["kernels"]["start"]) == 6000
    assert (rows["kernels"]["correlation"] == 1).all()


def test_cpu_ops_after_gpu_events_are_checked_not_kept(tmp_path, monkeypatch):
    """Once a piece held GPU events, the scanner makes no rows of cpu_op events (``Tables.add``
    drops them), but still checks them: a bad one is reported as the other paths report it,
    by one reader or by several sharing what they saw."""
    from workbench.trace.readers.kineto import _kineto_scan

    op = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 5, "ts": %d, "dur": 1, "args": {"pad": "%s"}}'
    body = ",".join(op % (10 + i, "p" * 200) for i in range(100)).encode()
    kept, dropped = (_kineto_scan.scan(body, 0, len(body), keep) for keep in (True, False))
    assert kept[1] == dropped[1] == 100  # events
    assert len(kept[3][3][1]) == 100 * 5 * 8 and len(dropped[3][3][1]) == 0  # cpu_ops rows: 5 int64 each
    for bad in (b'"ts": 50,', b'"name": "aten::mm", "pid": 5, "tid": 5, "ts": 50,'):
        broken = body.replace(bad, bad.replace(b"50", b'"soon"').replace(b'"aten::mm"', b"7"), 1)
        assert _kineto_scan.scan(broken, 0, len(broken), False) is None

    ops = [op % (100 + i, "p" * 200) for i in range(20000)]
    kernel = KERNEL % ARGS
    for late_bad in (False, True):
        if late_bad:
            ops[-300] = ops[-300].replace('"ts": %d' % (100 + 19700), '"ts": "soon"')
        path = tmp_path / f"ops{late_bad}.json"
        path.write_text('{"traceEvents": [' + ",\n".join([kernel, *ops]) + "]}", encoding="utf-8")
        monkeypatch.setattr(kineto, "_CHUNK", 256 << 10)
        fast, all_scanned = outcome(path, monkeypatch, True)
        plain, _ = outcome(path, monkeypatch, False)
        assert_same_outcome(fast, plain)
        assert all_scanned != late_bad
        threads, apart = threaded(path, 2, monkeypatch)
        assert apart
        assert_same_outcome(threads, plain)
        if late_bad:
            assert "cpu_op ts has a non-numeric value 'soon'" in plain
        else:
            assert len(fast.tables["kernels"]) == 1 and fast.meta["source"]["events"] == 20001
            assert fast.meta["source"]["work_units"] == "kernel"
