"""Other tools' real traces import and match an independent, straightforward attribution."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import Counter

import pytest

from workbench.analysis import summary
from workbench.trace import import_file


def attributed_counts(trace) -> Counter:
    s = summary(trace, by="range")
    return Counter({r: k for r, k in zip(s["range"], s["kernels"]) if not r.startswith("(")})


def kineto_reference(path) -> Counter:
    """Innermost user_annotation around each kernel's launch, the slow obvious way (O(n*m))."""
    with gzip.open(path) as fh:
        events = json.load(fh)["traceEvents"]
    launches = {}
    ranges = {}
    kernels = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in ("cuda_runtime", "cuda_driver"):
            launches.setdefault(e["args"]["correlation"], e)
        elif cat == "user_annotation":
            ranges.setdefault((e["pid"], e["tid"]), []).append(e)
        elif cat == "kernel":
            kernels.append(e)
    counts = Counter()
    for k in kernels:
        launch = launches.get(k["args"].get("correlation"))
        if launch is None:
            continue
        t = launch["ts"]
        inside = [r for r in ranges.get((launch["pid"], launch["tid"]), []) if r["ts"] <= t < r["ts"] + r["dur"]]
        if inside:
            counts[max(inside, key=lambda r: (r["ts"], -r["dur"]))["name"]] += 1
    return counts


def nsys_reference(path, tmp_path) -> Counter:
    db = tmp_path / "x.sqlite"
    db.write_bytes(gzip.decompress(path.read_bytes()))
    con = sqlite3.connect(db)
    strings = dict(con.execute("select id, value from StringIds"))
    ranges = {}
    for start, end, text, text_id, gtid in con.execute(
        "select start, end, text, textId, globalTid from NVTX_EVENTS where eventType = 59"
    ):
        ranges.setdefault(gtid, []).append((start, end, text if text is not None else strings[text_id]))
    launches = {}
    for start, gtid, corr in con.execute("select start, globalTid, correlationId from CUPTI_ACTIVITY_KIND_RUNTIME"):
        launches[(gtid >> 24, corr)] = (start, gtid)
    counts = Counter()
    for gpid, corr in con.execute("select globalPid, correlationId from CUPTI_ACTIVITY_KIND_KERNEL"):
        launch = launches.get((gpid >> 24, corr))
        if launch is None:
            continue
        t, gtid = launch
        inside = [r for r in ranges.get(gtid, []) if r[0] <= t < r[1]]
        if inside:
            counts[max(inside, key=lambda r: (r[0], -r[1]))[2]] += 1
    con.close()
    return counts


@pytest.mark.parametrize("name", ["hta-trace-diff-control.json.gz", "hta-trace-diff-test.json.gz"])
def test_hta_kineto_traces(external, name):
    path = external(name)
    trace = import_file(path)
    assert attributed_counts(trace) == kineto_reference(path)
    s = summary(trace, by="range")
    # Kernels without a launch record are reported, never dropped.
    assert s["kernels"].sum() == len(trace.kernels)
    assert trace.meta["distributed"]["backend"] == "nccl"


@pytest.mark.parametrize("name", ["nsys-ai-mfu-2gpu-before.sqlite.gz", "nsys-ai-mfu-2gpu-after.sqlite.gz"])
def test_nsys_ai_two_process_exports(external, name, tmp_path):
    path = external(name)
    trace = import_file(path)
    assert attributed_counts(trace) == nsys_reference(path, tmp_path)
    assert trace.kernels["pid"].nunique() == 2 and trace.kernels["device"].nunique() == 2
    assert summary(trace, by="range")["kernels"].sum() == len(trace.kernels)
