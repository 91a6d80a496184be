"""Figures, colours, widgets and notebook helpers of ``workbench.viz``, on the committed
reference traces (no GPU, no browser)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from helpers import CPU_TRACE, EXTERNAL, TRACES  # noqa: E402
import workbench as wb  # noqa: E402
from workbench import viz  # noqa: E402
from workbench.trace import Trace  # noqa: E402

EVIL = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def pair():
    a = wb.open_trace(str(TRACES / "ref-h200-kvwrite-unfused-nsys"))
    b = wb.open_trace(str(TRACES / "ref-h200-kvwrite-fused-nsys"))
    return a, b, wb.diff(a, b)


@pytest.fixture(scope="module")
def evil():
    """The fused trace with a hostile kernel name and range name."""
    t = wb.open_trace(str(TRACES / "ref-h200-kvwrite-fused-nsys"))
    k = t.kernels.copy()
    k["short_name"] = k["short_name"].cat.rename_categories(lambda c: EVIL if c == "fused_write" else c)
    k["name"] = k["name"].cat.rename_categories(lambda c: EVIL + "full" if "fused_write" in c else c)
    r = t.ranges.copy()
    r["name"] = r["name"].cat.rename_categories(lambda c: "<b>qkv</b>" if c == "qkv" else c)
    r["path"] = r["path"].str.replace("/qkv", "/<b>qkv</b>", regex=False)
    return Trace({**t.tables, "kernels": k, "ranges": r}, dict(t.meta), name="evil<img src=x onerror=alert(1)>")


def test_import_is_lazy():
    code = ("import sys, workbench, workbench.viz, workbench.analysis, workbench.trace; "
            "bad = [m for m in ('plotly', 'ipywidgets') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_colors_are_stable_across_processes():
    code = "from workbench.viz.colors import kernel_colors as k; print(k(['index_elementwise_kernel', 'fused_write']))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                           env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2)}
    assert len(outs) == 1
    from workbench.viz.colors import PALETTE, color_scope, kernel_colors, muted, range_color, trace_presentation, \
        variant_color
    from workbench.workloads import presentation as of_workload

    decoder = of_workload("decoder")
    assert trace_presentation({"capture": {"workload": "decoder"}}) == decoder == trace_presentation({"workload": "decoder"})
    regions = {c for n, c in decoder.colors.items() if n in decoder.regions}
    with color_scope():
        # A fresh assignment gives what a fresh process gives.
        assert str(kernel_colors(["index_elementwise_kernel", "fused_write"])) == outs.pop().strip()
        # Kernels of one figure: distinct colours, never a workload's region colour, by name
        # (numbers read as numbers); the emphasised first and strong, the rest muted.
        many = [f"k{i}" for i in range(120)]
        first = kernel_colors(many)
        assert len(set(first.values())) == 120 and not regions & set(first.values())
        assert list(first)[:3] == ["k0", "k1", "k2"] and list(first)[10] == "k10"
        emph = kernel_colors(["k2", "k0", "k1"], emphasis=["k2"])
        assert list(emph) == ["k2", "k0", "k1"] and emph == {"k2": first["k2"], "k0": muted(first["k0"]),
                                                             "k1": muted(first["k1"])}
        # One kernel, one colour in every figure of the session, whatever else the figure draws.
        assert kernel_colors(["k7", "zzz"])["k7"] == first["k7"] == kernel_colors(["k7"])["k7"]
        assert range_color("kv_write", decoder) == "#d62728"
    with color_scope():
        assert kernel_colors(["k7"])["k7"] in PALETTE  # a fresh scope: the palette is free again
    assert variant_color("bucketed", decoder) != variant_color("full", decoder)
    assert variant_color("decoder-kvwrite-unfused", decoder) == variant_color("unfused", decoder) \
        != variant_color("fused", decoder)
    # A trace of no known workload (an imported capture) gets session colours only.
    foreign = trace_presentation({"source": {"format": "nsys"}})
    assert foreign.regions == () and not foreign.colors and foreign.default_pair is None
    assert range_color("kv_write") == range_color("kv_write", foreign) not in regions
    assert variant_color("decoder-kvwrite-unfused") in PALETTE


def test_a_registered_workload_presents_its_traces(pair, monkeypatch):
    """Regions, colours and the default pair come from the workload a trace names; a trace that
    names none (the imported reference captures) gets grey ranges and hash colours."""
    from workbench import workloads
    from workbench.viz.colors import RANGE_FILL, trace_presentation

    a, _, _ = pair
    pres = workloads.Presentation(
        regions=("kv_write",), colors={"kv_write": "#000001", "fused": "#000002"},
        default_pair=workloads.PairSpec("unfused", "fused", ("kvwrite",), exclude=("bucketed", "cudagraph", "compile"),
                                        prefer=("nsys",)))

    class Plugin:
        options: dict = {}
        presentation = pres

        def create(self, variant, device):  # pragma: no cover - never captured here
            raise NotImplementedError

    monkeypatch.setattr(workloads.registry, "_REGISTRY", {})
    assert viz.default_pair(root=TRACES, prefer_live=False) is None
    workloads.register("plugin", Plugin())
    t = Trace(dict(a.tables), {**a.meta, "workload": "plugin"}, name="plugin-trace")
    assert trace_presentation(t) is pres and trace_presentation(a) is workloads.NO_PRESENTATION

    def range_colors(trace):
        return [list(x.marker.color) for x in viz.timeline(trace, "layer_03/kv_write").data if x.name == "ranges"]

    assert range_colors(t) == [["#000001"]] and range_colors(a) == [[RANGE_FILL]]
    fig = viz.summary_bars(t, "range")
    assert dict(zip(fig.layout.yaxis.ticktext, fig.data[0].marker.color))["kv_write"] == "#000001"
    lps = viz.launches_per_step({"x": a, "y": a, "extra: plugin-kvwrite-fused": t})
    assert lps.data[2].marker.color == "#000002"
    assert viz.default_pair(root=TRACES, prefer_live=False) == ("ref-h200-kvwrite-unfused-nsys",
                                                                "ref-h200-kvwrite-fused-nsys")


def _json(fig) -> str:
    return fig.to_json()


def test_figures_deterministic_and_uid_free(pair):
    a, b, d = pair
    makers = [
        lambda: viz.layer_counts(d, range="kv_write"), lambda: viz.layer_time(d), lambda: viz.diff_bars(d),
        lambda: viz.diff_bars(d, 3), lambda: viz.diff_bars(d, "layer_03/kv_write"),
        lambda: viz.range_composition({"unfused": a, "fused": b}), lambda: viz.launches_per_step([a, b]),
        lambda: viz.summary_bars(a, "layer"), lambda: viz.summary_bars(a, "kernel"), lambda: viz.timeline(a),
        lambda: viz.timeline(b, ("layer", 2)),
    ]
    for make in makers:
        f1, f2 = make(), make()
        s = _json(f1)
        assert s == _json(f2)
        assert '"uid"' not in s
        assert f1.layout.title.text


def test_layer_counts_show_fusion(pair):
    _, _, d = pair
    fig = viz.layer_counts(d, range="kv_write")
    a, b = fig.data
    assert list(a.x) == list(range(8)) == list(b.x) and fig.layout.xaxis.title.text == "layer"  # by number
    assert list(a.y) == [15.0] * 8 and list(b.y) == [1.0] * 8
    assert "kv_write: 15 \u2192 1" in a.customdata[0][1]
    t = viz.layer_time(d)
    assert all(ya > yb for ya, yb in zip(t.data[0].y, t.data[1].y))


def test_diff_bars_scopes(pair):
    _, _, d = pair
    fig = viz.diff_bars(d, "layer_03/kv_write")
    ka, kb = fig.data[0], fig.data[2]
    assert (list(ka.x), list(kb.x)) == ([15.0], [1.0])
    # Horizontal bars, one row per range: names beside the bars, never rotated under them.
    layer = viz.diff_bars(d, 5)
    assert all(t.orientation == "h" for t in layer.data)
    assert list(layer.layout.yaxis.ticktext) == ["attention", "kv_write", "qkv"]
    assert list(layer.data[0].x) == [4.0, 15.0, 1.0] and list(layer.data[2].x) == [4.0, 1.0, 1.0]
    total = viz.diff_bars(d)
    assert sum(total.data[0].x) == 160 and sum(total.data[2].x) == 48


def test_timeline_of_one_range_instance(pair):
    a, b, _ = pair
    fa = viz.timeline(a, "layer_03/kv_write")
    fb = viz.timeline(b, "layer_03/kv_write")
    kernels = lambda f: sum(len(t.x) for t in f.data if t.name != "ranges")  # noqa: E731
    assert kernels(fa) == 15 and kernels(fb) == 1
    assert "step_0/layer_03/kv_write" in fa.layout.title.text and "15 kernels" in fa.layout.title.text
    rows = [t for t in fa.data if t.name == "ranges"]
    assert rows and list(rows[0].text) == ["kv_write"]
    assert min(fa.data[-1].base) >= 0
    names = {t.name for t in fb.data if t.name != "ranges"}
    assert names == {"fused_write"}
    # A whole step: 160 kernels under 1 + 8 + 24 ranges.
    step = viz.timeline(a)
    assert kernels(step) == 160
    assert sum(len(t.x) for t in step.data if t.name == "ranges") == 33
    # A pair of timelines shares one colour map: one kernel, one colour; the changed ones strong.
    pa, pb = viz.timeline_pair((a, b), "layer_03/kv_write")
    colors = {t.name: t.marker.color for f in (pa, pb) for t in f.data if t.name != "ranges"}
    assert len(set(colors.values())) == len(colors) == len({t.name for t in pa.data + pb.data if t.name != "ranges"})
    assert {t.marker.color for t in pb.data if t.name == "fused_write"} == {colors["fused_write"]}
    assert "\u2014 1 kernel, " in pb.layout.title.text and "\u2014 15 kernels, " in pa.layout.title.text


def test_launches_and_composition(pair):
    a, b, _ = pair
    fig = viz.launches_per_step({"unfused": a, "fused": b})
    assert list(fig.data[0].y) == [160, 160, 160] and list(fig.data[1].y) == [48, 48, 48]
    comp = viz.range_composition({"unfused": a, "fused": b}, metric="kernels")
    per = {}
    for t in comp.data:
        for cd, x in zip(t.customdata, t.x):
            if cd[0]:
                per[(cd[0], cd[1])] = per.get((cd[0], cd[1]), 0) + x
    # The base left: its panel first; rows (horizontal bars) by range name, the same in both panels.
    assert [a.text for a in comp.layout.annotations] == ["unfused", "fused"]
    assert {(t.xaxis, t.customdata[1][0]) for t in comp.data if t.customdata[1][0]} == {("x", "unfused"), ("x2", "fused")}
    assert list(comp.layout.yaxis.ticktext) == ["attention", "kv_write", "qkv"]
    assert per[("unfused", "kv_write")] == 120 and per[("fused", "kv_write")] == 8  # per step, 8 layers


def test_sweep_error_bars():
    rows = [{"context": c, "variant": v, "median_ms": m, "min_ms": m - 0.1, "max_ms": m + 0.2}
            for c in (8192, 512, 2048) for v, m in (("full", 5.0), ("bucketed", c / 2000))]
    fig = viz.sweep(rows)
    assert [t.name for t in fig.data] == ["full", "bucketed"]  # as they first appear
    full = fig.data[0]
    # The base first: as asked, or the workload's default pair (unfused -> fused), else as given.
    assert [t.name for t in viz.sweep(rows, order=["bucketed", "full"]).data] == ["bucketed", "full"]
    pair = [dict(r, variant={"full": "fused", "bucketed": "unfused"}[r["variant"]]) for r in rows]
    assert [t.name for t in viz.sweep(pair, workload="decoder").data] == ["unfused", "fused"]
    assert "min\u2013max" in full.customdata[0][1] and full.customdata[0][0] == "5.000"
    assert list(full.x) == [512.0, 2048.0, 8192.0]
    assert list(full.error_y.array) == pytest.approx([0.2] * 3) and list(full.error_y.arrayminus) == pytest.approx([0.1] * 3)
    assert fig.layout.xaxis.type == "log"
    cat = viz.sweep([{"context": "ref", "variant": "full", "median_ms": 1.0}], lo=None, hi=None)
    assert cat.layout.xaxis.type is None and cat.data[0].error_y.array is None
    with pytest.raises(ValueError):
        viz.sweep([{"x": 1}])


def test_hostile_names_are_escaped(evil, pair):
    a, _, _ = pair
    d = wb.diff(a, evil)
    blobs = [_json(viz.timeline(evil, "layer_00/kv_write")), _json(viz.timeline(evil, ("layer", 0))),
             _json(viz.range_composition({"x": evil})), _json(viz.summary_bars(evil, "kernel")),
             _json(viz.diff_bars(d, 0)), _json(viz.layer_counts(d))]
    for s in blobs:
        assert "<script>" not in s and "<b>qkv" not in s and "<img" not in s
    assert "&lt;script&gt;" in blobs[0]
    w = viz.TraceDiffWidget(a=a, b=evil, root=TRACES)
    w.scope.value = "layer:0"
    html = w.table.value + w.summary.value + "".join(label for label, _ in w.scope.options)
    assert "<script>" not in w.table.value and "&lt;script&gt;" in w.table.value
    assert "<img" not in w.summary.value and "&lt;img" in w.summary.value
    assert "<b>qkv" not in w.table.value
    assert html


def test_trace_diff_widget_interaction(pair, monkeypatch):
    monkeypatch.setenv("WORKBENCH_PREFER_LIVE", "0")  # live captures in traces/ would be preferred
    w = viz.TraceDiffWidget(root=TRACES)
    assert (w.a_select.value, w.b_select.value) == ("ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys")
    assert {v for _, v in w.a_select.options} == set(wb.list_traces(TRACES))
    values = [v for _, v in w.scope.options]
    assert values[:9] == ["all"] + [f"layer:{i}" for i in range(8)] and "range:layer_03/kv_write" in values
    assert "160 \u2192 48" in w.summary.value
    assert w.table.value.count("wb-alignment\"") == 1  # all 8 kv_write ranges share one alignment
    assert "15 removed" in w.table.value and "fused_write" in w.table.value

    def mime(out):
        return [o["data"]["application/vnd.plotly.v1+json"] for o in out.outputs
                if "application/vnd.plotly.v1+json" in o.get("data", {})]

    assert len(mime(w.bars)) == 1
    w.scope.value = "range:layer_03/kv_write"
    assert mime(w.bars)[0]["layout"]["title"]["text"] == "A vs B: layer_03/kv_write"
    assert w.table.value.count('class="wb-replace"') == 15  # 15 A kernels beside 1 B kernel
    assert w.timeline.outputs == ()
    w.timeline_button.click()
    figs = mime(w.timeline)
    assert len(figs) == 2 and "15 kernels" in figs[0]["layout"]["title"]["text"]
    assert figs[1]["layout"]["title"]["text"].startswith("B: ")
    w.scope.value = "layer:5"
    assert w.timeline.outputs == () and "layer_05/attention" in w.table.value
    w.show_timeline()
    # The typical instance of layer 5 (a decode step's, of median duration), not step_0's warm-up.
    assert [re.search(r"step_\d/layer_05 ", f.layout.title.text) is not None for f in w.timeline_figures] == [True, True]
    # Another pair of traces: the scope survives when it still exists.
    w.b_select.value = "ref-h200-kvwrite-unfused-cache-bucketed-torch"
    assert w.scope.value == "layer:5" and "160 \u2192 152" in w.summary.value


def test_trace_diff_widget_no_common_range(pair):
    a, b, _ = pair
    r = b.ranges.copy()
    r["name"] = r["name"].cat.rename_categories(lambda c: c if c.startswith("step") else f"x_{c}")
    r["path"] = r["path"].str.replace("/", "/x_", regex=False)
    other = Trace({**b.tables, "ranges": r}, dict(b.meta), name="renamed")
    w = viz.TraceDiffWidget(a=a, b=other, root=TRACES)
    assert "No range in common" in w.summary.value
    assert "nothing to align" in w.table.value.lower()
    w.show_timeline()  # first step of each: still drawable
    assert len(w.timeline_figures) == 2


def test_trace_explorer(pair):
    a, _, _ = pair
    e = viz.TraceExplorer(a)
    assert "kv_write" in e.table.value and e.figure is not None
    e.by.value = "kernel"
    assert "fused_write" not in e.table.value and "index_elementwise_kernel" in e.table.value
    assert e.figure.layout.title.text.endswith("by kernel")
    e.metric.value = "kernels"
    assert "kernels by kernel" in e.figure.layout.title.text
    opts = e.instance.options
    assert opts[0][0] == "step_0" and any("layer_03/kv_write" in label for label, _ in opts)
    e.instance.value = next(v for label, v in opts if label.strip().endswith("layer_03/kv_write"))
    e.timeline_button.click()
    assert "15 kernels" in e.timeline_figure.layout.title.text
    store = viz.TraceExplorer(root=TRACES)
    assert store.trace_select is not None and store.trace.label == store.trace_select.value


def test_find_trace_and_sweep_loader(tmp_path, monkeypatch):
    from workbench.viz import find_trace, load_sweep, traces_root

    monkeypatch.setenv("WORKBENCH_TRACES", str(TRACES))
    monkeypatch.setenv("WORKBENCH_PREFER_LIVE", "0")  # live captures in traces/ would be preferred
    assert traces_root() == TRACES
    assert find_trace("kvwrite", "unfused", "nsys") == "ref-h200-kvwrite-unfused-nsys"
    assert find_trace("kvwrite", "fused", "nsys", exclude=("unfused",)) == "ref-h200-kvwrite-fused-nsys"
    assert find_trace("fused", "bucketed", "torch", exclude=("unfused",)) == "ref-h200-kvwrite-fused-cache-bucketed-torch"
    assert find_trace("no-such-token") is None
    # A live capture (not ref-, GPU kernels, variant in the manifest) wins over the reference.
    root = tmp_path / "traces"
    import shutil

    shutil.copytree(TRACES / "ref-h200-kvwrite-fused-nsys", root / "ref-h200-kvwrite-fused-nsys")
    shutil.copytree(TRACES / "ref-h200-kvwrite-fused-nsys", root / "decoder-eager-nsys")
    man = root / "decoder-eager-nsys" / "manifest.json"
    meta = json.loads(man.read_text())
    meta["capture"] = {"backend": "nsys", "variant": {"kv_write": "unfused", "cache_rows": "full"}}
    man.write_text(json.dumps(meta))
    assert find_trace("kvwrite", "unfused", "nsys", root=root, prefer_live=True) == "decoder-eager-nsys"
    # Preferring the reference still falls back to a live capture when no reference matches.
    assert find_trace("kvwrite", "unfused", "nsys", root=root, prefer_live=False) == "decoder-eager-nsys"
    monkeypatch.setenv("WORKBENCH_PREFER_LIVE", "0")
    assert find_trace("kvwrite", "fused", "nsys", root=root, exclude=("unfused",)) == "ref-h200-kvwrite-fused-nsys"

    p = tmp_path / "h200_live.json"
    p.write_text(json.dumps({"results": [
        {"ctx": 512, "variant": {"cache_rows": "full"}, "decode_step_ms": {"median": 2.0, "min": 1.9, "max": 2.2}},
        {"context": 512, "variant": "bucketed", "median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1},
        {"unrelated": 1},
    ]}))
    df = load_sweep(p)
    assert df.to_dict(orient="records") == [
        {"context": 512, "variant": "bucketed", "median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1},
        {"context": 512, "variant": "full", "median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.2}]
    p.write_text("not json")
    assert load_sweep(p) is None


def _fake_live(root: Path, name: str, ref: str, variant: dict, engine: str, backend: str) -> None:
    import shutil

    shutil.copytree(TRACES / ref, root / name)
    man = root / name / "manifest.json"
    meta = json.loads(man.read_text())
    meta["name"] = name
    meta["capture"] = {"backend": backend, "engine": engine, "workload": "decoder", "variant": variant}
    man.write_text(json.dumps(meta))


def test_find_pair_prefers_matching_live_captures(tmp_path, monkeypatch):
    """Live captures named as benchmarks/live_campaign.py names them pair up by name; graph
    and compile engines are left out; the reference pair is the fallback."""
    from workbench.viz import find_pair, find_trace, load_sweep

    monkeypatch.delenv("WORKBENCH_PREFER_LIVE", raising=False)
    root = tmp_path / "traces"
    nsys_u, nsys_f = "ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys"
    for n in (nsys_u, nsys_f, "ref-h200-kvwrite-fused-cache-full-torch", "ref-h200-kvwrite-fused-cache-bucketed-torch"):
        import shutil

        shutil.copytree(TRACES / n, root / n)
    fusion = dict(exclude=("bucketed", "cudagraph", "compile"), prefer=("nsys", "eager"))
    assert find_pair("unfused", "fused", "kvwrite", root=root, **fusion) == (nsys_u, nsys_f)
    _fake_live(root, "h200-kvwrite-unfused-cudagraph-torch", nsys_u, {"kv_write": "unfused"}, "cudagraph", "torch")
    _fake_live(root, "h200-kvwrite-fused-cudagraph-torch", nsys_f, {"kv_write": "fused"}, "cudagraph", "torch")
    assert find_pair("unfused", "fused", "kvwrite", root=root, **fusion) == (nsys_u, nsys_f)
    _fake_live(root, "h200-kvwrite-unfused-eager-torch", nsys_u, {"kv_write": "unfused", "cache_rows": "full"}, "eager", "torch")
    _fake_live(root, "h200-kvwrite-fused-eager-torch", nsys_f, {"kv_write": "fused", "cache_rows": "full"}, "eager", "torch")
    assert find_pair("unfused", "fused", "kvwrite", root=root, **fusion) == \
        ("h200-kvwrite-unfused-eager-torch", "h200-kvwrite-fused-eager-torch")
    _fake_live(root, "h200-kvwrite-unfused-eager-nsys", nsys_u, {"kv_write": "unfused"}, "eager", "nsys")
    _fake_live(root, "h200-kvwrite-fused-eager-nsys", nsys_f, {"kv_write": "fused"}, "eager", "nsys")
    assert find_pair("unfused", "fused", "kvwrite", root=root, **fusion) == \
        ("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys")
    assert find_pair("unfused", "fused", "kvwrite", root=root, prefer_live=False, **fusion) == (nsys_u, nsys_f)
    assert find_trace("kvwrite", "unfused", root=root, **fusion) == "h200-kvwrite-unfused-eager-nsys"
    # Bucketing: the pair at one context, never a full/bucketed pair from different captures.
    for ctx in (512, 8192):
        for rows in ("full", "bucketed"):
            _fake_live(root, f"h200-cache-{rows}-ctx{ctx}-eager-torch", f"ref-h200-kvwrite-fused-cache-{rows}-torch",
                       {"kv_write": "fused", "cache_rows": rows, "ctx": ctx}, "eager", "torch")
    bucket = dict(exclude=("cudagraph", "compile"), prefer=("ctx512", "eager", "fused"))
    assert find_pair("full", "bucketed", "torch", root=root, **bucket) == \
        ("h200-cache-full-ctx512-eager-torch", "h200-cache-bucketed-ctx512-eager-torch")
    assert find_pair("full", "bucketed", "torch", root=root, exclude=("cudagraph",), prefer=("ctx8192",)) == \
        ("h200-cache-full-ctx8192-eager-torch", "h200-cache-bucketed-ctx8192-eager-torch")
    assert find_pair("full", "bucketed", "nothing", root=root) is None

    # The campaign results file: cache groups only, torch timing over nsys, one row per point.
    res = tmp_path / "h200_live.json"
    caps = [{"name": "a", "group": "fusion", "measured": {"variant": {"ctx": 128, "cache_rows": "full"},
                                                          "decode_step_ms": {"median": 9.0}}},
            {"name": "b", "group": "cache-ctx512", "error": "skipped: budget"}]
    for ctx, med in ((512, 1.0), (2048, 1.0)):
        for backend, shift in (("nsys", 5.0), ("torch", 0.0)):
            caps.append({"name": f"c{ctx}{backend}", "group": f"cache-ctx{ctx}", "measured": {
                "trace": f"c{ctx}", "engine": "eager", "backend": backend,
                "variant": {"ctx": ctx, "cache_rows": "full", "kv_write": "fused"},
                "decode_step_ms": {"median": med + shift, "min": med - 0.1 + shift, "max": med + 0.2 + shift, "n": 60}}})
    res.write_text(json.dumps({"prefix": "h200", "captures": caps, "equality": []}))
    df = load_sweep(res)
    assert df[["context", "variant", "engine", "backend", "median_ms"]].to_dict(orient="records") == [
        {"context": 512, "variant": "full", "engine": "eager", "backend": "torch", "median_ms": 1.0},
        {"context": 2048, "variant": "full", "engine": "eager", "backend": "torch", "median_ms": 1.0}]
    fig = viz.sweep(df, dash="engine")
    assert [t.name for t in fig.data] == ["full \u00b7 eager"] and fig.data[0].line.dash == "solid"


def test_many_names_are_folded_into_other(pair):
    """Thousands of kernel or range names must not become thousands of plotly traces."""
    import pandas as pd

    a, _, _ = pair
    k = a.kernels.copy()
    k["short_name"] = pd.Categorical([f"kernel_{i % 40:02d}" for i in range(len(k))])
    k["name"] = k["short_name"]
    many = Trace({**a.tables, "kernels": k}, dict(a.meta), name="many")
    tl = viz.timeline(many)
    names = [t.name for t in tl.data if t.name != "ranges"]
    assert len(names) == 16 and "(other kernels)" in names
    assert sum(len(t.x) for t in tl.data if t.name != "ranges") == 160
    comp = viz.range_composition(many, max_kernels=10)
    assert len(comp.data) == 11 and "(other kernels)" in [t.name for t in comp.data]
    assert sum(sum(x or 0 for x in t.x) for t in viz.range_composition(many, metric="kernels", max_kernels=10).data) == 160




@pytest.mark.skipif(not (EXTERNAL / "nsys-ai-mfu-2gpu-before.sqlite.gz").is_file(), reason="no ../shared external traces")
def test_widget_on_a_trace_with_thousands_of_ranges():
    a = wb.open_trace(str(EXTERNAL / "nsys-ai-mfu-2gpu-before.sqlite.gz"))
    b = wb.open_trace(str(EXTERNAL / "nsys-ai-mfu-2gpu-after.sqlite.gz"))
    w = viz.TraceDiffWidget(a=a, b=b, root=TRACES)
    assert len(w.diff.ranges) > 2000
    assert len(w.scope.options) <= 1 + 400 + len(w.diff.ranges["layer"].unique())
    assert len(w.figure.data) == 4 and len(w.figure.data[0].x) <= 31
    w.scope.value = "range:(no launch record)"
    w.show_timeline()
    assert w.timeline_figures == [] and "no range instance" in w.timeline.outputs[0]["data"]["text/html"]
    e = viz.TraceExplorer(a)
    e.by.value = "layer"
    assert len(e.figure.data) <= 13


def test_sweep_facets_have_their_own_axes():
    rows = [{"context": c, "variant": v, "engine": e, "median_ms": m * (10 if e == "eager" else 1)}
            for c in (512, 2048) for v, m in (("full", 0.5), ("bucketed", 0.45)) for e in ("eager", "cudagraph")]
    fig = viz.sweep(rows, facet="engine", lo=None, hi=None)
    assert [(t.name, t.xaxis, t.showlegend) for t in fig.data] == [
        ("full", "x", True), ("bucketed", "x", True), ("full", "x2", False), ("bucketed", "x2", False)]
    assert [a.text for a in fig.layout.annotations] == ["engine: cudagraph", "engine: eager"]
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    assert fig.to_json() == viz.sweep(rows, facet="engine", lo=None, hi=None).to_json()


def test_a_large_range_stays_light(pair):
    """A range of a third of a million kernels: at most ``max_bars`` kernel bars (the longest one
    by one, the rest merged per row and time slice), every kernel counted, the title saying so."""
    import numpy as np
    import pandas as pd

    a, _, _ = pair
    k = a.kernels
    reps = 700
    big = pd.concat([k] * reps, ignore_index=True)
    shift = np.repeat(np.arange(reps, dtype=np.int64) % 7, len(k))
    big["start"] += shift
    big["end"] += shift
    for c in k.columns:
        if isinstance(k[c].dtype, pd.CategoricalDtype):
            big[c] = big[c].astype(k[c].dtype)
    t = Trace({**a.tables, "kernels": big}, dict(a.meta), name="big")
    fig = viz.timeline(t, max_bars=2000)
    kernel_traces = [tr for tr in fig.data if tr.name != "ranges"]
    merged = [tr for tr in kernel_traces if tr.name.startswith("(shorter")]
    assert len(merged) == 1 and sum(len(tr.x) for tr in kernel_traces) <= 2000
    one_by_one = sum(len(tr.x) for tr in kernel_traces if tr not in merged)
    counted = sum(int(cd[0].split()[0].replace(",", "")) for cd in merged[0].customdata)
    assert one_by_one == 1000 and one_by_one + counted == 160 * reps
    assert f"{160 * reps:,} kernels" in fig.layout.title.text and "merged" in fig.layout.title.text
    assert len(fig.to_json()) < 2_000_000


def test_cpu_only_traces_say_cpu():
    cpu = wb.open_trace(str(CPU_TRACE))
    assert viz.units(cpu).works == "CPU ops" and viz.units(cpu, cpu).lane == "thread"
    a = wb.open_trace(str(TRACES / "ref-h200-kvwrite-fused-nsys"))
    assert viz.units(a).time == "GPU time" and viz.units([a, cpu]).work == "kernel or CPU op"
    figs = [viz.timeline(cpu), viz.range_composition(cpu), viz.launches_per_step(cpu), viz.summary_bars(cpu, "kernel"),
            viz.summary_bars(cpu, "layer", metric="kernels")]
    for fig in figs:
        assert "GPU" not in fig.to_json() and "kernel" not in fig.layout.title.text
    assert any(tr.y[0].startswith("thread ") for tr in figs[0].data if tr.name != "ranges")
    assert "CPU ops" in figs[0].layout.title.text and "CPU time" in figs[1].layout.title.text


def test_readable_text_helpers():
    import pandas as pd

    from workbench.viz.common import fmt_ns, kernel_names, last_part, time_unit, wrap

    assert [fmt_ns(v) for v in (850, 22015.0, 486_123, 1_234_567, 2.5e9)] == \
        ["850 ns", "22.0 \u00b5s", "486 \u00b5s", "1.23 ms", "2.50 s"]
    assert time_unit(9e6) == (1e3, "\u00b5s") and time_unit(3e7) == (1e6, "ms")
    assert wrap("a_" * 30, 10).count("<br>") == 5 and "&lt;T&gt;" in wrap("kernel<T>")
    long = wrap("x" * 500, 20, max_lines=3)
    assert long.count("<br>") == 2 and long.endswith("\u2026")
    assert [last_part(n) for n in ("step_0/layer_03/kv_write", "nn.Module: LlamaMLP_0", "model.layers.3.self_attn",
                                   "model.layers.3")] == ["kv_write", "LlamaMLP_0", "self_attn", "layers.3"]
    both = pd.DataFrame({"short_name": ["k"], "display_name": ["k<float>"]})
    assert list(kernel_names(both)) == ["k<float>"] and list(kernel_names(both[["short_name"]])) == ["k"]


def test_cpu_diff_figures_say_cpu():
    """The diff of two CPU-only traces draws CPU wording: needs the diff to carry its traces'
    work units (``TraceDiff.work_units``, one per side), which :func:`workbench.viz.units` reads."""
    cpu = wb.open_trace(str(CPU_TRACE))
    d = wb.diff(cpu, cpu)
    if getattr(d, "work_units", None) is None:
        pytest.xfail("TraceDiff carries no work_units yet: diff figures cannot tell CPU ops from kernels")
    for fig in (viz.diff_bars(d), viz.layer_counts(d), viz.layer_time(d)):
        assert "GPU" not in fig.to_json() and "CPU" in fig.to_json()


def test_natural_order_of_layers_and_names():
    from workbench.textfmt import natural_key

    names = ["model.layers.10", "model.layers.2", "model.layers.1", "Conv_10 + Relu_11", "Conv_3", "x01", "x1"]
    assert sorted(names, key=natural_key) == ["Conv_3", "Conv_10 + Relu_11", "model.layers.1", "model.layers.2",
                                              "model.layers.10", "x01", "x1"]
    a, b = (wb.open_trace(str(TRACES / n)) for n in ("h200-hf-attn-eager-static-nsys", "h200-hf-attn-sdpa-static-nsys"))
    d = wb.diff(a, b)
    w = viz.TraceDiffWidget(a, b, root=TRACES)
    layers = [int(label.split()[1]) for label, v in w.scope.options if v.startswith("layer:")]
    assert layers == list(range(16))
    ranges = [v for _, v in w.scope.options if v.startswith("range:LlamaForCausalLM/model.layers.") and v.count("/") == 1]
    assert [int(v.rsplit(".", 1)[1]) for v in ranges] == list(range(16))  # model.layers.2 before model.layers.10
    fig = viz.layer_counts(d, range="self_attn")
    assert list(fig.data[0].x) == list(range(16))


def _trt():
    data = TRACES.parent / "tests" / "data" / "tensorrt"
    fp32, fp16 = wb.import_file(data / "resnet18-a100-fp32"), wb.import_file(data / "resnet18-a100-fp16")
    fp32.name, fp16.name = "fp32", "fp16"
    return fp32, fp16


def test_tensorrt_figures_say_engine_layers_per_inference():
    """A TensorRT engine profile has engine layers and one inference, no steps: no figure or
    widget line of it says "step" or "kernel"; an aligned layer whose precision and time moved
    is not "unchanged"."""
    fp32, fp16 = _trt()
    d = wb.diff(fp32, fp16)
    figs = [viz.diff_bars(d, max_ranges=20), viz.layer_time(d), viz.layer_counts(d), viz.launches_per_step([fp32, fp16]),
            viz.summary_bars(fp16, "range"), viz.range_composition([fp32, fp16])]
    for fig in figs:
        words = " ".join([fig.layout.title.text or "", str(fig.layout.xaxis.title.text), str(fig.layout.yaxis.title.text),
                          *(a.text for a in fig.layout.annotations)])
        assert "step" not in words and "kernel" not in words, words
    bars = figs[0]
    assert [a.text for a in bars.layout.annotations] == ["engine layers per inference", "GPU time per inference (\u00b5s)"]
    rows = list(bars.layout.yaxis.ticktext)
    assert rows.index("Conv_3 + Relu_4") < rows.index("Conv_10 + Add_11 + Relu_12")  # numbers read as numbers
    w = viz.TraceDiffWidget(fp32, fp16, root=TRACES)
    text = re.sub(r"<[^>]+>", " ", w.summary.value + w.table.value)
    assert "step" not in text and "engine layers per inference" in text and w.scope.options[0][0] == "every engine layer"
    # The layers that changed alike are listed together: precision and (mean) time, not "unchanged".
    assert "(21 engine layers) : engine layers per inference 1 \u2192 1 each; precision FP32 \u2192 FP16, GPU time " \
           "97.9 \u00b5s \u2192 43.3 \u00b5s each on average (-55.8%)" in re.sub(r"\s+", " ", text)
    assert "unchanged" not in text
    w.scope.value = "range:Conv_0 + Relu_1"
    assert "precision FP32 \u2192 FP16, GPU time 522 \u00b5s \u2192 112 \u00b5s (-78.6%)" in w.table.value
    assert "unchanged" not in w.table.value


def test_timeline_views_and_shared_axis():
    """An eager window is host-dominated: its timeline takes the GPU view (idle gaps cut),
    where its kernels fill the width; a pair shares one time axis, so bucketed attention
    (about 26% less GPU time than full) is that much shorter."""
    full, bucketed = (wb.open_trace(str(TRACES / f"h200-cache-{v}-ctx512-eager-torch")) for v in ("full", "bucketed"))
    fa, fb = viz.timeline_pair((full, bucketed), "layer_03/attention")
    assert fa.layout.xaxis.range == fb.layout.xaxis.range
    assert all("GPU view" in f.layout.title.text.replace("<br>", " ") and "idle gaps cut" in f.layout.xaxis.title.text
               for f in (fa, fb))

    def end(f):
        return max(b + x for t in f.data if t.name != "ranges" for b, x in zip(t.base, t.x))

    assert end(fa) == pytest.approx(fa.layout.xaxis.range[1])
    assert 0.65 < end(fb) / end(fa) < 0.8
    kernels = [x for t in fa.data if t.name != "ranges" for x in t.x]
    assert min(kernels) / fa.layout.xaxis.range[1] > 0.02  # no sliver: at least 2% of the axis
    window = viz.timeline(full, "layer_03/attention", view="window")
    assert "GPU view" not in window.layout.title.text.replace("<br>", " ") and window.layout.xaxis.range[1] > 10 * fa.layout.xaxis.range[1]
    # Ranges in the GPU view span the kernels they launched; the whole window's ranges are all drawn.
    attention = [t for t in fa.data if t.name == "ranges"][0]
    assert attention.base[0] == 0 and attention.x[0] == pytest.approx(end(fa))
    # A CUDA-graph step keeps the GPU busy: the window's own time.
    graph = viz.timeline(wb.open_trace(str(TRACES / "h200-kvwrite-unfused-cudagraph-nsys")))
    assert "GPU view" not in graph.layout.title.text.replace("<br>", " ") and graph.layout.xaxis.title.text.startswith("time from window start")
    with pytest.raises(ValueError, match="view"):
        viz.timeline(full, view="zoom")


def test_colors_follow_a_kernel_across_figures(pair):
    """The same kernel, the same colour in every figure of a session; a colour scope (what a
    report draws in) gives the same colours whatever was drawn before it."""
    from workbench.viz.colors import color_scope, muted

    a, b, _ = pair
    with color_scope():
        first = viz.timeline(a, "layer_03/kv_write")
        k1 = {t.name: t.marker.color for t in first.data if t.name != "ranges"}
    viz.summary_bars(wb.open_trace(str(TRACES / "h200-hf-attn-eager-static-nsys")), "kernel")  # other kernels first
    with color_scope():
        again = viz.timeline(a, "layer_03/kv_write")
        assert again.to_json() == first.to_json()
        comp = viz.range_composition({"unfused": a, "fused": b})
        k2 = {t.name: t.marker.color for t in comp.data}
        steps = viz.timeline(a)
        k3 = {t.name: t.marker.color for t in steps.data if t.name != "ranges"}
    shared = set(k1) & set(k2) & set(k3)
    assert len(shared) >= 3
    for n in shared:  # strong where a figure emphasises it, muted where it does not: one hue
        assert k1[n] == k3[n] and k2[n] in (k1[n], muted(k1[n]))


def test_rank_steps_leaves_the_warm_up_out():
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        ts = wb.import_set("cpu4", sorted((TRACES.parent / "tests/data/sets/cpu4").glob("rank*.json.gz")), root=root,
                           executor="local")
        steps = ts.steps()
        fig = viz.rank_steps(ts)
    assert "step_0 left out: warm-up, up to 1.74 s" in fig.layout.title.text.replace("<br>", " ")
    assert [a.text for a in fig.layout.annotations] == ["step_1", "step_2"]
    names = {t.name for t in fig.data}
    assert names == {"own time (outside collectives)", "in collectives (waiting included)"} and "_ns" not in str(names)
    own = [t for t in fig.data if t.name.startswith("own") and t.xaxis == "x"][0]
    top = max(a + b for a, b in zip(own.y, [t for t in fig.data if t.name.startswith("in") and t.xaxis == "x"][0].y))
    assert max(own.y) > 0.7 * top  # the straggler's 122 ms is most of the axis, not a sliver
    assert list(own.marker.line.color).index("#111111") == 2  # rank 2 outlined
    # Two runs of the job in one set: a member is its variant and rank.
    import pandas as pd

    two = viz.rank_steps(pd.concat([steps.assign(variant="base"), steps.assign(variant="fix")], ignore_index=True))
    assert list(two.data[0].x) == [f"{v} rank {r}" for v in ("base", "fix") for r in range(4)]
    assert list(two.data[0].marker.line.color).count("#111111") == 2  # rank 2 of each run
    every = viz.rank_steps(steps, warmup=0)
    assert [a.text for a in every.layout.annotations] == ["step_0", "step_1", "step_2"]
    with pytest.raises(ValueError, match="steps"):
        viz.rank_steps(steps.drop(columns="own_ns"))


def test_widget_lists_time_changes_with_their_size():
    """Full vs bucketed attention: no kernel changes, so the widget's list is the ranges whose
    time moved, one line for the 8 layers' attention, with the mean change (about 26%)."""
    w = viz.TraceDiffWidget(a="h200-cache-full-ctx512-eager-torch", b="h200-cache-bucketed-ctx512-eager-torch",
                            root=TRACES)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", w.table.value.split("</style>")[1]))
    assert text.count("same kernels") == 1 and "(8 ranges)" in text and "unchanged" not in text
    assert "same kernels, GPU time 19.9 \u00b5s \u2192 14.7 \u00b5s each on average (-26.1%)" in text
