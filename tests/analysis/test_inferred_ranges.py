"""Inferred steps and layers as ranges (``workbench.trace.inferred.ranges``), as a user meets
them: someone else's capture with no NVTX, imported, summarized and diffed from the command
line. The captures are the committed H200 CUDA-graph traces of the fused and unfused KV-cache
write with every range taken out, written as Chrome trace JSON (what another tool would hand
over) and imported like any file."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.trace.assemble import build
from workbench.trace.manifest import INFERRED
from workbench.trace.options import ImportOptions
from workbench.trace.schema import RawTables, empty_table

from helpers import TRACES, assert_one_line, cli_outcome, run_cli

UNFUSED, FUSED = "h200-kvwrite-unfused-cudagraph-nsys", "h200-kvwrite-fused-cudagraph-nsys"


def _no_ranges(name: str, options: ImportOptions = ImportOptions(infer=False), share: float = 1.0) -> wb.Trace:
    """A committed trace built again from its kernels and API calls alone: no range at all;
    ``share``: only that share of its first kernels (a window closed early)."""
    t = wb.open_trace(name)
    k = t.kernels.sort_values("start", kind="stable")
    k = k.iloc[: int(len(k) * share)].reset_index(drop=True)
    raw = {"kernels": k.drop(columns=["range_id"]), "api": t.api.copy(),
           "ranges": empty_table("ranges")[["name", "start", "end", "pid", "tid"]],
           "memcpy": t.memcpy.copy(), "memset": t.memset.copy()}
    return build(RawTables(raw, {"source": dict(t.meta["source"])}), name, options)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store holding the two captures, imported from Chrome JSON files with no ranges."""
    tmp = tmp_path_factory.mktemp("inferred")
    for name, short in ((UNFUSED, "unfused"), (FUSED, "fused")):
        wb.export_chrome(_no_ranges(name), tmp / f"{short}.json")
        run_cli("import", str(tmp / f"{short}.json"), "--name", short, root=tmp / "store")
    return tmp / "store"


def test_an_uninstrumented_capture_gets_its_steps_and_layers_labelled_inferred(store):
    t = wb.open_trace("unfused", root=store)
    info = t.meta[INFERRED]
    assert info["applied"] and info["steps"] == 3 and info["layers"] == 8 and info["kernels_per_layer"] == 29
    r = t.ranges
    assert set(r["domain"].astype(str)) == {"inferred"}
    assert sorted(set(r["name"].astype(str))) == [*(f"inferred_layer_{i:02d}" for i in range(8)),
                                                  "step_0", "step_1", "step_2"]
    per_layer = wb.summary(t, by="layer")
    layers = per_layer[per_layer["layer"] >= 0]
    assert sorted(layers["layer"].tolist()) == list(range(8)) and set(layers["range"]) == {"inferred_layer"}
    steps = wb.launches_per_step(t)
    assert steps["phase"].tolist() == ["decode"] * 3
    out = run_cli("summary", "unfused", "--by", "layer", root=store).stdout
    assert "steps and layers INFERRED from the kernel stream" in out and "8 layers of 29 kernels" in out


def test_the_diff_of_two_uninstrumented_captures_says_which_kernels_went_away_in_every_layer(store):
    out = run_cli("diff", "unfused", "fused", root=store).stdout
    assert "inferred_layer in all 8 layers" in out
    assert "kernels 29 -> 15 each" in out
    assert "1 added: _kv_write_fused" in out
    assert "from the trace (A: 3 steps, B: 3 steps" in out
    assert out.count("steps and layers INFERRED") == 2  # each side says what its layers rest on


def test_real_ranges_are_never_replaced():
    t = wb.open_trace(UNFUSED)
    raw = {"kernels": t.kernels.drop(columns=["range_id"]).copy(), "api": t.api.copy(),
           "ranges": t.ranges[["name", "start", "end", "pid", "tid", "domain"]].copy(),
           "memcpy": t.memcpy.copy(), "memset": t.memset.copy()}
    built = [build(RawTables({k: v.copy() for k, v in raw.items()}, {"source": dict(t.meta["source"])}), UNFUSED,
                   ImportOptions(infer=infer)) for infer in (True, False)]
    assert INFERRED not in built[0].meta
    assert "inferred" not in set(built[0].ranges["domain"].astype(str))
    np.testing.assert_array_equal(built[0].kernels["range_id"].to_numpy(), built[1].kernels["range_id"].to_numpy())


def test_compiled_decoding_in_a_window_gets_every_decode_step_and_layer():
    # transformers' generate() under torch.compile(mode="reduce-overhead") in a profiler
    # window, inductor's provenance off: each decode step one graph replay of the compiler's
    # fused kernels (whose names differ between layers) and the sampler's eager launches, after
    # the prefill and the compiler's warm-up launches.
    t = _no_ranges("h200-hfc-sdpa-compile-window-nsys", ImportOptions())
    info = t.meta[INFERRED]
    assert info["applied"] and (info["steps"], info["layers"], info["kernels_per_layer"]) == (7, 16, 17)
    per_layer = wb.summary(t, by="layer")
    rows = per_layer[per_layer["layer"] >= 0]
    assert sorted(rows["layer"]) == list(range(16))
    # every graph-replayed kernel is in a step; most are in a layer
    graph = t.kernels["graph"].to_numpy()
    assert (t.kernels["range_id"].to_numpy()[graph] >= 0).all()


def test_compiled_decoding_with_eager_attention_gets_its_layers_and_diffs_per_layer():
    # The same window with eager attention: more of inductor's kernels a layer, and each
    # decode step still one graph replay. As imported from nsys (no range, no provenance), each
    # side gets its 16 layers, and the diff compares them per layer.
    root = TRACES
    t = wb.open_trace("h200-hfc-eager-compile-window-nsys", root=root)
    info = t.meta[INFERRED]
    assert info["applied"] and (info["steps"], info["layers"], info["kernels_per_layer"]) == (7, 16, 20)
    out = run_cli("summary", "h200-hfc-eager-compile-window-nsys", "--by", "layer", root=root).stdout
    assert "steps and layers INFERRED from the kernel stream" in out and "16 layers of 20 kernels" in out
    out = run_cli("diff", "h200-hfc-eager-compile-window-nsys", "h200-hfc-sdpa-compile-window-nsys", root=root).stdout
    # sdpa: 17 kernels a layer and its static-cache write, deferred to the replay's end; the
    # last layer holds the final norm (the last residual add fused into it).
    assert "inferred_layer in all 16 layers" in out and "kernels 20.06 -> 18.50 each" in out
    assert "layer 1: inferred_layer 20->18" in out and "layer 15: inferred_layer 21->19" in out
    assert "from the trace (A: 7 steps, B: 7 steps" in out


def test_an_unsure_reading_adds_nothing_and_says_why():
    # The reference decoder's kernels alone (eight identical layers a step and nothing else) in
    # a window closed half way through the second step: no repeating step the search can trust.
    t = _no_ranges("ref-h200-kvwrite-fused-nsys", ImportOptions(), share=0.5)
    assert t.meta[INFERRED]["applied"] is False
    assert len(t.ranges) == 0 and (t.kernels["range_id"] < 0).all()
    assert "no steps or layers inferred" in t.meta[INFERRED]["note"]


def test_the_layers_hint_reaches_the_search():
    t = _no_ranges("h200-hf-attn-sdpa-static-nsys", ImportOptions(layers=16))
    assert t.meta[INFERRED]["hint_layers"] == 16 and t.meta[INFERRED]["layers"] == 16
    rc, _, err = cli_outcome("--layers", "0", "summary", "x.json")
    assert rc == 2
    assert_one_line(err, "--layers")


def test_the_report_times_the_decode_step_from_the_trace(store, tmp_path):
    run_cli("report", "unfused", "fused", "--md", tmp_path / "r.md", "-o", tmp_path / "r.html", root=store)
    md = (tmp_path / "r.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| decode step"))
    # The first step from the launch of its input fill (before the replay); the other two from
    # the step before's end (the capture's host launched them while the GPU still ran the one
    # before): the times the trace's own step ranges give, 0.6247 and 0.6210 ms.
    assert "0.6247 ms (0.6210–1.197, 3 steps, from the trace)" in row and "0.63x (n = 3: no interval)" in row
    launches = next(line for line in md.splitlines() if line.startswith("| kernel launches per decode step"))
    assert launches.endswith("| -112 (-47.3%) |")  # a count, not -112.000000
    assert "inferred\\_layer in all 8 layers" in md and "steps and layers INFERRED" in md


def test_the_widget_times_the_decode_step_from_the_trace(store):
    from workbench.viz import TraceDiffWidget

    w = TraceDiffWidget("unfused", "fused", root=store)
    assert "decode step: 0.6247 \u2192 0.3964 ms, 0.63x" in w.summary.value
    assert "[from the trace (A: 3 steps, B: 3 steps" in w.summary.value


def test_an_open_source_engine_nobody_instrumented_gets_its_steps_layers_and_timing():
    # gpt-fast (benchmarks/user_programs/gpt_fast_decode.py) decoding under torch.compile's
    # CUDA graphs on the H200, its KV cache 8192 rows against 1024, captured in a
    # cudaProfilerStart/Stop window with no range and no provenance: its attention reads the
    # whole cache, so every layer's GPU time falls with it, and the steps queue ahead of the GPU.
    a, b = "h200-gptfast-cache8192-window-nsys", "h200-gptfast-cache1024-window-nsys"
    for name in (a, b):
        info = wb.open_trace(name, root=TRACES).meta[INFERRED]
        assert info["applied"] and (info["steps"], info["layers"]) == (15, 8)
    out = run_cli("diff", a, b, root=TRACES).stdout
    assert "inferred_layer in all 8 layers" in out and "kernels 13.62 each" in out
    per_layer = [line for line in out.splitlines() if line.startswith("  layer ")]
    assert len(per_layer) == 8
    assert all(float(line.split("(")[1].split("->")[0]) > float(line.split("->")[2].split(" us")[0])
               for line in per_layer), per_layer
    timing_line = next(line for line in out.splitlines() if line.startswith("  decode step:"))
    assert "faster" in timing_line and "from the trace (A: 15 steps, B: 15 steps" in timing_line
    assert "step range's start" in timing_line  # the inferred ranges start after the step before


def test_the_fused_kv_write_in_an_eager_engine_with_no_ranges():
    # The decoder run eagerly on the H200 with every workbench range off: steps and layers
    # come from the kernel stream alone, and the diff names, per layer, the 15 small writes that
    # went and the one fused kernel that came.
    out = run_cli("diff", "h200-kvwrite-unfused-eager30-bare-nsys", "h200-kvwrite-fused-eager30-bare-nsys",
                  root=TRACES).stdout
    assert "30 steps of 237 kernels, 8 layers of 29 kernels" in out and "30 steps of 125 kernels, 8 layers of 15" in out
    assert "inferred_layer in all 8 layers" in out and "kernels 29 -> 15 each" in out
    assert "15 removed:" in out and "1 added: _kv_write_fused" in out
    assert sum(line.startswith("  layer ") and "29->15" in line for line in out.splitlines()) == 8


def test_the_diff_of_two_moe_programs_nobody_instrumented():
    # The user's Mixtral program with transformers' experts loop against its grouped GEMMs,
    # both captured bare on the H200: per decode step and per inferred layer, what went away.
    out = run_cli("diff", "h200-user-moe-eagerexperts-nsys", "h200-user-moe-nsys", root=TRACES).stdout
    assert "per decode step: kernels 1,200.91 -> 524" in out and "(prefill 1460 -> 645" in out
    assert "inferred_layer in all 8 layers: 306.9 -> 180.9 us each per decode step, 0.59x; kernels 117.09 -> 53 each" in out
    assert "from the trace (A: 11 steps, B: 11 steps" in out
