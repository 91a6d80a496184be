"""The manifest schema (``workbench/trace/manifest.py``): its accessors on committed real
manifests and on malformed ones (missing sections, sections of the wrong type), the store's
atomic manifest replacement, and that every section the code writes, from each importer, the
store, a capture, a bench and a trace set, is one the schema names."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from helpers import DATA, TRACES
import workbench as wb
from workbench.analysis.steps import set_phases
from workbench.errors import WorkbenchError
from workbench.trace import manifest as m
from workbench.trace.store import content_hash, load
from workbench.trace.store.read import read_manifest
from workbench.trace.store.write import replace_manifest

NSYS = TRACES / "h200-kvwrite-unfused-eager-nsys"
GRAPHS = TRACES / "h200-kvwrite-fused-cudagraph-torch"

# Every kind of wrong value a hand edit or a fuzzer leaves in a section.
WRONG = ("eager", 3, 2.5, True, None, ["a", "b"], [])


def _keys(path: Path) -> set[str]:
    return set(json.loads((path / "manifest.json").read_text()))


def test_sections_are_documented_once_each():
    assert all(isinstance(doc, str) and doc and "\n" not in doc for doc in m.SECTIONS.values())
    constants = {v for k, v in vars(m).items() if k.isupper() and not k.startswith("_") and isinstance(v, str)}
    assert constants <= set(m.SECTIONS)


def test_every_committed_manifest_holds_only_named_sections():
    dirs = sorted(p for p in TRACES.iterdir() if (p / "manifest.json").is_file())
    assert len(dirs) > 40
    for d in dirs:
        assert _keys(d) <= set(m.SECTIONS), d.name


def test_accessors_on_a_real_nsys_capture():
    meta = read_manifest(NSYS)
    assert m.section(meta, m.CAPTURE)["workload"] == "decoder"
    assert m.section(meta, m.CAPTURE) is meta["capture"]  # the manifest's own, not a copy
    assert m.lookup(meta, "capture", "variant", "kv_write") == "unfused"
    assert m.lookup(meta, "capture", "variant", "kv_write", "deeper") is None
    assert m.lookup(meta, "capture", "no-such") is None
    assert m.source_format(meta) == "nsys-sqlite"
    assert m.work_units(meta) == "kernel"  # the default: the nsys reader does not write it
    assert m.capture_kind(meta) == "workload"  # captured before capture.kind was recorded
    assert m.workload_name(meta) == "decoder"
    assert m.source_note(meta) is None
    key, timing = m.recorded_timing(meta)
    assert key == "timing" and timing["decode_step_ms"]["n"] == 90
    assert m.graph_counts(meta) == (0, 0) and m.graph_note(meta) is None
    assert m.section(meta, m.COUNTS)["kernels"] == len(load(NSYS).kernels) == 711


def test_graph_kernels_of_a_torch_profiler_cudagraph_capture():
    # Graphs captured before the recording opened: nothing to match the replays to.
    meta = load(GRAPHS).meta
    n, by_capture = m.graph_counts(meta)
    assert n > 0 and by_capture == 0
    assert m.graph_note(meta).startswith(f"{n} CUDA-graph kernels only under the range around their graph launch")
    assert "record it inside the recorded window, with ranges open around it" in m.graph_note(meta)
    # Captured again inside it: every replayed kernel in a range of its own at capture gets it.
    meta = load(GRAPHS.parent / "h100-kvwrite-unfused-cudagraph-torch").meta
    assert m.graph_counts(meta) == (705, 702)
    assert m.graph_note(meta).startswith("705 CUDA-graph kernels: 702 under the ranges open at their capture, 3 only")


@pytest.mark.parametrize("wrong", WRONG)
def test_every_accessor_tolerates_a_malformed_section(wrong):
    meta = {**read_manifest(NSYS), **dict.fromkeys(m.SECTIONS, wrong)}
    for name in m.SECTIONS:
        assert m.section(meta, name) == {}
    assert m.lookup(meta, "capture", "variant") is None
    assert m.source_format(meta) == "" and m.source_format(meta, "?") == "?"
    assert m.work_units(meta) == "kernel"
    assert m.source_note(meta) is None
    assert m.capture_kind(meta) is None
    assert m.recorded_timing(meta) == ("timing", {})
    assert m.graph_counts(meta) == (0, 0) and m.graph_note(meta) is None
    # A top-level workload of any value but None is the workload's name, as it always was.
    assert m.workload_name(meta) == (None if wrong is None else str(wrong))


@pytest.mark.parametrize("meta", [None, "manifest", 3, ["capture"], {}])
def test_accessors_of_no_manifest_at_all(meta):
    assert m.section(meta, m.CAPTURE) == {} and m.lookup(meta, "capture") is None
    assert m.work_units(meta) == "kernel" and m.workload_name(meta) is None and m.capture_kind(meta) is None
    assert m.recorded_timing(meta) == ("timing", {}) and m.graph_note(meta) is None


def test_a_hand_edited_manifest_opens_and_analyses_as_before(tmp_path):
    """Sections broken on disk: the trace still opens (the attribution is derived again from
    the tables) and every reader falls back, with the same per-layer summary."""
    edited = tmp_path / "edited"
    shutil.copytree(NSYS, edited)
    meta = json.loads((edited / "manifest.json").read_text())
    meta.update(capture="eager", env=[1, 2], timing=3, attribution="broken", graph_kernels=[], outputs=0,
                tensorrt="none", analysis=["step"])
    (edited / "manifest.json").write_text(json.dumps(meta))
    trace, original = load(edited), load(NSYS)
    assert m.work_units(trace.meta) == "kernel" and m.capture_kind(trace.meta) is None
    assert m.section(trace.meta, m.ATTRIBUTION) == m.section(original.meta, m.ATTRIBUTION)
    by_layer = wb.summary(trace, by="layer")
    assert by_layer.equals(wb.summary(original, by="layer"))
    with pytest.raises(WorkbenchError, match="recorded no outputs to compare"):
        wb.outputs_equal(trace, original)


def test_a_manifest_whose_source_is_not_an_object_is_refused(tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(NSYS, bad)
    meta = json.loads((bad / "manifest.json").read_text())
    (bad / "manifest.json").write_text(json.dumps({**meta, "source": ["nsys"]}))
    with pytest.raises(WorkbenchError, match="manifest field 'source' is not an object"):
        read_manifest(bad)


def test_replace_manifest_is_whole_and_keeps_the_tables(tmp_path):
    trace = tmp_path / "t"
    shutil.copytree(NSYS, trace)
    os.chmod(trace / "manifest.json", 0o640)
    meta = {**read_manifest(trace), m.TIMING_BENCH: {"timer": "host"}}
    replace_manifest(trace, meta, doing="store the bench samples")
    assert read_manifest(trace) == meta
    assert stat.S_IMODE(os.stat(trace / "manifest.json").st_mode) == 0o640
    assert content_hash(trace) == meta[m.CONTENT_SHA256]
    assert sorted(p.name for p in trace.iterdir()) == sorted(p.name for p in NSYS.iterdir())  # no temporary left


def test_replace_manifest_failures_are_one_line(tmp_path):
    with pytest.raises(WorkbenchError, match=r"missing: cannot write to the trace: No such file"):
        replace_manifest(tmp_path / "missing", {}, doing="store the bench samples")
    empty = tmp_path / "empty"
    empty.mkdir()  # a directory without a manifest: the new one's permissions cannot be taken
    with pytest.raises(WorkbenchError, match=r"manifest\.json: cannot store the bench samples: No such file"):
        replace_manifest(empty, {}, doing="store the bench samples")
    assert list(empty.iterdir()) == []


def test_every_importer_writes_only_named_sections(tmp_path):
    probe = wb.import_file(DATA / "nsys-graph-probe.sqlite.gz")
    assert m.GRAPH_KERNELS in probe.meta
    engine = wb.import_file(DATA / "tensorrt" / "resnet18-a100-fp16")
    assert {m.TENSORRT, m.TIMING} <= set(engine.meta) and m.work_units(engine.meta) == "trt_layer"
    llama = wb.import_file(DATA / "kineto-llama-modules.json.gz")
    for name, trace in (("probe", probe), ("engine", engine), ("llama", llama)):
        set_phases(trace, step_regex=r"^step")
        assert set(trace.meta) <= set(m.SECTIONS), name
        assert _keys(wb.save(trace, name, tmp_path)) <= set(m.SECTIONS), name
        assert m.ANALYSIS in _keys(tmp_path / name)


def test_a_trace_set_member_writes_only_named_sections(tmp_path):
    files = sorted((DATA / "sets" / "cpu4").glob("rank*.json.gz"))
    ts = wb.import_set("cpu4", files, tmp_path)
    for member in ts.members["member"]:
        keys = _keys(ts.path / member)
        assert {m.SET, m.DISTRIBUTED} <= keys <= set(m.SECTIONS)
        meta = read_manifest(ts.path / member)
        assert m.section(meta, m.SET)["name"] == "cpu4" and meta[m.NAME] == member


def test_a_capture_and_its_bench_write_only_named_sections(tmp_path):
    pytest.importorskip("torch")
    trace, other = (wb.capture("decoder", {"layers": 2, "rows": 256, "ctx": 16}, name=name, steps=1, repeats=1,
                               warmup=1, device="cpu", root=tmp_path, progress=False) for name in ("a", "b"))
    path = Path(trace.path)
    keys = _keys(path)
    assert {m.CAPTURE, m.ENV, m.TIMING, m.OUTPUTS, m.SOURCE, m.COUNTS} <= keys <= set(m.SECTIONS)
    assert m.capture_kind(read_manifest(path)) == "workload" and m.workload_name(trace.meta) == "decoder"
    sha = read_manifest(path)[m.CONTENT_SHA256]
    wb.bench(trace, other, rounds=2, device="cpu", store=True, progress=False)
    stored = read_manifest(path)
    assert set(stored) == keys | {m.TIMING_BENCH}
    assert m.recorded_timing(stored)[0] == m.TIMING_BENCH and stored[m.CONTENT_SHA256] == sha
    assert trace.meta[m.TIMING_BENCH] == stored[m.TIMING_BENCH]
