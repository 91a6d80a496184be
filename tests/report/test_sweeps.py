"""The one sweep reader (workbench.analysis.sweeps) on the committed sweep results, and its two
views: the figures' frame (viz.load_sweep) and the report's rows (reporting.inputs.load_sweep)."""

from __future__ import annotations

import hashlib
import json

import pytest

from helpers import REPO, TRACES
from workbench.analysis.sweeps import latency, metrics, read
from workbench.errors import WorkbenchError
from workbench.reporting.inputs import load_sweep as report_sweep
from workbench.viz import load_sweep as figure_sweep

RESULTS = REPO / "benchmarks" / "results"


@pytest.fixture(autouse=True)
def _store(monkeypatch):
    monkeypatch.setenv("WORKBENCH_TRACES", str(TRACES))  # the frame's workload comes from the manifests


def test_reader_on_the_committed_campaign_files():
    live = read(RESULTS / "h200_live.json")
    assert live.listed_under == "captures" and live.not_objects == []
    assert live.sha256 == hashlib.sha256((RESULTS / "h200_live.json").read_bytes()).hexdigest()
    assert {"prefix", "device", "repeats", "equality"} <= set(live.meta) and "captures" not in live.meta
    assert len(live.points) == 24 and all(p.not_run is None for p in live.points)
    assert sorted({p.context for p in live.points}) == [128, 512, 2048, 8192]  # from each measured variant
    p = next(p for p in live.points if p.fields["name"] == "h200-cache-bucketed-ctx2048-eager-torch")
    assert p.variant["cache_rows"] == "bucketed" and p.fields["group"] == "cache-ctx2048"
    # The two readings of one point: the figure's latency over every timed step, the report's
    # decode_step over the repetitions' means.
    assert latency(p).median == p.values["decode_step_ms"].median == 6.3076
    assert metrics(p)["decode_step"] == ("ms", p.values["decode_step_ms_per_repeat"])
    assert metrics(p)["attention_gpu_per_layer"][1].median == 15.716
    # Given parsed, the same points.
    doc = json.loads((RESULTS / "h200_live.json").read_text())
    assert read(doc).points == live.points and read(doc).sha256 is None


@pytest.mark.parametrize("name", ["h200_live.json", "h200_phi4.json"])
def test_both_views_hold_the_same_points(name):
    """The figure and the report pick the same captures: one per (variant, engine, context),
    the torch.profiler one where nsys timed the same point, the fusion group left out."""
    df = figure_sweep(RESULTS / name)
    sw = report_sweep(RESULTS / name)
    engines = set(df["engine"])
    assert sw.meta["engines"] == sorted(engines)

    def key(series: str) -> tuple[str, str]:  # "cache_rows=full engine=eager" -> ("full", "eager")
        d = dict(kv.split("=") for kv in series.split())
        return d["cache_rows"], d.get("engine", next(iter(engines)))

    figure = {(r.variant, r.engine, r.context) for r in df.itertuples()}
    report = {(*key(r["series"]), r["context"]) for r in sw.rows if r["metric"] == "decode_step"}
    assert figure == report and len(figure) == len(df)
    assert {c for _, _, c in figure} == {512, 2048, 8192}
    assert set(df["backend"]) == ({"torch"} if name == "h200_live.json" else {"nsys"})
    att = {(*key(r["series"]), r["context"]): r["median"] for r in sw.rows if r["metric"] == "attention_gpu_per_layer"}
    measured = df.dropna(subset=["attention_gpu_us_per_layer"])
    assert att == {(r.variant, r.engine, r.context): r.attention_gpu_us_per_layer for r in measured.itertuples()}
    assert df.attrs["workload"] == "decoder"


def test_phi4_numbers_in_each_view():
    df = figure_sweep(RESULTS / "h200_phi4.json").set_index(["variant", "context"])
    assert df.loc[("bucketed", 2048), "median_ms"] == 3.361  # decode_step_ms: every timed step
    rows = {(r["series"], r["context"]): r for r in report_sweep(RESULTS / "h200_phi4.json").rows
            if r["metric"] == "decode_step"}
    assert rows[("cache_rows=bucketed", 2048)]["median"] == 3.3597  # decode_step_ms_per_repeat
    assert rows[("cache_rows=bucketed", 2048)]["n"] == 10


def test_a_points_file_reads_in_both_views(tmp_path):
    """The report's shape (a ``points`` list, series under ``cache``) is a figure's too."""
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps({"points": [
        {"ctx": c, "cache": mode, "decode_step_ms": {"median": base + c / 1024, "min": base, "max": base + 1, "n": 5}}
        for c in (256, 1024) for mode, base in (("full", 2.0), ("bucketed", 1.0))]
        + [{"ctx": 4096, "cache": "bucketed", "skipped": "out of memory"}]}))
    df = figure_sweep(f)
    assert df[["variant", "context", "median_ms", "min_ms"]].to_dict(orient="records") == [
        {"variant": "bucketed", "context": 256, "median_ms": 1.25, "min_ms": 1.0},
        {"variant": "bucketed", "context": 1024, "median_ms": 2.0, "min_ms": 1.0},
        {"variant": "full", "context": 256, "median_ms": 2.25, "min_ms": 2.0},
        {"variant": "full", "context": 1024, "median_ms": 3.0, "min_ms": 2.0}]
    sw = report_sweep(f)
    assert sw.series == ["bucketed", "full"] and sw.not_run == ["bucketed at context 4096: out of memory"]


def test_bad_files(tmp_path):
    bad = tmp_path / "s.json"
    cases = [("{not json", "sweep results are not valid JSON"),
             (json.dumps({"foo": 1}), "expected a list of points or an object with a 'points'/'results' list"),
             (json.dumps(5), "expected a list of points")]
    for text, problem in cases:
        bad.write_text(text)
        with pytest.raises(WorkbenchError, match=problem):
            read(bad)
        assert figure_sweep(bad) is None
    for path, problem in ((tmp_path, "not a directory"), (tmp_path / "missing.json", "no such sweep results file")):
        with pytest.raises(WorkbenchError, match=problem):
            read(path)
        assert figure_sweep(path) is None
    # The report refuses what the figure passes over: an entry that is no object, a point
    # without a context length (the first by place in the list).
    bad.write_text(json.dumps({"points": [{"ctx": 1, "series": "a", "decode_step_ms": 1.0}, {"series": "a"}, 5]}))
    with pytest.raises(WorkbenchError, match="sweep point 1 has no context length"):
        report_sweep(bad)
    assert figure_sweep(bad)["context"].tolist() == [1]
    bad.write_text(json.dumps({"points": [{"ctx": 1, "series": "a", "decode_step_ms": 1.0}, 5, {"series": "a"}]}))
    with pytest.raises(WorkbenchError, match="sweep point 1 is not an object"):
        report_sweep(bad)
