"""Module ranges on a model nobody here wrote: ``wb.annotate_modules`` on a tiny random-weight
HuggingFace Llama (built from its config) recorded by torch.profiler on the CPU, and
``workbench capture --modules`` on a user's HF program run through the real CLI."""

import os
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from helpers import USER_PROGRAMS, cli_outcome  # noqa: E402
import workbench as wb  # noqa: E402
from workbench.instrument import ranges as annotation, modules as module_ranges  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402

PROGRAM = USER_PROGRAMS / "hf_generate.py"
LAYERS = [f"model.layers.{i}" for i in range(4)]
CHILDREN = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm"]


def _llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=2)
    return transformers.LlamaForCausalLM(config).eval()


def _generate(model):
    ids = torch.randint(256, (1, 8), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                              pad_token_id=0)


def _paths(ranges) -> dict:
    """Range name -> the set of its paths (where it sits in the range tree)."""
    return {name: set(group) for name, group in ranges.groupby("name")["path"]}


def _hooks(model) -> dict:
    return {name: (len(m._forward_pre_hooks), len(m._forward_hooks), len(m._forward_hooks_always_called))
            for name, m in model.named_modules()}


@pytest.fixture(scope="module")
def model():
    return _llama()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def generated(model, root):
    before = _hooks(model)
    with wb.annotate_modules(model) as handle, wb.record("llama", root=root, progress=False) as rec:
        _generate(model)
    return rec.trace, handle, before


def test_default_selection_names_layers_children_embeddings_norm_head(generated):
    _, handle, _ = generated
    expected = ["LlamaForCausalLM", "model.embed_tokens"]  # the root: one range per model call
    for layer in LAYERS:
        expected += [layer] + [f"{layer}.{c}" for c in ("self_attn", "mlp", "input_layernorm",
                                                        "post_attention_layernorm")]
    assert handle.names == expected + ["model.norm", "lm_head"]


def test_generate_gives_nested_per_layer_ranges_with_their_cpu_ops(generated):
    trace, handle, _ = generated
    ranges = trace.ranges
    paths = _paths(ranges)
    for layer in LAYERS:
        assert paths[layer] == {f"LlamaForCausalLM/{layer}"}  # a layer is in the model call
        for child in CHILDREN:
            assert paths[f"{layer}.{child}"] == {f"LlamaForCausalLM/{layer}/{layer}.{child}"}  # inside its layer
    # prefill and two decode steps: each module called three times
    assert (ranges["name"].value_counts()[handle.names] == 3).all()
    ops = wb.summary(trace, by="path").set_index("path")["kernels"]
    for layer in LAYERS:
        assert ops[f"LlamaForCausalLM/{layer}/{layer}.self_attn"] > 0
        assert ops[f"LlamaForCausalLM/{layer}/{layer}.mlp"] > 0
    assert ops["LlamaForCausalLM/lm_head"] > 0 and ops["LlamaForCausalLM/model.embed_tokens"] > 0


def test_removal_leaves_no_hooks(generated, model):
    _, handle, before = generated
    assert all(v == (0, 0, 0) for v in before.values())
    assert _hooks(model) == before
    handle.remove()  # again: nothing to do
    assert _hooks(model) == before and "removed" in repr(handle)


def test_include_exclude_and_the_root(model):
    with wb.annotate_modules(model, include="self_attn$") as h:
        assert h.names == [f"{layer}.self_attn" for layer in LAYERS]
        assert sum(n for v in _hooks(model).values() for n in v) == 4 * 3
    with wb.annotate_modules(model, include=["mlp$", "^lm_head$"], exclude=r"layers\.[12]\.") as h:
        assert h.names == ["model.layers.0.mlp", "model.layers.3.mlp", "lm_head"]
    with wb.annotate_modules(model, exclude="layernorm|norm$") as h:
        assert not any("norm" in n for n in h.names) and "model.layers.0.self_attn" in h.names
    with wb.annotate_modules(model, include="^LlamaForCausalLM$") as h:  # the root: its class name
        assert h.names == ["LlamaForCausalLM"]
    assert sum(n for v in _hooks(model).values() for n in v) == 0


def test_a_selection_matching_nothing_warns_and_annotates_nothing(model):
    with pytest.warns(UserWarning, match=r"'no_such_module' matched no module of LlamaForCausalLM"):
        h = wb.annotate_modules(model, include="no_such_module")
    assert h.names == [] and sum(n for v in _hooks(model).values() for n in v) == 0
    h.remove()


def test_bad_input_is_one_line(model):
    with pytest.raises(WorkbenchError, match="annotate_modules: dict is not a torch.nn.Module"):
        wb.annotate_modules({"layers": []})
    with pytest.raises(WorkbenchError, match="not a regular expression"):
        wb.annotate_modules(model, include="layers.(")
    with pytest.raises(WorkbenchError, match="a regex or a list of regexes"):
        wb.annotate_modules(model, exclude=3)
    assert sum(n for v in _hooks(model).values() for n in v) == 0


class _Boom(torch.nn.Module):
    def forward(self, x):
        raise ValueError("boom")


def _stack():
    m = torch.nn.Module()
    m.layers = torch.nn.ModuleList([torch.nn.Linear(8, 8), _Boom()])
    return m


def test_an_exception_inside_forward_still_closes_its_range(root):
    m, x = _stack(), torch.randn(2, 8)
    with wb.annotate_modules(m), wb.record("boom", root=root, progress=False) as rec:
        with pytest.raises(ValueError, match="boom"):
            m.layers[1](x)
        assert annotation._tokens.stack == [] and module_ranges._open.stack == []
        m.layers[0](x)
    paths = rec.trace.ranges.set_index("name")["path"].to_dict()
    assert paths == {"layers.1": "layers.1", "layers.0": "layers.0"}  # layers.0 is not inside layers.1


def test_compiled_code_gets_no_range_and_fullgraph_still_compiles(root):
    """Hooks traced by dynamo open nothing (an NVTX call there would break the graph); the
    eager module around a compiled forward keeps its range, and one warning says so."""
    m, x = _stack(), torch.randn(2, 8)
    m.layers[1] = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    m.layers[1].forward = torch.compile(m.layers[1].forward, fullgraph=True, backend="eager")
    module_ranges._compiled.seen = module_ranges._compiled.warned = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with wb.annotate_modules(m, include=r"layers\.\d+(\.\d+)?$") as h:
            m.layers[1](x)
            with wb.record("compiled", root=root, progress=False) as rec:
                m.layers[1](x)
                m.layers[0](x)
    assert h.names == ["layers.0", "layers.1", "layers.1.0", "layers.1.1"]
    names = set(rec.trace.ranges["name"])
    # layers.1.0 and .1 ran inside compiled code; no recompile either (it would add ranges)
    assert names == {"layers.0", "layers.1"}
    assert wb.summary(rec.trace, by="path").set_index("path")["kernels"]["layers.1"] > 0
    compiled = [w for w in caught if "torch.compile" in str(w.message) and "workbench" in str(w.message)]
    assert len(compiled) == 1



def test_a_whole_compiled_model_compiles_fullgraph_with_no_ranges(root):
    seq, x = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), torch.randn(2, 8)
    expected = seq(x)
    with wb.annotate_modules(seq, include=r"^Sequential$|^\d+$") as h, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(seq, fullgraph=True, backend="eager")
        compiled(x)
        with wb.record("whole-compiled", root=root, progress=False) as rec:
            out = compiled(x)
    assert h.names == ["Sequential", "0", "1"]
    assert torch.equal(out, expected) and len(rec.trace.ranges) == 0


def test_called_modules_name_each_model_from_its_root(model, root):
    """The hooks of ``capture --modules``: no model is handed over, yet the paths are the same."""
    from workbench.instrument.modules import annotate_called_modules

    with annotate_called_modules() as h, wb.record("called", root=root, progress=False) as rec:
        torch.nn.Linear(4, 4)(torch.randn(1, 4))  # a module outside any model: a root, not selected
        _generate(model)
    with wb.annotate_modules(model) as direct:
        assert h.names == direct.names
    paths = _paths(rec.trace.ranges)
    assert paths["model.layers.3.mlp"] == {"LlamaForCausalLM/model.layers.3/model.layers.3.mlp"}
    assert "Linear" not in paths  # a root with nothing selected in it gets no range
    assert torch.nn.modules.module._global_forward_hooks == {}


# ---------------------------------------------------------------- workbench capture --modules


def test_capture_modules_gives_a_users_hf_program_per_layer_ranges(root):
    code, out, err = cli_outcome("capture", "--quiet", "--backend", "torch", "--name", "hf-modules", "--modules", "--",
                                 sys.executable, str(PROGRAM), "--device", "cpu", root=root)
    assert code == 0, err
    assert "generated" in out and "Traceback" not in err
    trace = wb.open_trace(root / "hf-modules")
    assert trace.meta["capture"]["modules"] == ""  # the default selection
    paths = _paths(trace.ranges)
    for layer in LAYERS:
        assert paths[layer] == {f"LlamaForCausalLM/{layer}"}
        assert paths[f"{layer}.self_attn"] == {f"LlamaForCausalLM/{layer}/{layer}.self_attn"}
    by_path = wb.summary(trace, by="path").set_index("path")["kernels"]
    assert by_path["LlamaForCausalLM/model.layers.0/model.layers.0.mlp"] > 0


def test_capture_modules_regex_selects_only_those(root):
    code, _, err = cli_outcome("capture", "--quiet", "--name", "hf-attn", "--modules", "self_attn$", "--", sys.executable,
                               str(PROGRAM), "--device", "cpu", "--layers", "2", "--new-tokens", "1", root=root)
    assert code == 0, err
    trace = wb.open_trace(root / "hf-attn")
    assert set(trace.ranges["name"]) == {"model.layers.0.self_attn", "model.layers.1.self_attn"}
    assert trace.meta["capture"]["modules"] == "self_attn$"


def test_capture_modules_refusals_are_one_line(root):
    before = set(os.listdir(root))
    python_program = ["--", sys.executable, str(PROGRAM)]
    cases = [
        # checked before the backend's own checks, so the same answer whether or not nsys is installed
        (["--modules", "--", "ls"], "--modules hooks the modules of a Python program"),
        (["--backend", "nsys", "--modules", "--", "ls"], "--modules hooks the modules of a Python program"),
        (["--modules", "layers.(", *python_program], "--modules 'layers.(': not a regular expression"),
        (["--call", "os:getcwd", "--modules"], "--modules: applies to -- COMMAND only"),
    ]
    for args, message in cases:
        code, _, err = cli_outcome("capture", "--quiet", *args, root=root)
        lines = [ln for ln in err.splitlines() if ln.startswith("workbench:")]
        assert code == 2, (args, err)
        assert len(lines) == 1 and message in lines[0], (args, err)
    assert set(os.listdir(root)) == before
