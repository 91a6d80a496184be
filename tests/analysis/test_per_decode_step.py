"""One definition of "per decode step" in every view: a small HF GPT-2 of our own (random
weights from a config, 4 layers), eager vs sdpa attention, captured in this process with
``wb.record`` and module ranges, once as ``generate()`` (no ``prefill`` range: the first model
call is the prefill) and once as a loop of our own with ``prefill`` and ``step_N`` ranges. The
diff's totals, per-layer table and groups, the report's tables, the text diff and its JSON, the
widget's scopes and the figures all agree with sums over the projection's decode kernels, and
none adds prefill in (before: ``attn | 8 instances per step | 240 → 192``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import workbench as wb  # noqa: E402
from workbench.analysis.projection import project  # noqa: E402
from workbench.reporting import tables  # noqa: E402
from workbench.trace.words import trace_words  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LAYERS, NEW_TOKENS = 4, 3
DECODE_STEPS = NEW_TOKENS - 1


def _model(attn: str):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=256, n_embd=64, n_head=4, n_layer=LAYERS, n_positions=64,
                                     bos_token_id=0, eos_token_id=0)
    config._attn_implementation = attn
    return transformers.GPT2LMHeadModel(config).eval()


def _generate(model):
    ids = torch.arange(8).reshape(1, 8)
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                       do_sample=False, pad_token_id=0)


def _loop(model):
    """Greedy decoding of our own, its prefill and steps in ranges of those names."""
    ids = torch.arange(8).reshape(1, 8)
    with torch.no_grad():
        with wb.annotate("prefill"):
            out = model(ids, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for i in range(DECODE_STEPS):
            with wb.annotate(f"step_{i}"):
                out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("per-step")
    for how, run in (("generate", _generate), ("loop", _loop)):
        for attn in ("eager", "sdpa"):
            model = _model(attn)
            run(model)  # warm-up: lazy initialisation stays out of the recording
            with wb.annotate_modules(model), wb.record(f"{how}-{attn}", root=root, progress=False):
                run(model)
    return root


def _open(store, name):
    return wb.open_trace(store / name)


def _truth(trace):
    """Per (layer, label), from the projection alone: decode kernels over decode steps, and the
    number of distinct ranges of that label in one step (its instances)."""
    p = project(trace)
    dec = p[p["phase"] == "decode"]
    steps = dec["step"].nunique()
    per = dec.groupby(["layer", dec["range"].astype(str)]).size() / steps
    inst = dec.groupby(dec["range"].astype(str))["range_id"].nunique() / steps
    return steps, per, inst, len(dec) / steps, float(dec["duration"].sum()) / steps


@pytest.mark.parametrize("how", ["generate", "loop"])
def test_every_view_counts_decode_steps_only(store, how, capsys):
    a, b = _open(store, f"{how}-eager"), _open(store, f"{how}-sdpa")
    d = wb.diff(a, b)
    ta, tb = _truth(a), _truth(b)
    assert ta[0] == tb[0] == DECODE_STEPS and d.totals["steps_a"] == DECODE_STEPS
    # Totals per decode step.
    assert d.totals["kernels_per_step_a"] == pytest.approx(ta[3]) and d.totals["kernels_per_step_b"] == pytest.approx(tb[3])
    assert d.totals["gpu_time_per_step_ns_a"] == pytest.approx(ta[4])
    # The per-layer table (wb.diff(...).layers): every layer's attention, per decode step.
    lay = d.layers.set_index(["layer", "range"])
    for layer in range(LAYERS):
        assert lay.loc[(layer, "attn"), "kernels_a"] == pytest.approx(ta[1][(layer, "attn")])
        assert lay.loc[(layer, "attn"), "kernels_b"] == pytest.approx(tb[1][(layer, "attn")])
    attn_a, attn_b = ta[1].xs("attn", level=1), tb[1].xs("attn", level=1)
    assert len(attn_a) == LAYERS and attn_a.iloc[0] > attn_b.iloc[0]  # sdpa launches fewer ops than eager
    # Grouped across layers: 4 instances a step (never 8: prefill is not added in).
    g = d.groups().set_index("range").loc["attn"]
    assert (g["instances_a"], g["instances_b"]) == (LAYERS, LAYERS) == (ta[2]["attn"], tb[2]["attn"])
    assert g["kernels_a"] == pytest.approx(attn_a.sum()) and g["kernels_b"] == pytest.approx(attn_b.sum())
    assert g["all_layers"] and g["layers"] == list(range(LAYERS))
    # The report's tables.
    words = trace_words(a.meta)
    names = tables.changed_names(d)
    assert "attn" in names
    row = next(r for r in tables.range_times(d, names, words).rows if r[0].text == "attn")
    assert row[1] == str(LAYERS) and row[2] == f"{attn_a.sum():g} → {attn_b.sum():g}"
    cells = tables.layer_counts(d, names, words).rows
    column = [getattr(c, "text", c) for c in tables.layer_counts(d, names, words).headers].index("attn")
    assert all(r[column].startswith(f"{attn_a.iloc[0]:g} → {attn_b.iloc[0]:g} (") for r in cells)
    # The widget's scope of a layer and the figures: the layer's decode-step sums.
    pytest.importorskip("plotly")
    from workbench.viz.diff_figures import _scope

    layer0 = ta[1].xs(0, level=0).sum()
    rows, _ = _scope(d, 0, 30)
    assert rows["kernels_a"].sum() == pytest.approx(layer0)
    every, _ = _scope(d, None, 30)
    assert every.loc["attn", "kernels_a"] == pytest.approx(attn_a.sum())
    pytest.importorskip("ipywidgets")
    w = wb.viz.TraceDiffWidget.__new__(wb.viz.TraceDiffWidget)
    w.max_ranges = 400
    label = dict((v, k) for k, v in w.scope_options(d))["layer:0"]
    assert f"CPU ops/decode step {layer0:g} \u2192" in label
    # The text diff and its JSON say the same.
    env = {"PYTHONPATH": str(REPO), "WORKBENCH_TRACES": str(store), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "workbench", "diff", f"{how}-eager", f"{how}-sdpa"]
    text = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    each = f"CPU ops {attn_a.iloc[0]:g} -> {attn_b.iloc[0]:g} each"
    assert re.search(rf"^  attn in all {LAYERS} layers: .* per decode step, [\d.]+x; {each}$", text, re.M), text
    assert "kernels" not in text and "GPU" not in text  # CPU ops, worded as such
    out = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, check=True).stdout)
    grouped = {r["range"]: r for r in out["groups"]}
    assert grouped["attn"]["instances_a"] == LAYERS and grouped["attn"]["kernels_a"] == pytest.approx(attn_a.sum())
    prefill = {r["range"]: r for r in out["prefill_groups"]}
    assert prefill["attn"]["instances_a"] == LAYERS  # per prefill, apart


def test_a_trace_with_a_prefill_range_keeps_it_out_of_every_step(store):
    t = _open(store, "loop-eager")
    p = project(t)
    assert set(p.loc[p["phase"] == "prefill", "step"].astype(str)) == {"prefill"}
    d = wb.diff(t, _open(store, "loop-sdpa"))
    assert not d.ranges.loc[d.ranges["phase"] == "prefill", "per_step"].any()
    assert np.isclose(d.per_step()["kernels_a"].sum(), d.totals["kernels_per_step_a"])
