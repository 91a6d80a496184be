"""Kernels replayed from CUDA graphs under torch.profiler, given the ranges open at their
capture (``workbench/trace/assemble/captured_launches.py``): Kineto records no graph node per
kernel, only each replay's ``cudaGraphLaunch`` and, where the capture was recorded, the launch
calls made during it. Real captures, made on the lent GPU (``PART=graphs-torch
benchmarks/h200_compiled.sh``):

* ``tests/data/kineto-graph-probe.json.gz``: ``benchmarks/graph_probe.py --kineto`` (four
  graphs, two threads capturing at once, replays on other threads, a step replaying two graphs),
  the same program as the nsys probe ``tests/data/nsys-graph-probe.sqlite.gz``, whose paths the
  independent check of ``test_graph_ranges.py`` confirms;
* ``traces/h100-kvwrite-{unfused,fused}-cudagraph-torch``: the decoder's cudagraph engine, its
  graphs captured again inside the recording.
"""

from __future__ import annotations

from collections import Counter

import pytest

import workbench as wb
from helpers import DATA, TRACES
from workbench.analysis import diff
from workbench.trace.schema import graph_note

KINETO = DATA / "kineto-graph-probe.json.gz"
NSYS = DATA / "nsys-graph-probe.sqlite.gz"


def _graph_paths(trace) -> dict[str, Counter]:
    """Per step: how many graph kernels lie in each path."""
    k = trace.kernels
    g = k[k["graph"]]
    paths = trace.ranges["path"].astype(str).to_numpy()
    out: dict[str, Counter] = {}
    for r in g["range_id"].tolist():
        p = paths[r] if r >= 0 else ""
        out.setdefault(p.split("/")[0], Counter())[p] += 1
    return out


@pytest.fixture(scope="module")
def probes():
    return wb.import_file(KINETO), wb.import_file(NSYS)


def test_replays_get_the_paths_nsys_gives_their_nodes(probes):
    kineto, nsys = probes
    got, want = _graph_paths(kineto), _graph_paths(nsys)
    assert sorted(got) == sorted(want) == [f"step_{i}" for i in range(5)]
    # model and head, captured on the main thread, replayed there and on worker 1 (step_3): each
    # kernel in the ranges nsys's graph nodes give it, to the path.
    for step in ("step_0", "step_1", "step_3"):
        assert got[step] == want[step], step
        assert any(p.count("/") >= 3 for p in got[step])  # step > block > attn|mlp > proj|act
    assert "step_1/head/act" in got["step_1"]


def test_replays_of_captures_alike_in_size_stay_under_their_launch(probes):
    kineto, nsys = probes
    got, want = _graph_paths(kineto), _graph_paths(nsys)
    # w0 and w1 have 9 kernels each and differ only in their ranges' names (block_10, block_20):
    # Kineto does not say which one a launch replays, so their replays are not guessed.
    for step in ("step_2", "step_4"):
        assert set(got[step]) == {step}
        assert sum(got[step].values()) == sum(want[step].values())
    g = kineto.meta["graph_kernels"]
    assert g["kernels"] == 82 and g["ambiguous"] == 27
    note = graph_note(kineto.meta)
    assert note.startswith(f"82 CUDA-graph kernels: {g['by_capture']} under the ranges open at their capture")
    assert "27 in replays that match several captured graphs of their size" in note


@pytest.fixture(scope="module")
def decoder():
    names = [f"h100-kvwrite-{kv}-cudagraph-torch" for kv in ("unfused", "fused")]
    names += [f"h200-kvwrite-{kv}-eager-torch" for kv in ("unfused", "fused")]
    if not all((TRACES / n).is_dir() for n in names):
        pytest.skip("committed kvwrite torch captures absent")
    return {n: wb.open_trace(n, TRACES) for n in names}


@pytest.mark.parametrize("kv", ["unfused", "fused"])
def test_a_decoder_under_cuda_graphs_counts_per_layer_as_eager(decoder, kv):
    d = diff(decoder[f"h200-kvwrite-{kv}-eager-torch"], decoder[f"h100-kvwrite-{kv}-cudagraph-torch"])
    layers = d.layers[d.layers["layer"] >= 0]
    assert len(layers) == 8 * 4  # qkv, kv_write, attention, mlp in each of 8 layers
    assert (layers["kernels_a"] == layers["kernels_b"]).all()
    assert d.totals["kernels_per_step_a"] == d.totals["kernels_per_step_b"]


def test_the_kv_write_fusion_per_layer_under_torch_profiler(decoder):
    d = diff(decoder["h100-kvwrite-unfused-cudagraph-torch"], decoder["h100-kvwrite-fused-cudagraph-torch"])
    kv = d.layers[(d.layers["layer"] >= 0) & (d.layers["range"] == "kv_write")]
    assert sorted(kv["layer"]) == list(range(8))
    assert (kv["kernels_a"] == 15).all() and (kv["kernels_b"] == 1).all()
    note = graph_note(decoder["h100-kvwrite-unfused-cudagraph-torch"].meta)
    assert note.startswith("705 CUDA-graph kernels: 702 under the ranges open at their capture")


def test_graphs_captured_before_the_recording_say_so():
    name = "h200-kvwrite-unfused-cudagraph-torch"  # captured before the engine re-captured in the window
    if not (TRACES / name).is_dir():
        pytest.skip(f"{name} absent")
    note = graph_note(wb.open_trace(name, TRACES).meta)
    assert note.startswith("705 CUDA-graph kernels only under the range around their graph launch")
    assert "does not hold the capture: record it inside the recorded window" in note
