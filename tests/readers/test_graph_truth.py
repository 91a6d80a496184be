"""tests/graph_truth.py (the independent expected path of each CUDA-graph kernel) on the real
nsys export of shared/reference-captures/h200/cudagraph_probe.py, and on a small hand-made
export for what that probe does not exercise (two threads, several hops, no creation event)."""

from __future__ import annotations

import gzip
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from helpers import REFERENCE as REFERENCES
from graph_truth import expected_paths

REFERENCE = (REFERENCES
             / "nsys-cudagraph-nodes.sqlite.gz")

# cudagraph_probe.py: 4 layers (layer_00..layer_03), each "mm" (x @ w) then "act"
# (relu, * 0.5, + 0.1: three elementwise kernels), captured once inside "graph_capture",
# replayed in step_0..step_2.
STEPS, LAYERS, ACT_KERNELS = 3, 4, 3
PATH = re.compile(r"step_([0-9]+)/layer_([0-9]{2})/(mm|act)")


@pytest.fixture(scope="module")
def reference_paths(tmp_path_factory):
    if not REFERENCE.exists():
        pytest.skip(f"reference export {REFERENCE} is absent")
    db = tmp_path_factory.mktemp("graph_truth") / "nsys-cudagraph-nodes.sqlite"
    with gzip.open(REFERENCE, "rb") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return expected_paths(db)


def test_every_graph_kernel_of_the_reference_gets_a_path(reference_paths):
    assert len(reference_paths) == 60
    assert all(path for _, _, path in reference_paths)
    assert all(start <= end for start, end, _ in reference_paths)
    assert [s for s, _, _ in reference_paths] == sorted(s for s, _, _ in reference_paths)


def test_reference_paths_are_step_layer_op(reference_paths):
    for _, _, path in reference_paths:
        m = PATH.fullmatch(path)
        assert m, path
        assert 0 <= int(m[1]) < STEPS and 0 <= int(m[2]) < LAYERS, path


def test_reference_kernels_per_range_are_equal_across_steps_and_layers(reference_paths):
    counts = Counter(PATH.fullmatch(p).groups() for _, _, p in reference_paths)
    expected_keys = {(str(i), f"{n:02d}", op) for i in range(STEPS) for n in range(LAYERS) for op in ("mm", "act")}
    assert set(counts) == expected_keys
    per_op = {op: {c for (_, _, o), c in counts.items() if o == op} for op in ("mm", "act")}
    # Every (step, layer) has as many mm kernels as any other (the matmul's count depends on
    # the BLAS library's choice, but the same shape gets the same choice), and so for act.
    assert len(per_op["mm"]) == 1 and len(per_op["act"]) == 1
    (mm,), (act,) = per_op["mm"], per_op["act"]
    assert act == ACT_KERNELS and mm >= 1
    assert STEPS * LAYERS * (mm + act) == len(reference_paths)
    # Each step replays the same 20 kernels, in the same order of ranges.
    by_step = [[p.split("/", 1)[1] for _, _, p in reference_paths if p.startswith(f"step_{i}/")] for i in range(STEPS)]
    assert by_step[0] == by_step[1] == by_step[2]
    assert by_step[0] == [f"layer_{n:02d}/{op}" for n in range(LAYERS) for op in ["mm"] * mm + ["act"] * act]


# A hand-made export. Process P, threads A (captures) and B (replays). Graph node ids: g1 nodes
# 1, 2, 3 made on A at capture time; exec graph nodes 11 (from 1), 12 (from 2), 13 (from 3);
# node 21 from exec node 11 (a graph made from an instantiated one: two hops); node 30 has no
# events at all; node 40 was made on B, where no capture ever began.
P = 7 << 32  # a globalPid: its low 24 bits (the thread id) clear
A, B = P | 101, P | 102


def _make_export(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT, domainId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT);
        CREATE TABLE CUDA_GRAPH_NODE_EVENTS (start INT, end INT, eventClass INT, globalTid INT, nameId INT,
                                             graphNodeId INT, originalGraphNodeId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, globalPid INT, correlationId INT,
                                                 graphNodeId INT, shortName INT);
    """)
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [
        (1, "cudaStreamBeginCapture_v10000"), (2, "cudaStreamEndCapture_v10000"), (3, "cudaGraphLaunch_v10000"),
        (4, "Graph Node Creation"), (5, "k"), (6, "inner_by_id"),
    ])
    nvtx = [  # (start, end, text, textId, thread); eventType 59
        (0, 1000, "warmup_and_capture", None, A),   # open before the capture began: context, dropped
        (100, 110, "before", None, A),               # closed before the capture: not enclosing
        (200, 400, "block_00", None, A),
        (210, 300, "attn", None, A),
        (220, 250, None, 6, A),                      # name through textId
        (500, 600, "unended", None, A),              # end NULL below: encloses nothing
        (2000, 2100, "step_0", None, B),
        (3000, 3100, "step_1", None, B),
        (3000, 3050, "inner", None, B),              # same start as step_1, shorter: inner
    ]
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?, ?, 0)",
                   [(s, e, t, i, th) for s, e, t, i, th in nvtx])
    db.execute("UPDATE NVTX_EVENTS SET end = NULL WHERE text = 'unended'")
    db.execute("INSERT INTO NVTX_EVENTS VALUES (205, 206, 34, 'a mark', NULL, ?, 0)", (A,))  # not a range
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)", [
        (150, 160, A, 1, 1),      # BeginCapture
        (900, 910, A, 2, 2),      # EndCapture
        (2010, 2020, B, 50, 3),   # launch in step_0
        (3010, 3020, B, 60, 3),   # launch in step_1/inner
    ])
    db.executemany("INSERT INTO CUDA_GRAPH_NODE_EVENTS VALUES (?, ?, 77, ?, 4, ?, ?)", [
        (230, 230, A, 1, None),   # block_00/attn/inner_by_id
        (350, 350, A, 2, None),   # block_00
        (550, 550, A, 3, None),   # directly under the capture context: empty chain
        (950, 950, A, 11, None),  # exec nodes' own creation rows, at instantiation
        (951, 951, A, 11, 1),
        (952, 952, A, 12, 2),
        (953, 953, A, 13, 3),
        (960, 960, A, 21, 11),
        (1500, 1500, B, 40, None),
    ])
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, 5)", [
        (2030, 2031, P, 50, 11), (2032, 2033, P, 50, 12), (2034, 2035, P, 50, 13),
        (3030, 3031, P, 60, 21), (3032, 3033, P, 60, 30), (3034, 3035, P, 60, 40),
        (2500, 2501, P, 70, None),  # eager: not a graph kernel
    ])
    db.commit()
    db.close()


def test_hand_made_export(tmp_path):
    path = tmp_path / "made.sqlite"
    _make_export(path)
    assert expected_paths(path) == [
        (2030, 2031, "step_0/block_00/attn/inner_by_id"),
        (2032, 2033, "step_0/block_00"),
        (2034, 2035, "step_0"),
        (3030, 3031, "step_1/inner/block_00/attn/inner_by_id"),
        (3032, 3033, "step_1/inner"),
        (3034, 3035, "step_1/inner"),
    ]
