"""torch.profiler's nn.Module events read as the ranges of a trace without annotations (the
Kineto reader), on real traces of a tiny random-weight HF Llama recorded on CPU with
``with_stack=True, with_modules=True``.

``tests/data/kineto-llama-modules.json.gz`` is such a trace, made by ``record(path, layers=2,
new_tokens=2)`` below and gzipped (``gzip -9``): the tests on it run without torch.
"""

from __future__ import annotations

import json
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import pytest
from helpers import CPU_TRACE
from test_kineto_fast import assert_same, assert_same_outcome, in_ranges, one_pass, outcome, unzip

import workbench
from workbench.trace.readers.kineto import parallel
from workbench.trace.readers.kineto.modules import PREFIX, is_layer_class

FIXTURE = CPU_TRACE
LLAMA = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)


def profiled(path: Path, run, *, cuda: bool = False) -> Path:
    """``run()`` recorded by torch.profiler with stacks and modules, exported to ``path``."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with torch.no_grad(), profile(activities=activities, with_stack=True, with_modules=True) as prof:
        run()
        if cuda:
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    return path


def record(path: Path, *, layers: int = 4, new_tokens: int = 3, annotate: str | None = None,
           device: str = "cpu") -> Path:
    """A trace of ``generate`` on a tiny random Llama, optionally in a record_function range."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.profiler import record_function

    torch.manual_seed(0)
    config = transformers.LlamaConfig(num_hidden_layers=layers, **LLAMA)
    model = transformers.LlamaForCausalLM(config).to(device).eval()
    ids = torch.randint(0, 256, (1, 8), device=device)

    def run():
        with record_function(annotate) if annotate else nullcontext():
            # min_new_tokens: a random model's greedy tokens must not end the generation early
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False)

    return profiled(path, run, cuda=device == "cuda")


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("llama") / "llama.json")


@pytest.fixture(scope="module")
def annotated(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("annotated") / "annotated.json", annotate="generate")


def module_names(path: Path) -> list[str]:
    """Every nn.Module event's name in the file, as torch.profiler wrote it."""
    events = json.loads(path.read_text())["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "python_function" and e["name"].startswith(PREFIX)]


def below_layer(path: str) -> int:
    """How many levels a range's path goes below its outermost layer module (-1: in none)."""
    parts = path.split("/")
    return next((len(parts) - 1 - i for i, p in enumerate(parts) if is_layer_class(p)), -1)


def assert_thinned(trace, layers: int, calls: int):
    """The ranges are the module events, down to the layers' direct children."""
    source = trace.meta["source"]
    assert source["ranges_from"] == "nn.Module events"
    assert source["module_events_kept"] == len(trace.ranges) > 0
    assert source["module_events"] == source["module_events_kept"] + source["module_events_dropped"]
    assert set(trace.ranges["domain"]) == {"nn.Module"}
    names = Counter(trace.ranges["name"].astype(str))
    assert names["nn.Module: LlamaForCausalLM_0"] == calls
    assert trace.ranges.loc[trace.ranges["name"] == "nn.Module: LlamaForCausalLM_0", "depth"].eq(0).all()
    for i in range(layers):
        for cls in ("LlamaDecoderLayer", "LlamaAttention", "LlamaMLP"):
            assert names[f"nn.Module: {cls}_{i}"] == calls, (cls, i)
    assert not any(n.startswith("nn.Module: SiLUActivation") for n in names)
    # The one Linear left is the head, outside the layers; the q/k/v/o and MLP ones are gone.
    linear = trace.ranges[trace.ranges["name"].astype(str).str.startswith("nn.Module: Linear_")]
    assert len(linear) == calls and linear["depth"].eq(1).all()
    depth = trace.ranges["path"].astype(str).map(below_layer)
    assert depth.max() == 1 and (depth == 0).sum() == layers * calls


def test_module_events_are_the_ranges_of_a_trace_without_annotations(llama):
    trace = workbench.import_file(llama)
    assert_thinned(trace, layers=4, calls=3)
    # What was dropped is what torch.profiler recorded inside the layers' children.
    recorded = Counter(module_names(llama))
    assert sum(recorded.values()) == trace.meta["source"]["module_events"]
    kept = Counter(trace.ranges["name"].astype(str))
    dropped = recorded - kept
    assert sum(dropped.values()) == trace.meta["source"]["module_events_dropped"]
    assert {n.rsplit("_", 1)[0] for n in dropped} == {"nn.Module: Linear", "nn.Module: SiLUActivation"}


def assert_launched_inside(trace):
    """Each work unit launched in a forward call is attributed to the innermost module range
    open at its launch, and the others to none."""
    k, r = trace.kernels, trace.ranges.set_index("id")
    inside = k[k["range_id"] >= 0]
    assert trace.meta["attribution"]["range"]["kernels"] == len(inside) > 0
    owner = r.loc[inside["range_id"]]
    assert (inside["launch_start"].to_numpy() >= owner["start"].to_numpy()).all()
    assert (inside["launch_start"].to_numpy() < owner["end"].to_numpy()).all()
    top = r[r["depth"] == 0]
    launched = k["launch_start"].to_numpy()
    in_forward = sum(((launched >= s) & (launched < e)).sum() for s, e in zip(top["start"], top["end"]))
    assert in_forward == len(inside)


def test_cpu_work_units_fall_inside_the_module_ranges(llama):
    trace = workbench.import_file(llama)
    assert trace.meta["source"]["work_units"] == "cpu_op"
    assert_launched_inside(trace)
    k, r = trace.kernels, trace.ranges.set_index("id")
    # A CPU op is its own launch: it lies inside its range.
    inside = k[k["range_id"] >= 0]
    assert (inside["end"].to_numpy() <= r.loc[inside["range_id"], "end"].to_numpy()).all()
    # q_proj's, k_proj's, v_proj's and o_proj's ops are the attention's own.
    attention = r[r["name"].astype(str).str.startswith("nn.Module: LlamaAttention_")]
    assert len(attention) == 12
    for rid in attention.index:
        ops = Counter(k.loc[k["range_id"] == rid, "name"].astype(str))
        assert ops["aten::linear"] == 4 and ops["aten::scaled_dot_product_attention"] == 1


def test_a_record_function_range_is_the_only_range(annotated):
    trace = workbench.import_file(annotated)
    assert list(trace.ranges["name"].astype(str)) == ["generate"]
    assert set(trace.ranges["domain"]) == {"record_function"}
    source = trace.meta["source"]
    assert source["ranges_from"] == "user_annotation events"
    assert source["module_events"] == len(module_names(annotated)) > 0
    assert "module_events_kept" not in source and "module_events_dropped" not in source


@pytest.mark.parametrize("which", ["fixture", "recorded", "annotated"])
def test_scanner_and_library_read_module_events_alike(request, tmp_path, monkeypatch, which):
    path = unzip(FIXTURE, tmp_path) if which == "fixture" else request.getfixturevalue({"recorded": "llama"}.get(which, which))
    fast, all_scanned = outcome(path, monkeypatch, True)
    assert all_scanned, "the scanner declined a piece of a real trace"
    plain, _ = outcome(path, monkeypatch, False)
    assert_same(fast, plain)
    assert "module_events" in fast.meta["source"]


def test_threads_gather_module_events_as_one_pass(llama, monkeypatch):
    chunk = 64 << 10
    stops = parallel.range_stops(llama, chunk, 6)
    assert len(stops) == 5
    threaded = in_ranges(llama, chunk, stops, 3)
    assert threaded.meta["source"]["ranges_from"] == "nn.Module events"
    assert_same(threaded, one_pass(llama, chunk, monkeypatch))


def test_committed_fixture():
    assert_thinned(workbench.import_file(FIXTURE), layers=2, calls=2)


# Module events as no real trace has them: both paths must agree (a name with escapes, a
# prefix spelt with one, a name of another type, a module event that is not complete), and
# one with a bad time is reported alike.
MODULE = '{"ph": "X", "cat": "python_function", "name": %s, "pid": 1, "tid": 1, "ts": %s, "dur": %s}'
ODD = [
    MODULE % ('"nn.Module: Outer_0"', "0", "100"),
    MODULE % (r'"nn.Module: Caf\u00e9Block_0"', "10", "50"),
    MODULE % (r'"nn\u002eModule: Inner_0"', "20", "10"),
    MODULE % ('"nn.Module: Deep_0"', "21", "5"),
    MODULE % ('"nn.Module:NoSpace_0"', "60", "5"),
    MODULE % ("7", "60", "5"),
    MODULE % ('"torch/nn/modules/module.py(1751): _call_impl"', "60", "5"),
    MODULE.replace('"X"', '"B"') % ('"nn.Module: Begun_0"', "70", "5"),
    '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 22, "dur": 1}',
]


def test_odd_module_events_read_alike(tmp_path, monkeypatch):
    path = tmp_path / "odd.json"
    path.write_text("[" + ",\n".join(ODD) + "]", encoding="utf-8")
    fast, all_scanned = outcome(path, monkeypatch, True)
    assert all_scanned
    plain, _ = outcome(path, monkeypatch, False)
    assert_same_outcome(fast, plain)
    # CaféBlock is the layer: its child Inner stays, Inner's child Deep goes.
    ranges = fast.tables["ranges"]
    assert list(ranges["name"].astype(str)) == ["nn.Module: Outer_0", "nn.Module: Caf\u00e9Block_0", "nn.Module: Inner_0"]
    assert fast.meta["source"]["module_events_dropped"] == 1
    path.write_text("[" + ",\n".join([*ODD, MODULE % ('"nn.Module: Late_0"', '"soon"', "1")]) + "]", encoding="utf-8")
    fast, _ = outcome(path, monkeypatch, True)
    plain, _ = outcome(path, monkeypatch, False)
    assert fast == plain and "nn.Module event ts" in fast


@pytest.mark.gpu
def test_gpu_kernels_fall_inside_the_module_ranges(tmp_path):
    trace = workbench.import_file(record(tmp_path / "gpu.json", device="cuda"))
    assert trace.meta["source"]["work_units"] == "kernel"
    assert_thinned(trace, layers=4, calls=3)
    assert_launched_inside(trace)
    # q_proj's, k_proj's, v_proj's and o_proj's GEMMs are the attention's own kernels.
    attention = trace.ranges[trace.ranges["name"].astype(str).str.startswith("nn.Module: LlamaAttention_")]
    assert len(attention) == 12 and (attention["kernels"] >= 4).all()


# (model, a class kept as a layer's direct child, a class below it, dropped), on a forward call.
ARCHITECTURES = [
    # MixtralSparseMoeBlock ends with "Block" but lies in a layer: a child, its experts dropped.
    ("MixtralForCausalLM", dict(LLAMA, num_local_experts=4, num_experts_per_tok=2),
     "MixtralSparseMoeBlock", "MixtralExperts"),
    ("GPT2LMHeadModel", dict(vocab_size=256, n_embd=64, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0),
     "GPT2Attention", "Conv1D"),
    ("BertModel", dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4),
     "BertAttention", "BertSelfAttention"),
]


@pytest.mark.parametrize("model,config,child,dropped", ARCHITECTURES, ids=[a[0] for a in ARCHITECTURES])
def test_layers_of_other_architectures(tmp_path, model, config, child, dropped):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cls = getattr(transformers, model)
    layers = "n_layer" if model.startswith("GPT2") else "num_hidden_layers"
    m = cls(cls.config_class(**config, **{layers: 2})).eval()
    path = profiled(tmp_path / "forward.json", lambda: m(torch.randint(0, 256, (1, 8))))
    trace = workbench.import_file(path)
    kept = {n.rsplit("_", 1)[0] for n in trace.ranges["name"].astype(str)}
    recorded = {n.rsplit("_", 1)[0] for n in module_names(path)}
    assert PREFIX + child in kept and PREFIX + dropped in recorded - kept
    assert trace.ranges["path"].astype(str).map(below_layer).max() == 1
