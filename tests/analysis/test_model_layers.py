"""Per-layer attribution on a model nobody here wrote: a random-weight HF Llama with 4 layers,
recorded on CPU running ``generate`` (prefill and decode steps), once with
``annotate_modules`` and once with torch.profiler's own module events and no annotation at all.

What must hold for both (issue: per-layer ranges for real models): ``summary --by layer`` has
one row per (layer, range) for each layer 0-3 with the attention and the MLP; ``--by range``
one attention row over all layers; the eager-vs-sdpa diff shows the attention changed in every
layer, with per-step counts that are whole numbers of decode-step kernels (the prefill counted
apart, not divided into them).
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench
from workbench.analysis.layers import name_parts

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LAYERS, NEW_TOKENS = 4, 4
LLAMA = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             num_hidden_layers=LAYERS)


@pytest.mark.parametrize("name, parts", [
    ("model.layers.3.self_attn", (3, "self_attn")),
    ("model.layers.3", (3, "layers")),
    ("model.layers.10.mlp.down_proj", (10, "mlp.down_proj")),
    ("transformer.h.3.attn", (3, "attn")),
    ("blocks.3.mlp", (3, "mlp")),
    ("layer_03", (3, "layer")),
    ("decoder_layer_12", (12, "decoder_layer")),
    ("nn.Module: LlamaDecoderLayer_3", (3, "LlamaDecoderLayer")),
    ("nn.Module: GPT2Block_0", (0, "GPT2Block")),
    ("nn.Module: LlamaAttention_1", (-1, "LlamaAttention")),  # an instance counter is no layer
    ("kv_write", (-1, "kv_write")),
    ("step_2", (-1, "step_2")),
    ("h3", (-1, "h3")),
])
def test_a_range_name_splits_into_layer_and_label(name, parts):
    assert name_parts(name) == parts


def test_a_custom_layer_regex_cuts_its_match_out():
    assert name_parts("blk3/attn", r"blk(\d+)") == (3, "attn")
    assert name_parts("blk3", r"blk(\d+)") == (3, "blk3")


def _model(attn: str):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**LLAMA)
    config._attn_implementation = attn
    return transformers.LlamaForCausalLM(config).eval()


def _generate(model):
    ids = torch.arange(8).reshape(1, 8) % 256
    with torch.no_grad():
        # min_new_tokens: a random model's greedy tokens must not end the generation early
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                              min_new_tokens=NEW_TOKENS, do_sample=False)


def _annotated(attn: str, root) -> workbench.Trace:
    model = _model(attn)
    _generate(model)  # warm-up: lazy initialisation stays out of the recording
    with workbench.annotate_modules(model), workbench.record(f"llama-{attn}", root=root) as rec:
        _generate(model)
    return rec.trace


def _module_events(attn: str, path) -> workbench.Trace:
    from torch.profiler import ProfilerActivity, profile

    model = _model(attn)
    _generate(model)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, with_modules=True) as prof:
        _generate(model)
    prof.export_chrome_trace(str(path))
    return workbench.import_file(path)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layers")
    return {
        ("annotate", attn): _annotated(attn, tmp / "store") for attn in ("eager", "sdpa")
    } | {
        ("modules", attn): _module_events(attn, tmp / f"{attn}.json") for attn in ("eager", "sdpa")
    }


# The attention and the MLP as each way names them: module paths, or the module events' classes.
NAMES = {"annotate": ("self_attn", "mlp"), "modules": ("LlamaAttention", "LlamaMLP")}


@pytest.mark.parametrize("how", ["annotate", "modules"])
def test_per_layer_rows_for_every_layer(traces, how):
    t = traces[(how, "eager")]
    attn, mlp = NAMES[how]
    by_layer = workbench.summary(t, by="layer")
    for layer in range(LAYERS):
        rows = by_layer[by_layer["layer"] == layer]
        assert (rows["range"] == attn).sum() == 1 and (rows["range"] == mlp).sum() == 1, rows
        assert rows.set_index("range").loc[[attn, mlp], "kernels"].gt(0).all()
    by_range = workbench.summary(t, by="range")
    assert (by_range["range"] == attn).sum() == 1
    # Every layer's attention, in every call of the model: prefill and the decode steps.
    assert by_range.set_index("range").loc[attn, "instances"] == LAYERS * NEW_TOKENS


@pytest.mark.parametrize("how", ["annotate", "modules"])
def test_each_model_call_is_a_step_and_the_first_is_the_prefill(traces, how):
    t = traces[(how, "eager")]
    lp = workbench.launches_per_step(t)
    assert list(lp["step"]) == ["prefill", *[f"step_{i}" for i in range(NEW_TOKENS - 1)]]
    assert list(lp["phase"]) == ["prefill"] + ["decode"] * (NEW_TOKENS - 1)
    decode = lp[lp["phase"] == "decode"]["kernels"]
    assert decode.nunique() == 1  # every decode step of a model runs the same ops
    phases = workbench.summary(t, by="phase").set_index("phase")["kernels"]
    assert phases["decode"] == decode.sum() and phases["prefill"] == lp["kernels"].iloc[0]


@pytest.mark.parametrize("how", ["annotate", "modules"])
def test_eager_vs_sdpa_changes_the_attention_of_every_layer(traces, how):
    a, b = traces[(how, "eager")], traces[(how, "sdpa")]
    d = workbench.diff(a, b)
    assert d.steps == {"a": NEW_TOKENS - 1, "b": NEW_TOKENS - 1}
    attn, mlp = NAMES[how]
    lay = d.layers.set_index(["layer", "range"])
    for layer in range(LAYERS):
        assert lay.loc[(layer, attn), "delta_kernels"] != 0
        assert lay.loc[(layer, mlp), "delta_kernels"] == 0
    # Per-step counts: whole numbers of decode-step kernels, the prefill's kept apart.
    per_step = d.ranges[d.ranges["phase"] == "decode"][["kernels_a", "kernels_b"]].to_numpy()
    assert np.array_equal(per_step, np.round(per_step))
    assert (d.ranges["phase"] == "prefill").any()
    assert d.totals["prefill_kernels_a"] > 0
    decode_a = workbench.launches_per_step(a, phase="decode")["kernels"]
    assert d.totals["kernels_per_step_a"] == pytest.approx(decode_a.mean())
    # Which kernels changed in the attention: eager's matmul/softmax against one sdpa op.
    key = next(k for k in d.alignments if k.endswith(attn) or k.endswith(f"{attn}_0"))
    assert d.alignments[key].removed and d.alignments[key].added


def test_step_and_prefill_regexes_recorded_in_the_manifest(traces, tmp_path):
    from workbench.analysis.steps import set_phases

    t = workbench.open_trace(traces[("annotate", "eager")].path)
    set_phases(t, step_regex=r"^LlamaForCausalLM$", prefill_regex=r"^$")
    # Every model call is now a named step and none is prefill.
    lp = workbench.launches_per_step(t)
    assert list(lp["phase"]) == ["decode"] * NEW_TOKENS
    workbench.save(t, "renamed", tmp_path)
    assert workbench.open_trace("renamed", root=tmp_path).meta["analysis"]["step_regex"] == r"^LlamaForCausalLM$"
    with pytest.raises(workbench.WorkbenchError, match="--step-regex"):
        set_phases(t, step_regex="(")
