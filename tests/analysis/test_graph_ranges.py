"""Kernels replayed from CUDA graphs, under the ranges open when their graph was captured
(``workbench/trace/assemble/graph_ranges.py``), on real nsys exports and captures:

* ``tests/data/nsys-graph-probe.sqlite.gz``: ``benchmarks/graph_probe.py`` run whole under
  ``nsys profile --cuda-graph-trace=node`` on the H200 (``benchmarks/h200_graphs.sh``): four
  graphs, two threads capturing at once, replays on other threads, a step replaying two graphs;
* ``shared/reference-captures/h200/nsys-cudagraph-nodes.sqlite.gz`` (when present);
* the committed ``h200-kvwrite-*-{eager,cudagraph}-nsys`` captures of the decoder.

Each import is checked against ``tests/graph_truth.py``, which computes every graph kernel's
path from the SQLite alone, independently of the workbench.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import workbench as wb
from helpers import DATA, REFERENCE as REFERENCES, TRACES
from graph_truth import expected_chains, expected_paths
from workbench.analysis import diff
from workbench.trace.schema import graph_note

PROBE = DATA / "nsys-graph-probe.sqlite.gz"
REFERENCE = REFERENCES / "nsys-cudagraph-nodes.sqlite.gz"


def _plain(gz: Path, tmp_path: Path) -> Path:
    out = tmp_path / gz.name.removesuffix(".gz")
    with gzip.open(gz, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _graph_paths(trace) -> list[tuple[int, int, str]]:
    k = trace.kernels
    g = k[k["graph"]]
    paths = trace.ranges["path"].to_numpy()
    return sorted(zip(g["start"].tolist(), g["end"].tolist(),
                      [paths[r] if r >= 0 else "" for r in g["range_id"].tolist()]))


@pytest.mark.parametrize("export", [PROBE, REFERENCE], ids=["probe", "reference"])
def test_graph_kernels_get_the_paths_the_independent_check_computes(export, tmp_path):
    if not export.exists():
        pytest.skip(f"{export} is absent")
    db = _plain(export, tmp_path)
    trace = wb.import_file(db)
    expected = sorted(expected_paths(db))
    assert _graph_paths(trace) == expected
    n = len(expected)
    # Only kernels whose node was made with a range open inside the capture count as attributed
    # by capture; the rest keep the ranges around their graph launch, and the note says so.
    by_capture = sum(1 for *_, chain in expected_chains(db) if chain)
    assert trace.meta["graph_kernels"]["kernels"] == n
    assert trace.meta["graph_kernels"]["by_capture"] == by_capture
    note = graph_note(trace.meta)
    if by_capture == n:
        assert note == f"{n} CUDA-graph kernels, each under the ranges open when its graph was captured"
    else:
        assert note.startswith(f"{n} CUDA-graph kernels: {by_capture} under the ranges open at their capture, "
                               f"{n - by_capture} only under the range around their graph launch")


def test_the_probe_exercises_what_it_claims(tmp_path):
    trace = wb.import_file(PROBE)
    paths = Counter(p for _, _, p in _graph_paths(trace))
    assert sum(paths.values()) == 82
    # Replayed on the capturing thread, with two graphs in one step, on another thread than the
    # capture, and both worker graphs in one step of the main thread.
    blocks = {step: sorted({p.split("/")[1] for p in paths if p.startswith(step + "/")}) for step in
              ("step_0", "step_1", "step_2", "step_3", "step_4")}
    assert blocks == {"step_0": ["block_00", "block_01"], "step_1": ["block_00", "block_01", "head"],
                      "step_2": ["block_20"], "step_3": ["block_00", "block_01"], "step_4": ["block_10", "block_20"]}
    # Three deep, and kernels captured under the context alone keep just the step.
    assert paths["step_3/block_01/attn/proj"] == 2 and paths["step_1/head/act"] == 1
    assert paths["step_0"] == 1 and paths["step_4"] == 2
    # Capture contexts and warm-ups are not replayed: only eager kernels stay there.
    k = trace.kernels
    eager_paths = set(trace.ranges["path"].to_numpy()[k.loc[~k["graph"] & (k["range_id"] >= 0), "range_id"]])
    assert any(p.startswith("warmup_and_capture/warmup/") for p in eager_paths)
    assert not any(p.startswith("step_") and ("block" in p or "head" in p) for p in eager_paths)


def test_replayed_ranges_survive_the_store(tmp_path):
    trace = wb.import_file(PROBE)
    wb.save(trace, "probe", root=tmp_path)
    back = wb.open_trace("probe", tmp_path)
    assert _graph_paths(back) == _graph_paths(trace)
    assert back.meta["graph_kernels"] == trace.meta["graph_kernels"]


def _without(tmp_path: Path, sql: str) -> Path:
    db = _plain(PROBE, tmp_path)
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()
    return db


def test_without_node_events_graph_kernels_stay_in_their_step_and_the_summary_says_so(tmp_path):
    trace = wb.import_file(_without(tmp_path, "drop table CUDA_GRAPH_NODE_EVENTS"))
    assert {p for _, _, p in _graph_paths(trace)} == {f"step_{i}" for i in range(5)}
    assert trace.meta["graph_kernels"]["by_capture"] == 0
    note = graph_note(trace.meta)
    assert note.startswith("82 CUDA-graph kernels only under the range around their graph launch")
    assert "--cuda-graph-trace=node" in note


def test_kernels_whose_capture_was_not_recorded_are_counted_apart(tmp_path):
    # Worker 1's capture thread loses its node creation events: w1's kernels (replayed in
    # step_2 and step_4) fall back to their step; everything else keeps its capture-time path.
    db = _plain(PROBE, tmp_path)
    con = sqlite3.connect(db)
    tid = con.execute("select e.globalTid from NVTX_EVENTS e left join StringIds s on s.id = e.textId "
                      "where coalesce(e.text, s.value) = 'worker_1_capture'").fetchone()[0]
    con.execute("delete from CUDA_GRAPH_NODE_EVENTS where globalTid = ? and originalGraphNodeId is null", (tid,))
    con.commit()
    con.close()
    trace = wb.import_file(db)
    paths = Counter(p for _, _, p in _graph_paths(trace))
    assert not any("block_20" in p for p in paths)
    assert any(p.startswith("step_4/block_10/") for p in paths)
    g = trace.meta["graph_kernels"]
    # w1's 9 kernels, replayed twice, now in step_2 and step_4 alone (beside w0's context kernel)
    assert (paths["step_2"], paths["step_4"]) == (9, 10)
    assert 0 < g["by_capture"] < g["kernels"] == 82
    assert f"{g['kernels'] - g['by_capture']} only under the range around their graph launch" in graph_note(trace.meta)


@pytest.fixture(scope="module")
def kvwrite():
    names = [f"h200-kvwrite-{kv}-{engine}-nsys" for kv in ("unfused", "fused") for engine in ("eager", "cudagraph")]
    if not all((TRACES / n).is_dir() for n in names):
        pytest.skip("committed kvwrite captures absent")
    return {n: wb.open_trace(n, TRACES) for n in names}


def test_kv_write_fusion_under_cuda_graphs_per_layer(kvwrite):
    d = diff(kvwrite["h200-kvwrite-unfused-cudagraph-nsys"], kvwrite["h200-kvwrite-fused-cudagraph-nsys"])
    kv = d.layers[(d.layers["layer"] >= 0) & (d.layers["range"] == "kv_write")]
    assert sorted(kv["layer"]) == list(range(8))
    assert (kv["kernels_a"] == 15).all() and (kv["kernels_b"] == 1).all()
    for t in (kvwrite["h200-kvwrite-unfused-cudagraph-nsys"], kvwrite["h200-kvwrite-fused-cudagraph-nsys"]):
        assert t.meta["graph_kernels"]["by_capture"] == t.meta["graph_kernels"]["kernels"] > 0


@pytest.mark.parametrize("kv", ["unfused", "fused"])
def test_cuda_graph_captures_count_per_layer_as_the_eager_ones(kvwrite, kv):
    d = diff(kvwrite[f"h200-kvwrite-{kv}-eager-nsys"], kvwrite[f"h200-kvwrite-{kv}-cudagraph-nsys"])
    layers = d.layers[d.layers["layer"] >= 0]
    assert len(layers) == 8 * 4  # qkv, kv_write, attention, mlp in each of 8 layers
    assert (layers["kernels_a"] == layers["kernels_b"]).all()
    assert d.totals["kernels_per_step_a"] == d.totals["kernels_per_step_b"]
