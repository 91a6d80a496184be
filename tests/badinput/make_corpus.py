#!/usr/bin/env python3
"""Generate the bad-input corpus: broken, hostile and odd trace files for both importers.

    python tests/badinput/make_corpus.py OUTDIR [--huge]

writes one file (or directory) per case into OUTDIR and ``OUTDIR/manifest.json``, a list of
``{"file", "category", "expect", "match", "note"}``:

- ``expect == "error"``: ``workbench import`` must exit 2 with one line naming the file and
  the problem (``match``, if set, must appear in it, case-insensitive);
- ``expect == "ok"``: it must import (a documented tolerant result, see RELIABILITY.md);
- ``expect == "any"``: either of the two, never anything else (no traceback, hang or crash).

``--huge`` adds the large cases (a 50 MB kernel name, a 50 MB NVTX string, 100,000-deep
nesting); they are small on disk when gzipped but big in memory. The tests generate the
corpus into a temporary directory at test time, so nothing generated needs committing.
Standard library only; deterministic output.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracegen as tg  # noqa: E402

ESC = "\x1b[31mRED\x1b[0m\x07\x1b]0;pwned\x07"
HTML = "<script>alert(1)</script><img src=x onerror=alert(2)>&amp;"


class Corpus:
    def __init__(self, out: Path):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.cases: list[dict] = []

    def add(self, name: str, category: str, expect: str, match: str | None = None, note: str = "") -> Path:
        assert expect in ("error", "ok", "any"), expect
        assert all(c["file"] != name for c in self.cases), name
        self.cases.append({"file": name, "category": category, "expect": expect, "match": match, "note": note})
        return self.out / name

    def bytes(self, name, data: bytes, category, expect, match=None, note=""):
        self.add(name, category, expect, match, note).write_bytes(data)

    def json(self, name, doc, category, expect, match=None, note="", gz=False):
        tg.dump(doc, self.add(name, category, expect, match, note), gz=gz)

    def sqlite(self, name, rows, category, expect, match=None, note="", schema=None, gz=False):
        tg.write_sqlite(rows, self.add(name, category, expect, match, note), schema=schema, gz=gz)

    def write_manifest(self):
        (self.out / "manifest.json").write_text(json.dumps(self.cases, indent=1) + "\n")


# ---------------------------------------------------------------- gzip and raw bytes

def gzip_cases(c: Corpus, base_json: bytes, base_sqlite: bytes):
    gj = gzip.compress(base_json, mtime=0)
    gs = gzip.compress(base_sqlite, mtime=0)
    for frac in (0.1, 0.5, 0.9, 0.99):
        c.bytes(f"gz-truncated-json-{int(frac * 100)}.json.gz", gj[: int(len(gj) * frac)], "gzip", "error", "gzip")
        c.bytes(f"gz-truncated-sqlite-{int(frac * 100)}.sqlite.gz", gs[: int(len(gs) * frac)], "gzip", "error", "gzip")
    c.bytes("gz-header-only.json.gz", gj[:10], "gzip", "error", "gzip")
    c.bytes("gz-magic-only.json.gz", b"\x1f\x8b", "gzip", "error", "gzip")
    bad_crc = bytearray(gj)
    bad_crc[-8] ^= 0xFF
    c.bytes("gz-bad-crc.json.gz", bytes(bad_crc), "gzip", "error", "gzip")
    bad_len = bytearray(gs)
    bad_len[-1] ^= 0x01
    c.bytes("gz-bad-length.sqlite.gz", bytes(bad_len), "gzip", "error", "gzip")
    corrupt = bytearray(gj)
    for i in range(20, len(corrupt) - 20, 97):
        corrupt[i] ^= 0x5A
    c.bytes("gz-corrupt-deflate.json.gz", bytes(corrupt), "gzip", "error", "gzip")
    c.bytes("gz-garbage-after-header.json.gz", gj[:10] + os.urandom(0) + bytes(range(256)) * 4, "gzip", "error", "gzip")
    c.bytes("gz-of-nothing.json.gz", gzip.compress(b"", mtime=0), "gzip", "error", "empty")
    c.bytes("gz-double.json.gz", gzip.compress(gj, mtime=0), "gzip", "error")
    c.bytes("gz-trailing-garbage.json.gz", gj + b"NOT GZIP AT ALL", "gzip", "any",
            note="Python's gzip reads concatenated members; trailing non-gzip bytes are an error")


def raw_cases(c: Corpus):
    c.bytes("empty.json", b"", "raw", "error", "empty")
    c.bytes("empty.sqlite", b"", "raw", "error", "empty")
    c.bytes("whitespace.json", b"  \n\t \n", "raw", "error")
    c.bytes("zeros.bin", b"\x00" * 4096, "raw", "error", "not a trace")
    c.bytes("random.bin", bytes((i * 7919 + 13) % 256 for i in range(8192)), "raw", "error")
    c.bytes("text.txt", b"hello, this is not a trace\n", "raw", "error", "not a trace")
    c.bytes("html.json", f"<html>{HTML}</html>".encode(), "raw", "error")
    c.bytes("utf16.json", '{"traceEvents": []}'.encode("utf-16"), "raw", "error")
    c.bytes("sqlite-header-only.sqlite", b"SQLite format 3\x00", "raw", "error")
    c.bytes("sqlite-header-garbage.sqlite", b"SQLite format 3\x00" + b"\xff" * 4000, "raw", "error")
    c.bytes("fake.nsys-rep", b"NSYS" + bytes(range(256)) * 8, "raw", "error",
            note="needs nsys on PATH, else a clean 'not on PATH' error; with nsys, 'nsys export failed'")
    c.bytes("text-mentioning-nsys.txt", b"exported with nsys 2025.3\n", "raw", "error", "not a trace")


# ---------------------------------------------------------------- JSON / Kineto

def json_cases(c: Corpus, base: dict):
    good = json.dumps(base).encode()
    c.bytes("json-not-json.json", b"{this is not json", "json", "error", "JSON")
    c.bytes("json-truncated-10.json", good[: len(good) // 10], "json", "error", "JSON")
    c.bytes("json-truncated-50.json", good[: len(good) // 2], "json", "error", "JSON")
    c.bytes("json-truncated-last-byte.json", good[:-1], "json", "error", "JSON")
    c.bytes("json-trailing-comma.json", good[:-2] + b",]}", "json", "error", "JSON")
    c.bytes("json-trailing-garbage.json", good + b"garbage", "json", "error", "JSON")
    c.bytes("json-nan.json", good.replace(b'"ts": 1000.1', b'"ts": NaN', 1), "json", "error")
    c.bytes("json-number-top.json", b"42", "json", "error")
    c.bytes("json-string-top.json", b'"traceEvents"', "json", "error")
    c.json("json-no-traceEvents.json", {"schemaVersion": 1, "events": []}, "json", "error", "traceEvents")
    c.json("json-empty-object.json", {}, "json", "error", "traceEvents")
    c.json("json-traceEvents-empty.json", {"traceEvents": []}, "json", "error", "empty")
    c.json("json-bare-array-empty.json", [], "json", "error", "empty")
    c.json("json-traceEvents-object.json", {"traceEvents": {"a": 1}}, "json", "error", "traceEvents")
    c.json("json-traceEvents-string.json", {"traceEvents": "[]"}, "json", "error", "traceEvents")
    c.json("json-traceEvents-null.json", {"traceEvents": None}, "json", "error", "traceEvents")
    c.json("json-events-not-objects.json", {"traceEvents": [1, "two", None]}, "json", "error", "not an object")
    c.json("json-only-metadata.json", {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]},
           "json", "error", "empty")
    c.json("json-unknown-phases.json", {"traceEvents": [{"ph": "Q", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]},
           "json", "error", "empty")
    c.bytes("json-non-utf8.json", good.replace(b"kv_write", b"kv_\xff\xfe_write", 1), "json", "error", "JSON",
            note="orjson rejects invalid UTF-8; the file is not valid JSON")
    c.bytes("json-bom.json", b"\xef\xbb\xbf" + good, "json", "ok", note="a UTF-8 BOM is skipped")
    c.bytes("json-lone-surrogate.json", good.replace(b'"kv_write"', b'"kv_\\ud800_write"', 1), "json", "any",
            note="a lone UTF-16 surrogate escape")
    deep = b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    c.bytes("json-deep-array-nesting.json", deep, "json", "error",
            note="100,000 nested arrays: the JSON parser's recursion limit, not Python's stack")
    dup = dict(base)
    c.bytes("json-duplicate-keys.json", good[:-1] + b', "traceEvents": []}', "json", "any",
            note="a second traceEvents key after the first")
    del dup


KINETO_BAD_VALUES = {
    "str": "abc",
    "numstr": "123",
    "list": [1, 2],
    "dict": {"a": 1},
    "null": None,
    "bool": True,
    "huge": 1e300,
    "bigint": 2**70,
    "negative": -5,
}


def _set(ev: dict, path: tuple, value):
    d = ev
    for k in path[:-1]:
        d = d.setdefault(k, {})
    d[path[-1]] = value


def kineto_field_cases(c: Corpus, spec: dict):
    """Wrong types in every field the Kineto importer reads, in each event kind."""
    doc = tg.kineto_doc(spec)
    doc["traceEvents"].append({"ph": "B", "cat": "user_annotation", "name": "be_range", "pid": 4242, "tid": 9, "ts": 10.0})
    doc["traceEvents"].append({"ph": "E", "cat": "user_annotation", "name": "be_range", "pid": 4242, "tid": 9, "ts": 20.0})
    first = {}
    for i, e in enumerate(doc["traceEvents"]):
        key = (e["cat"], e["ph"] if e["cat"] == "user_annotation" else "X")
        first.setdefault(key, i)
    fields = {
        ("kernel", "X"): [("name",), ("ts",), ("dur",), ("args",), ("args", "grid"), ("args", "block"),
                          ("args", "device"), ("args", "stream"), ("args", "correlation")],
        ("cuda_runtime", "X"): [("name",), ("ts",), ("dur",), ("pid",), ("tid",), ("args",), ("args", "correlation")],
        ("user_annotation", "X"): [("name",), ("ts",), ("dur",), ("pid",), ("tid",)],
        ("user_annotation", "B"): [("name",), ("ts",), ("pid",), ("tid",)],
        ("gpu_memcpy", "X"): [("name",), ("ts",), ("dur",), ("args",), ("args", "device"), ("args", "stream"),
                              ("args", "correlation"), ("args", "bytes")],
        ("gpu_memset", "X"): [("ts",), ("dur",), ("args", "bytes"), ("args", "correlation")],
    }
    values = dict(KINETO_BAD_VALUES)
    for key, paths in fields.items():
        idx = first[key]
        for path in paths:
            for vname, v in values.items():
                if vname == "negative" and path[-1] in ("name", "args"):
                    continue
                d = copy.deepcopy(doc)
                _set(d["traceEvents"][idx], path, v)
                fname = f"kineto-{key[0]}-{key[1]}-{'.'.join(path)}-{vname}.json"
                c.json(fname, d, "kineto-field-type", "any", note=f"{key[0]} {key[1]} event: {'.'.join(path)} = {v!r}"[:120])
    # fields the importer reads from every event and the top level
    for vname, v in values.items():
        for field in ("ph", "cat"):
            d = copy.deepcopy(doc)
            for e in d["traceEvents"]:
                e[field] = v
            c.json(f"kineto-all-{field}-{vname}.json", d, "kineto-field-type", "any")
    for field in ("deviceProperties", "distributedInfo", "schemaVersion", "cuda_driver_version"):
        for vname, v in values.items():
            d = copy.deepcopy(doc)
            d[field] = v
            c.json(f"kineto-top-{field}-{vname}.json", d, "kineto-field-type", "ok", note="metadata is optional")
        d = copy.deepcopy(doc)
        d[field] = [v for v in values.values()]
        c.json(f"kineto-top-{field}-mixed-list.json", d, "kineto-field-type", "ok", note="metadata is optional")
    d = copy.deepcopy(doc)
    d["deviceProperties"] = [{"name": v} for v in values.values()] + [1, None, "x"]
    c.json("kineto-top-deviceProperties-bad-entries.json", d, "kineto-field-type", "ok")


def kineto_semantic_cases(c: Corpus, spec: dict):
    pid, tid = 4242, 7
    # negative durations
    d = tg.kineto_doc(spec)
    for e in d["traceEvents"]:
        if e["cat"] == "kernel":
            e["dur"] = -3.0
            break
    c.json("kineto-negative-kernel-dur.json", d, "semantic", "error", "negative")
    d = tg.kineto_doc(spec)
    d["traceEvents"][0]["dur"] = -1.0
    c.json("kineto-negative-range-dur.json", d, "semantic", "error", "negative")
    d = tg.kineto_doc(spec)
    for e in d["traceEvents"]:
        if e["cat"] == "cuda_runtime":
            e["dur"] = -0.5
            break
    c.json("kineto-negative-api-dur.json", d, "semantic", "error", "negative")
    # B/E: unmatched begin, unmatched end, end on another thread
    be = tg.kineto_doc(spec, range_style="BE")
    d = copy.deepcopy(be)
    d["traceEvents"].append({"ph": "B", "cat": "user_annotation", "name": "never_ends", "pid": pid, "tid": tid, "ts": 999999.0})
    c.json("kineto-B-never-ends.json", d, "semantic", "error", "never ends")
    d = copy.deepcopy(be)
    d["traceEvents"].insert(0, {"ph": "E", "cat": "user_annotation", "name": "orphan", "pid": pid, "tid": tid, "ts": 0.5})
    c.json("kineto-E-without-B.json", d, "semantic", "error", "no matching begin")
    d = copy.deepcopy(be)
    d["traceEvents"].append({"ph": "B", "cat": "user_annotation", "name": "hop", "pid": pid, "tid": tid, "ts": 5000.0})
    d["traceEvents"].append({"ph": "E", "cat": "user_annotation", "name": "hop", "pid": pid, "tid": tid + 1, "ts": 5001.0})
    c.json("kineto-range-ends-on-other-thread.json", d, "semantic", "error",
           note="B/E pair per thread: the begin never ends on its thread, the end has no begin on its own")
    # overlapping (crossing) ranges: tolerant
    cross = {"ranges": [(pid, tid, "a", 1000, 5000), (pid, tid, "b", 3000, 8000)],
             "api": [(pid, tid, "cudaLaunchKernel", 2000, 2100, 1), (pid, tid, "cudaLaunchKernel", 4000, 4100, 2),
                     (pid, tid, "cudaLaunchKernel", 6000, 6100, 3)],
             "kernels": [("k", 10000 + i, 10001 + i, 0, 7, i, pid) for i in (1, 2, 3)]}
    c.json("kineto-crossing-ranges.json", tg.kineto_doc(cross), "semantic", "ok",
           note="innermost = most recently started open range (nesting.py)")
    c.json("kineto-duplicate-correlation.json", _dup_corr(tg.kineto_doc(spec)), "semantic", "ok",
           note="duplicate correlation ids: the first API call wins (model.py)")
    k_only = {"kernels": [("k", 1000, 2000, 0, 7, 1, pid)]}
    c.json("kineto-kernel-without-launch.json", tg.kineto_doc(k_only), "semantic", "ok",
           note="reported as (no launch record)")
    c.json("kineto-zero-duration.json", tg.kineto_doc({"ranges": [(pid, tid, "z", 10, 10)], "kernels": [("k", 5, 5, 0, 7, 1, pid)]}),
           "semantic", "ok", note="zero-length events are legal")
    d = tg.kineto_doc(spec)
    d["traceEvents"][0]["ts"] = 9.3e15
    c.json("kineto-ts-overflow.json", d, "semantic", "error", note="a timestamp beyond int64 nanoseconds")
    d = tg.kineto_doc(spec)
    d["traceEvents"][0]["ts"] = 1.7e15  # an epoch-microsecond timestamp is fine
    c.json("kineto-ts-epoch.json", d, "semantic", "any")
    # hostile names
    for label, name in (("escape", ESC), ("html", HTML), ("newline", "line1\nline2\r\nline3"), ("nul", "a\x00b"),
                        ("bidi", "abc\u202edcba\u2066x"), ("emoji", "\U0001F600 kv")):
        s = copy.deepcopy(spec)
        s["ranges"] = [(p, t, name if n == "kv_write" else n, a, b) for p, t, n, a, b in s["ranges"]]
        s["kernels"] = [(name + " " + n, *rest) for n, *rest in s["kernels"]]
        c.json(f"kineto-names-{label}.json", tg.kineto_doc(s), "names", "ok", note="kept as data, escaped on output")
    # a range that never ends: an X event with no dur
    d = tg.kineto_doc(spec)
    del d["traceEvents"][0]["dur"]
    c.json("kineto-X-without-dur.json", d, "semantic", "error", "dur")


def _dup_corr(doc):
    apis = [e for e in doc["traceEvents"] if e["cat"] == "cuda_runtime"]
    extra = copy.deepcopy(apis[0])
    extra["ts"] += 0.001
    extra["tid"] = 99
    doc["traceEvents"].append(extra)
    return doc


def kineto_deep(c: Corpus, depth: int, pid=1, tid=1, name=None, gz=True):
    ev = []
    for i in range(depth):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"d{i}", "pid": pid, "tid": tid,
                   "ts": float(i), "dur": float(2 * depth - 2 * i)})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
               "ts": float(depth) + 0.5, "dur": 0.1, "args": {"correlation": 1}})
    ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": float(depth) + 1, "dur": 1.0,
               "args": {"correlation": 1, "device": 0, "stream": 7}})
    c.json(name or f"kineto-nesting-{depth}-deep.json.gz", {"traceEvents": ev}, "size", "ok",
           note=f"{depth}-deep range nesting", gz=gz)


def kineto_crossing_many(c: Corpus, n: int):
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"c{i}", "pid": 1, "tid": 1, "ts": float(i), "dur": float(n)}
          for i in range(n)]
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": n + 0.5,
               "dur": 0.1, "args": {"correlation": 1}})
    ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": n + 1.0, "dur": 1.0,
               "args": {"correlation": 1, "device": 0, "stream": 7}})
    c.json(f"kineto-crossing-{n}.json.gz", {"traceEvents": ev}, "size", "ok",
           note=f"{n} mutually crossing ranges (each ends after all later ones start)", gz=True)


def kineto_huge_string(c: Corpus, mb: int, spec: dict):
    big = "A" * (mb << 20)
    s = copy.deepcopy(spec)
    s["kernels"][0] = (big,) + tuple(s["kernels"][0][1:])
    s["ranges"][0] = s["ranges"][0][:2] + (big,) + s["ranges"][0][3:]
    c.json(f"kineto-huge-name-{mb}MB.json.gz", tg.kineto_doc(s), "size", "ok",
           note=f"a {mb} MB kernel name and range name", gz=True)
    # a huge string that is full of event-boundary look-alikes
    tricky = '},{"ph":"X"},{' * ((mb << 20) // 16)
    s = copy.deepcopy(spec)
    s["kernels"][0] = (tricky,) + tuple(s["kernels"][0][1:])
    c.json(f"kineto-huge-tricky-name-{mb}MB.json.gz", tg.kineto_doc(s), "size", "ok",
           note="a name made of '},{' event-boundary look-alikes", gz=True)


# ---------------------------------------------------------------- nsys SQLite

def nsys_cases(c: Corpus, spec: dict):
    rows = tg.nsys_rows(spec)
    schema = tg.NSYS_SCHEMA
    c.sqlite("nsys-valid.sqlite", rows, "nsys-control", "ok", note="the unmodified base file")
    c.sqlite("nsys-empty-tables.sqlite", {}, "nsys-semantic", "error", "empty")
    # each table missing
    for t in tg.NSYS_READ:
        sch = {k: v for k, v in schema.items() if k != t}
        match = None
        if t == "CUPTI_ACTIVITY_KIND_KERNEL":
            expect, match = "error", "CUPTI_ACTIVITY_KIND_KERNEL"
        elif t == "StringIds":
            expect, match = "error", "StringIds"
        else:
            expect = "ok"
        c.sqlite(f"nsys-missing-table-{t}.sqlite", rows, "nsys-missing-table", expect, match,
                 note="optional tables may be absent", schema=sch)
    # each column read, missing
    for t, cols in tg.NSYS_READ.items():
        for col in cols:
            sch = dict(schema)
            sch[t] = _drop_col(schema[t], col)
            r = dict(rows)
            idx = _col_index(schema[t], col)
            r[t] = [row[:idx] + row[idx + 1:] for row in rows.get(t, [])]
            c.sqlite(f"nsys-missing-column-{t}.{col}.sqlite", r, "nsys-missing-column", "any", schema=sch)
    # NULL, text, blob, float, huge values in each column read
    loose = {t: _loose(ddl) for t, ddl in schema.items()}  # no NOT NULL / PRIMARY KEY, so anything can go in
    for t, cols in tg.NSYS_READ.items():
        if not rows.get(t):
            continue
        for col in cols:
            idx = _col_index(schema[t], col)
            for vname, v in (("null", None), ("text", "abc"), ("blob", b"\xff\x00\xfe"), ("float", 1.5),
                             ("hugefloat", 1e300), ("negative", -7), ("nonutf8-text", "kv\udcff")):
                r = dict(rows)
                r[t] = [row[:idx] + (v,) + row[idx + 1:] if i == 0 else row for i, row in enumerate(rows[t])]
                if vname == "nonutf8-text":
                    r = _with_raw_text(r, t, idx)
                c.sqlite(f"nsys-value-{t}.{col}-{vname}.sqlite", r, "nsys-bad-value", "any", schema=loose)
    # semantic problems
    r = _edit(rows, "NVTX_EVENTS", 0, end=None)
    c.sqlite("nsys-range-never-ends.sqlite", r, "nsys-semantic", "error", "never ends")
    r = _edit(rows, "NVTX_EVENTS", 0, end=-1)
    c.sqlite("nsys-range-end-minus-one.sqlite", r, "nsys-semantic", "error", "never ends")
    r = _edit(rows, "NVTX_EVENTS", 1, endGlobalTid=tg.gtid(4242, 99))
    c.sqlite("nsys-range-ends-on-other-thread.sqlite", r, "nsys-semantic", "ok",
             note="an NVTX start/end range closed on another thread is kept on its starting thread")
    r = _edit(rows, "CUPTI_ACTIVITY_KIND_KERNEL", 0, start=5000, end=4000)
    c.sqlite("nsys-negative-kernel-duration.sqlite", r, "nsys-semantic", "error", "negative")
    r = _edit(rows, "NVTX_EVENTS", 0, start=5000, end=4000)
    c.sqlite("nsys-negative-range-duration.sqlite", r, "nsys-semantic", "error", "negative")
    r = _edit(rows, "CUPTI_ACTIVITY_KIND_RUNTIME", 0, start=5000, end=4000)
    c.sqlite("nsys-negative-api-duration.sqlite", r, "nsys-semantic", "error", "negative")
    r = dict(rows)
    r["CUPTI_ACTIVITY_KIND_RUNTIME"] = rows["CUPTI_ACTIVITY_KIND_RUNTIME"] + [
        (x[0] + 1, x[1] + 1, x[2], tg.gtid(4242, 55), *x[4:]) for x in rows["CUPTI_ACTIVITY_KIND_RUNTIME"]]
    c.sqlite("nsys-duplicate-correlation.sqlite", r, "nsys-semantic", "ok", note="the first API call wins")
    r = dict(rows)
    r["StringIds"] = [(i, s) for i, s in rows["StringIds"] if i != rows["CUPTI_ACTIVITY_KIND_KERNEL"][0][7]]
    c.sqlite("nsys-dangling-string-id.sqlite", r, "nsys-semantic", "error", "StringIds")
    r = dict(rows)
    r["NVTX_EVENTS"] = [(s, e, 59, None, None, None, None, g, None, 999999, 0) for s, e, _, _, _, _, _, g, _, _, _ in rows["NVTX_EVENTS"]]
    c.sqlite("nsys-dangling-textId.sqlite", r, "nsys-semantic", "error", "StringIds")
    r = dict(rows)
    r["NVTX_EVENTS"] = [(s, e, 59, None, None, None, None, g, None, None, 0) for s, e, _, _, _, _, _, g, _, _, _ in rows["NVTX_EVENTS"]]
    c.sqlite("nsys-nvtx-no-text.sqlite", r, "nsys-semantic", "ok", note="ranges without text get an empty name")
    r = dict(rows)
    r["NVTX_EVENTS"] = rows["NVTX_EVENTS"] + [(0, None, 75, None, None, None, ESC, None, None, None, 5),
                                              (10, 20, 59, None, None, None, "in-domain", tg.gtid(4242, 7), None, None, 5),
                                              (30, 40, 59, None, None, None, "unknown-domain", tg.gtid(4242, 7), None, None, 77)]
    c.sqlite("nsys-nvtx-domains.sqlite", r, "nsys-semantic", "ok")
    # crossing ranges and deep nesting
    cross = {"ranges": [(4242, 7, "a", 1000, 5000), (4242, 7, "b", 3000, 8000)],
             "api": [(4242, 7, "cudaLaunchKernel", t, t + 100, i) for i, t in ((1, 2000), (2, 4000), (3, 6000))],
             "kernels": [("k", 10000 + i, 10001 + i, 0, 7, i, 4242) for i in (1, 2, 3)]}
    c.sqlite("nsys-crossing-ranges.sqlite", tg.nsys_rows(cross), "nsys-semantic", "ok",
             note="innermost = most recently started open range")
    # hostile names via StringIds and text
    for label, name in (("escape", ESC), ("html", HTML), ("newline", "a\nb"), ("nul", "a\x00b")):
        s = copy.deepcopy(spec)
        s["ranges"] = [(p, t, name if n == "kv_write" else n, a, b) for p, t, n, a, b in s["ranges"]]
        s["kernels"] = [(name + n, *rest) for n, *rest in s["kernels"]]
        c.sqlite(f"nsys-names-{label}.sqlite", tg.nsys_rows(s), "names", "ok", note="kept as data, escaped on output")
    # not nsys at all: an unrelated SQLite database, a view loop, a trigger
    c.sqlite("nsys-unrelated-db.sqlite", {"users": [(1, "x")]}, "nsys-missing-table", "error",
             "CUPTI_ACTIVITY_KIND_KERNEL", schema={"users": "id INTEGER, name TEXT"})
    p = c.add("nsys-kernel-is-broken-view.sqlite", "nsys-missing-table", "error")
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM t")
    con.execute("DROP TABLE t")
    con.commit()
    con.close()
    # truncated and corrupted database files
    base = (c.out / "nsys-valid.sqlite").read_bytes()
    for frac in (0.25, 0.5, 0.75):
        c.bytes(f"nsys-truncated-{int(frac * 100)}.sqlite", base[: int(len(base) * frac)], "nsys-corrupt", "any")
    corrupt = bytearray(base)
    for i in range(200, len(corrupt), 61):
        corrupt[i] ^= 0xA5
    c.bytes("nsys-corrupt-pages.sqlite", bytes(corrupt), "nsys-corrupt", "any")
    hdr = bytearray(base)
    hdr[16:18] = b"\x00\x03"  # page size 3: invalid
    c.bytes("nsys-bad-page-size.sqlite", bytes(hdr), "nsys-corrupt", "error")


def nsys_deep(c: Corpus, depth: int):
    g = tg.gtid(1, 1)
    nv = [(i, 2 * depth - i, 59, None, None, None, f"d{i}", g, None, None, 0) for i in range(depth)]
    rows = tg.nsys_rows({"api": [(1, 1, "cudaLaunchKernel", depth + 1, depth + 2, 1)],
                         "kernels": [("k", depth + 5, depth + 6, 0, 7, 1, 1)]})
    rows["NVTX_EVENTS"] = nv
    c.sqlite(f"nsys-nesting-{depth}-deep.sqlite.gz", rows, "size", "ok", note=f"{depth}-deep NVTX nesting", gz=True)


def nsys_huge_string(c: Corpus, mb: int, spec: dict):
    rows = tg.nsys_rows(spec, registered_every=1)
    big = "B" * (mb << 20)
    sid = rows["NVTX_EVENTS"][0][9]
    rows["StringIds"] = [(i, big if i == sid else s) for i, s in rows["StringIds"]]
    # every range refers to the same huge registered string: a small file, a big trace
    rows["NVTX_EVENTS"] = [r[:9] + (sid,) + r[10:] for r in rows["NVTX_EVENTS"]]
    c.sqlite(f"nsys-huge-string-{mb}MB.sqlite.gz", rows, "size", "ok",
             note=f"every NVTX range named by one {mb} MB registered string", gz=True)


def _drop_col(ddl: str, col: str) -> str:
    parts = [p.strip() for p in ddl.split(",")]
    return ", ".join(p for p in parts if p.split()[0] != col)


def _col_index(ddl: str, col: str) -> int:
    return [p.strip().split()[0] for p in ddl.split(",")].index(col)


def _loose(ddl: str) -> str:
    return ", ".join(p.strip().split()[0] for p in ddl.split(","))


def _edit(rows, table, i, **vals):
    cols = [p.strip().split()[0] for p in tg.NSYS_SCHEMA[table].split(",")]
    r = dict(rows)
    row = list(rows[table][i])
    for k, v in vals.items():
        row[cols.index(k)] = v
    r[table] = list(rows[table])
    r[table][i] = tuple(row)
    return r


def _with_raw_text(rows, table, idx):
    """Replace a surrogate-escaped str with bytes that SQLite stores as invalid-UTF-8 TEXT."""
    r = dict(rows)
    r[table] = [tuple(_RawText(b"kv\xff\xfe") if isinstance(v, str) and "\udcff" in v else v for v in row)
                for row in rows[table]]
    return r


class _RawText(bytes):
    """Bytes that sqlite3 binds as TEXT (invalid UTF-8 in a TEXT column, as a broken writer leaves)."""


def _adapt_raw(b: _RawText):
    # sqlite3 binds str as UTF-8; to get invalid UTF-8 into a TEXT value, bind a blob and
    # cast it afterwards (fix_raw_text).
    return bytes(b)


sqlite3.register_adapter(_RawText, _adapt_raw)


def fix_raw_text(path: Path):
    """Turn every BLOB value that came from _RawText into TEXT with the same (invalid) bytes."""
    con = sqlite3.connect(path)
    try:
        for (t,) in con.execute("select name from sqlite_master where type='table'").fetchall():
            for col in [r[1] for r in con.execute(f'pragma table_info("{t}")')]:
                con.execute(f'update "{t}" set "{col}" = cast("{col}" as text) where typeof("{col}") = \'blob\' '
                            f"and hex(\"{col}\") = '6B76FFFE'")
        con.commit()
    finally:
        con.close()


# ---------------------------------------------------------------- directories and stored traces

def dir_cases(c: Corpus, spec: dict):
    d = c.add("dir-empty", "directory", "error", "directory")
    d.mkdir()
    d = c.add("dir-with-files", "directory", "error", "directory")
    d.mkdir()
    (d / "kernels.parquet").write_bytes(b"PAR1 not really")
    (d / "notes.txt").write_text("not a trace")


# ---------------------------------------------------------------- main

def generate(out: Path, huge: bool = False) -> list[dict]:
    c = Corpus(out)
    spec = tg.simple_spec()
    base = tg.kineto_doc(spec)
    base_json = json.dumps(base).encode()
    tmp = c.out / "_base.sqlite"
    tg.write_nsys(spec, tmp)
    base_sqlite = tmp.read_bytes()
    tmp.unlink()
    c.json("kineto-valid.json", base, "kineto-control", "ok", note="the unmodified base file")
    c.json("kineto-valid-BE.json.gz", tg.kineto_doc(spec, "BE"), "kineto-control", "ok", gz=True)
    raw_cases(c)
    gzip_cases(c, base_json, base_sqlite)
    json_cases(c, base)
    kineto_field_cases(c, spec)
    kineto_semantic_cases(c, spec)
    nsys_cases(c, spec)
    dir_cases(c, spec)
    kineto_deep(c, 10_000)
    kineto_crossing_many(c, 10_000)
    nsys_deep(c, 10_000)
    if huge:
        kineto_deep(c, 100_000)
        nsys_deep(c, 100_000)
        kineto_huge_string(c, 50, spec)
        nsys_huge_string(c, 50, spec)
    for case in c.cases:
        p = c.out / case["file"]
        if p.suffix == ".sqlite" and "nonutf8" in p.name:
            fix_raw_text(p)
    c.write_manifest()
    return c.cases


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    cases = generate(Path(argv[0]), huge="--huge" in argv)
    by: dict[str, int] = {}
    for case in cases:
        by[case["category"]] = by.get(case["category"], 0) + 1
    print(f"{len(cases)} cases in {argv[0]}: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
