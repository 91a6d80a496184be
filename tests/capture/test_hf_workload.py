"""The hf workload: a transformers causal LM from a config, run by the model's own code."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import workbench as wb  # noqa: E402
from workbench import analysis, engines, workloads
from workbench.capturing import run  # noqa: E402
from workbench.capturing import capture  # noqa: E402
from workbench.capturing.session import decode_outputs  # noqa: E402
from workbench.cli import main  # noqa: E402
from workbench.trace import load_dir  # noqa: E402
from helpers import run_cli  # noqa: E402

TINY = dict(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=256, ctx=8, max_len=32)
STEPS = 3
REGIONS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")


def _generate(variant: dict, engine: str = "eager", device: str = "cpu"):
    """Greedy (logits, tokens) of prefill and STEPS decode steps."""
    built = engines.build("hf", workloads.resolve("hf", {**TINY, **variant}), engine, device)
    return run.generate(built, STEPS, keep=True)


def _paths(trace) -> set[str]:
    return set(analysis.summary(trace, by="path")["path"].astype(str))


def _assert_module_ranges(paths: set[str], layers: int) -> None:
    """Each decode step holds every layer's module ranges (under whatever annotate_modules
    opens above the layers, such as the root model's range)."""
    for step in range(STEPS):
        assert f"step_{step}" in paths
        inside = {p.partition("/")[2] for p in paths if p.startswith(f"step_{step}/")}
        for layer in range(layers):
            for region in REGIONS:
                assert any(p.endswith(f"model.layers.{layer}/model.layers.{layer}.{region}") for p in inside)
        assert any(p.split("/")[-1] == "lm_head" for p in inside)


def test_capture_api_stores_steps_and_module_ranges(tmp_path):
    trace = capture("hf", {**TINY, "arch": "llama", "attn": "sdpa"}, device="cpu", backend="torch", steps=STEPS,
                    repeats=1, warmup=1, root=tmp_path, progress=False)
    _assert_module_ranges(_paths(trace), TINY["layers"])
    manifest = json.loads((tmp_path / trace.name / "manifest.json").read_text())
    info = manifest["capture"]["engine_info"]
    assert info["arch"] == "llama" and info["attn"] == "sdpa" and info["cache"] == "StaticCache"
    assert info["dtype"] == "float32" and info["transformers"] and info["parameters"] > 0
    logits, tokens = decode_outputs(manifest["outputs"])
    assert logits.shape == (STEPS + 1, TINY["vocab"]) and len(tokens) == STEPS + 1


def test_capture_cli_subprocess(tmp_path, cli):
    args = ["--root", tmp_path, "capture", "hf", "--device", "cpu", "--backend", "torch", "--steps", STEPS,
            "--repeats", "1", "--warmup", "1", "--name", "hf-cli", "--quiet",
            "--variant", "arch=llama", "--variant", "attn=sdpa", "--variant", "layers=3"]
    for key in ("hidden", "heads", "kv_heads", "intermediate", "vocab", "ctx", "max_len"):
        args += ["--variant", f"{key}={TINY[key]}"]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "hf-cli" / "manifest.json").read_text())
    assert manifest["capture"]["workload"] == "hf" and manifest["capture"]["variant"]["layers"] == 3
    _assert_module_ranges(_paths(load_dir(tmp_path / "hf-cli")), 3)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3", "mixtral", "qwen2_moe"])
def test_each_arch_builds_and_runs(arch):
    logits, tokens = _generate({"arch": arch})
    assert logits.shape == (STEPS + 1, TINY["vocab"]) and torch.isfinite(logits).all()
    assert all(0 <= t < TINY["vocab"] for t in tokens)


def test_mixture_of_experts_layers_route_each_token(tmp_path):
    """Qwen2-MoE with every other layer dense: the MoE layers' MLP ranges hold the router, the
    routed experts' and the shared expert's work, the dense ones a plain MLP's; the manifest
    says how the experts were set."""
    trace = capture("hf", {**TINY, "layers": 4, "arch": "qwen2_moe", "experts": 4, "experts_per_token": 2,
                           "sparse_step": 2}, device="cpu", backend="torch", steps=STEPS, repeats=1, warmup=1,
                    root=tmp_path, progress=False)
    info = trace.meta["capture"]["engine_info"]
    assert (info["arch"], info["experts"], info["experts_per_token"], info["sparse_step"]) == ("qwen2_moe", 4, 2, 2)
    rows = analysis.summary(trace, by="layer")
    mlp = rows[rows["range"] == "mlp"].set_index("layer")["kernels"]  # the CPU ops, on the CPU
    assert sorted(mlp.index) == [0, 1, 2, 3]
    # decoder_sparse_step=2: layers 1 and 3 are MoE (transformers counts from layer 1).
    assert min(mlp[1], mlp[3]) > 3 * max(mlp[0], mlp[2])


def test_tokens_agree_across_attn_and_cache():
    ref_logits, ref_tokens = _generate({"attn": "eager", "cache": "dynamic"})
    for attn in ("eager", "sdpa"):
        for cache in ("dynamic", "static"):
            logits, tokens = _generate({"attn": attn, "cache": cache})
            cmp = run.compare(ref_logits, ref_tokens, logits, tokens, "float32")
            assert cmp["equal"], (attn, cmp)


def test_cache_matches_recomputing_the_sequence():
    """Decoding over the cache gives the logits of the whole sequence run without one."""
    built = engines.build("hf", workloads.resolve("hf", {**TINY, "cache": "static"}), "eager", "cpu")
    logits, tokens = run.generate(built, STEPS, keep=True)
    model, seq = built.instance.model, built.instance.prompt.tolist()
    with torch.inference_mode():
        for i, token in enumerate(tokens):
            full = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1]
            assert torch.allclose(full, logits[i], atol=1e-4)
            seq.append(token)


def test_repeated_runs_start_a_fresh_cache():
    built = engines.build("hf", workloads.resolve("hf", {**TINY, "cache": "dynamic", "seed": 3}), "eager", "cpu")
    first = run.generate(built, STEPS, keep=True)
    again = run.generate(built, STEPS, keep=True)
    assert first[1] == again[1] and torch.equal(first[0], again[0])


def test_seed_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    engines.build("hf", workloads.resolve("hf", {**TINY, "seed": 7}), "eager", "cpu")
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.slow
def test_compile_engine_static_cache():
    ref_logits, ref_tokens = _generate({"cache": "static"})
    built = engines.build("hf", workloads.resolve("hf", {**TINY, "cache": "static"}), "compile", "cpu")
    logits, tokens = run.generate(built, STEPS, keep=True)
    assert run.compare(ref_logits, ref_tokens, logits, tokens, "float32")["equal"]
    assert built.instance.module_ranges is None  # removed: a compiled graph opens no ranges


@pytest.mark.slow
def test_compile_engine_capture_has_per_layer_rows(tmp_path):
    # The decode step compiled whole opens no range: the compiler's provenance puts each kernel
    # in the module it computes, so every layer has the eager capture's module labels. A fresh
    # process, as a user runs it: in this one, an earlier test compiled the same model, and a
    # graph compiled before the recording gives no provenance (docs: what it needs).
    argv = ["capture", "hf", "--device", "cpu", "--engine", "compile", "--backend", "torch",
            "--steps", str(STEPS), "--repeats", "1", "--warmup", "1", "--quiet", "--name", "compiled",
            "--variant", "cache=static"]
    for key, value in TINY.items():
        argv += ["--variant", f"{key}={value}"]
    done = run_cli(*argv, root=tmp_path)
    assert done.returncode == 0, done.stderr
    trace = wb.open_trace("compiled", root=tmp_path)
    layers = analysis.summary(trace, by="layer")
    for label in ("self_attn", "mlp"):
        assert sorted(layers[layers["range"] == label]["layer"]) == list(range(TINY["layers"])), label
    steps = analysis.launches_per_step(trace, phase="decode")
    assert len(steps) == STEPS
    assert "compiled code" in trace.meta["compiled"]["note"]


def _one_line_exit_2(tmp_path, capsys, argv, message):
    assert main(["--root", str(tmp_path / "store"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


@pytest.mark.parametrize("variant, message", [
    ("arch=gpt2", "variant arch: unknown value 'gpt2'"),
    ("attn=flash", "variant attn: unknown value"),
    ("heads=5", "variant heads: 5 heads do not divide hidden 64"),
    ("kv_heads=3", "variant kv_heads: 3 key/value heads do not divide heads 4"),
    ("layers=0", "variant layers: must be positive"),
    ("ctx=40", "variant ctx: prompt of 40 leaves no room"),
    ("experts_per_token=9", "variant experts_per_token: 9 is more than the 8 experts"),
    ("experts=0", "variant experts: must be positive"),
])
def test_bad_variant_exit_2_one_line(tmp_path, capsys, variant, message):
    argv = ["capture", "hf", "--device", "cpu", "--steps", "1", "--repeats", "1", "--warmup", "1", "--quiet"]
    for key, value in {**TINY, **dict([variant.split("=")])}.items():
        argv += ["--variant", f"{key}={value}"]
    _one_line_exit_2(tmp_path, capsys, argv, message)


def test_compile_refuses_dynamic_cache(tmp_path, capsys):
    argv = ["capture", "hf", "--device", "cpu", "--engine", "compile", "--steps", "1", "--repeats", "1",
            "--warmup", "1", "--quiet", "--variant", "cache=dynamic"]
    for key, value in TINY.items():
        argv += ["--variant", f"{key}={value}"]
    _one_line_exit_2(tmp_path, capsys, argv, "variant cache: dynamic")


def test_transformers_missing_names_the_extra(tmp_path):
    # A child process where `import transformers` fails, as on an install without the extra.
    code = ("import sys; sys.modules['transformers'] = None; from workbench.cli import main; "
            f"sys.exit(main(['--root', {str(tmp_path)!r}, 'capture', 'hf', '--device', 'cpu', '--quiet']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "pip install 'workbench[hf]'" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_presentation_and_registration():
    assert "hf" in workloads.names()
    p = workloads.presentation("hf")
    assert set(REGIONS) <= set(p.regions) and all(r in p.colors for r in p.regions)
    assert (p.default_pair.a, p.default_pair.b) == ("eager", "sdpa")


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["compile", "cudagraph"])
def test_gpu_engines_match_eager(engine):
    ref_logits, ref_tokens = _generate({"cache": "static"}, device="cuda")
    logits, tokens = _generate({"cache": "static"}, engine=engine, device="cuda")
    assert run.compare(ref_logits, ref_tokens, logits, tokens, "bfloat16")["equal"]


@pytest.mark.gpu
def test_cudagraph_refuses_dynamic_cache():
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="variant cache: dynamic"):
        _generate({"cache": "dynamic"}, engine="cudagraph", device="cuda")
