"""The numbers a report leads with, on the committed H200 traces: timed phases compared with a
confidence interval and a verdict, the host/launch-bound label from the GPU busy time per
decode step, launches per step equal to the diff's, and a CPU capture worded as CPU ops."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from helpers import CPU_TRACE, TRACES
import workbench as wb
from workbench.analysis.busy import busy_per_step, union_lengths
from workbench.reporting.inputs import load_trace
from workbench.reporting.results import launches

EAGER = ("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys")
GRAPHS = ("h200-kvwrite-unfused-cudagraph-nsys", "h200-kvwrite-fused-cudagraph-nsys")
SAME = ("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-unfused-eager-torch")  # one variant, two profilers
PAIRS = [EAGER, GRAPHS, SAME, ("h200-cache-full-ctx512-eager-torch", "h200-cache-bucketed-ctx512-eager-torch"),
         ("h200-hf-attn-eager-static-nsys", "h200-hf-attn-sdpa-static-nsys")]


def committed(name: str) -> Path:
    p = TRACES / name
    if not (p / "manifest.json").is_file():
        pytest.skip(f"committed trace {name} not present")
    return p


@pytest.fixture(scope="module")
def reports():
    """pair -> the report of base vs fix (Markdown and model), made once per pair."""
    made = {}

    def get(pair):
        if pair not in made:
            made[pair] = wb.report(*(committed(n) for n in pair))
        return made[pair]

    return get


def headline(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("**Headline:**"))


def row(md: str, label: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith(f"| {label}"))
    return [c.strip() for c in line.strip("|").split(" | ")]


# ------------------------------------------------------------------------------------ timed phases

def test_the_same_variant_twice_is_no_significant_change(reports):
    md = reports(SAME).markdown
    # Measured +1% with an interval above 1: below the threshold, said so, never "faster"/"slower".
    # The statistics alone say below the threshold (test_timing_compare); host-bound, the report
    # gives the interval and no verdict.
    assert row(md, "decode step")[3] == "1.014x (95% CI 1.001–1.075): confounded, no verdict (see the headline)"
    assert "decode step **3.699 ms → 3.751 ms**, 1.01x (confounded: no verdict)" in headline(md)  # host-bound
    assert "faster" not in headline(md) and "slower" not in headline(md)


def test_a_real_change_has_its_interval_and_verdict(reports):
    r = reports(GRAPHS)
    md = r.markdown
    # Printed to the digits that keep the interval's ends apart (before: 0.67x (95% CI 0.67–0.67)).
    assert "decode step **0.6171 ms → 0.4136 ms**, 0.670x (95% CI 0.666–0.674): faster" in headline(md)
    assert row(md, "decode step")[3] == "0.670x (95% CI 0.666–0.674): faster"
    # The report's comparison is the diff's own (analysis.stats, seeded): same interval.
    d = wb.diff(wb.open_trace(committed(GRAPHS[0])), wb.open_trace(committed(GRAPHS[1])))
    c = next(c for c in d.timing if c.metric == "decode_step_ms")
    assert (round(c.ratio, 2), round(c.ci_low, 2), round(c.ci_high, 2), c.verdict) == (0.67, 0.67, 0.67, "faster")
    assert "percentile bootstrap of the ratio of medians" in md
    assert "Faster or slower when the interval excludes 1 and the change is at least 10%" in md
    # The prefill's measured +8% (interval 1.06–1.10 excludes 1): below the threshold, not "no change".
    assert row(md, "prefill")[3] == "1.08x (95% CI 1.06–1.10): changed by less than the 10% threshold"


def test_an_extra_trace_is_compared_against_the_base_too(reports):
    md = wb.report(*(committed(n) for n in SAME), committed(EAGER[1])).markdown
    extra = row(md, "decode step")[4]
    assert extra.startswith("4.634 ms (") and extra.endswith("; vs base 1.25x (95% CI 1.20–1.27): slower")


# ------------------------------------------------------------------------------------ where the time goes

def test_busy_time_is_the_union_of_each_decode_steps_kernels():
    for name in {n for pair in PAIRS for n in pair}:
        t = wb.open_trace(committed(name))
        b = busy_per_step(t)
        lp = wb.launches_per_step(t, phase="decode")
        # The same steps as every per-step count: one row per decode step, the same kernels and wall time.
        assert b["step"].tolist() == lp["step"].tolist(), name
        assert (b["phase"] == "decode").all(), name
        assert b["kernels"].tolist() == lp["kernels"].tolist(), name
        assert b["host_ns"].tolist() == lp["wall_ns"].tolist(), name
        assert (b["wall_ns"] >= b["host_ns"]).all(), name
        # A union is never longer than the sum of its intervals, and never shorter than the longest one.
        assert (b["gpu_busy_ns"] <= lp["gpu_time_ns"]).all(), name
        assert (b["gpu_busy_ns"] > 0).all(), name
        assert np.allclose(b["busy_fraction"], b["gpu_busy_ns"] / b["wall_ns"]), name


def test_busy_fractions_stay_within_0_and_100_percent_on_every_committed_trace():
    """Before: "GPU busy 527% → 210%" under CUDA graphs, busy time over the host range alone."""
    seen = 0
    for path in sorted(p for p in TRACES.iterdir() if (p / "manifest.json").is_file()):
        b = busy_per_step(wb.open_trace(path))
        f = b["busy_fraction"].dropna()
        assert ((f >= 0) & (f <= 1)).all(), (path.name, f.max())
        seen += len(f) > 0
    assert seen >= 40
    f = busy_per_step(wb.open_trace(committed(GRAPHS[0])))["busy_fraction"]
    assert 0.7 < f.median() <= 1.0  # the graph's kernels' span, not the host range that launched them


def test_overlapping_intervals_count_once():
    """Each kernel of a real step twice, and once more shifted into its neighbours: the union is
    the same as the kernels' own, or longer by exactly the uncovered part."""
    t = wb.open_trace(committed(EAGER[0]))
    k = t.columns("kernels", ["start", "end"])
    s, e = k["start"].to_numpy()[:200], k["end"].to_numpy()[:200]
    group = np.zeros(len(s), dtype=np.int64)
    once = union_lengths(group, s, e, 1)[0]
    assert once == int((e - s).sum())  # one stream of an eager step: its kernels never overlap
    twice = union_lengths(np.r_[group, group], np.r_[s, s], np.r_[e, e], 1)[0]
    assert twice == once
    span = union_lengths(np.r_[group, 0], np.r_[s, s[0]], np.r_[e, e[-1]], 1)[0]
    assert span == e[-1] - s[0]  # one interval over them all: the whole span
    per_group = union_lengths(np.arange(len(s)) % 2, s, e, 2)
    assert per_group.sum() == once


def test_eager_fusion_is_labelled_host_bound_and_cuda_graphs_are_not(reports):
    for name in EAGER:
        assert busy_per_step(wb.open_trace(committed(name)))["busy_fraction"].median() < 0.5
    md = reports(EAGER).markdown
    text = headline(md)[len("**Headline:** "):]
    assert text.startswith("wall-time comparison: confounded: base and fix host/launch-bound (GPU busy 7.6% → 4.5% of "
                           "a decode step); ranges the change did not touch moved on the host: qkv +51%, mlp +29%, "
                           "attention +23%. Read the kernel launches and GPU time per decode step, which the change "
                           "moves; the times below carry no verdict; changed most: kv\\_write in all 8 layers: "), text
    items = text.split("; ")
    assert "kernel launches per decode step **237 → 125**, -47.3%" in items
    assert any(i.startswith("GPU time per decode step **485.2 µs → 316.3 µs**, 0.65x") for i in items)
    assert "decode step **3.699 ms → 4.634 ms**, 1.25x (confounded: no verdict)" in items
    assert items.index("kernel launches per decode step **237 → 125**, -47.3%") < items.index(
        "decode step **3.699 ms → 4.634 ms**, 1.25x (confounded: no verdict)")
    assert not any(i.endswith((": slower", ": faster")) for i in items)
    assert row(md, "GPU busy per decode step / wall")[3].endswith(": host/launch-bound")
    # Under CUDA graphs the GPU is busy for most of the step (the host even runs ahead of it).
    for name in GRAPHS:
        assert busy_per_step(wb.open_trace(committed(name)))["busy_fraction"].median() >= 0.5
    md = reports(GRAPHS).markdown
    assert "host/launch-bound" not in headline(md)
    assert "host/launch-bound" not in row(md, "GPU busy per decode step / wall")[3]


# ------------------------------------------------------------------------------------ same numbers as the diff

def test_launches_and_time_per_step_are_the_diffs(reports):
    for pair in PAIRS:
        a, b = (load_trace(committed(n), role) for n, role in zip(pair, ("base", "fix")))
        d = wb.diff(a.trace, b.trace)
        for side, inp in (("a", a), ("b", b)):
            lp = launches(inp)
            assert lp["steps"] == d.totals[f"steps_{side}"], (pair, side)
            assert lp["kernels_mean"] == pytest.approx(d.totals[f"kernels_per_step_{side}"]), (pair, side)
            assert lp["gpu_mean"] == pytest.approx(d.totals[f"gpu_time_per_step_ns_{side}"]), (pair, side)
        md = reports(pair).markdown
        ka, kb = (f"{d.totals[f'kernels_per_step_{s}']:,.0f}" for s in "ab")
        assert f"kernel launches per decode step **{ka} → {kb}**" in headline(md), pair


# ------------------------------------------------------------------------------------ CPU captures

def _cpu_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The committed CPU trace, and the same trace without its ``aten::pow`` ops (a change in
    every RMSNorm module)."""
    doc = json.loads(gzip.decompress(CPU_TRACE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "aten::pow"]
    fix = tmp_path / "cpu-without-pow.json"
    fix.write_text(json.dumps(doc))
    return CPU_TRACE, fix


def test_a_cpu_capture_is_worded_as_cpu_ops(tmp_path):
    base, fix = _cpu_pair(tmp_path)
    r = wb.report(base, fix, md=tmp_path / "r.md")
    md = r.markdown
    assert r.model.words.unit == "CPU op"
    assert "## Per-layer CPU op counts and CPU op time of the ranges that changed" in md
    assert "### CPU op time of the changed ranges" in md and "### Aligned CPU op sequences" in md
    assert ("| Range | Instances per decode step | CPU ops per decode step | CPU op time per decode step (µs) "
            "| Change |") in md
    assert row(md, "CPU ops per decode step")[1] == "132 (1 step)"
    assert row(md, "CPU op time per decode step (sum of CPU op durations")
    assert "CPU op(s) removed" in md
    # No device claim: no busy row, no host-bound label, no kernel or GPU wording of its own.
    for said in ("GPU busy", "host/launch-bound", "GPU time", "kernel", "Kernel"):
        assert said not in md, said


def test_a_cpu_capture_page_names_cpu_ops_in_headings_and_figures(tmp_path):
    pytest.importorskip("plotly")
    base, fix = _cpu_pair(tmp_path)
    page = wb.report(base, fix).html
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page) + re.findall(r'<p class="note">([^<]*?):', page)
    headings = re.findall(r"<h[23]>(.*?)</h[23]>", page)
    assert "CPU op time of the changed ranges" in headings
    assert "Per-layer CPU op counts and CPU op time of the ranges that changed" in headings
    assert any(c.startswith("CPU op timeline of ") and "one row per thread" in c for c in captions), captions
    assert any(c == "CPU ops per step" for c in captions), captions
    for text in captions + headings:
        assert "GPU" not in text and "kernel" not in text.lower(), text


def test_a_bench_timing_replaces_the_capture_timing(tmp_path):
    """A trace whose manifest holds a ``workbench bench`` timing is compared and shown by it,
    as the diff compares it, and the note says so."""
    import shutil

    root = tmp_path / "store"
    for name in EAGER:
        shutil.copytree(committed(name), root / name)
    bench = json.loads((committed(GRAPHS[0]) / "manifest.json").read_text())["timing"]
    m = json.loads((root / EAGER[0] / "manifest.json").read_text())
    m["timing_bench"] = {**bench, "source": "workbench bench", "rounds": 30}
    (root / EAGER[0] / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))
    r = wb.report(*EAGER, root=root)
    assert row(r.markdown, "decode step")[1].startswith("0.6171 ms (")
    d = wb.diff(wb.open_trace(EAGER[0], root=root), wb.open_trace(EAGER[1], root=root))
    c = next(c for c in d.timing if c.metric == "decode_step_ms")
    assert c.verdict == "slower" and round(c.a_median, 4) == 0.6171
    # The eager pair is host-bound: the report keeps the interval, gives no verdict.
    assert row(r.markdown, "decode step")[3].endswith("): confounded, no verdict (see the headline)")
    assert "base timed by workbench bench (variants interleaved round by round)" in r.markdown
