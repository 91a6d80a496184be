import json
import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    # The fused kv_write kernel runs under Triton's interpreter on CPU; on a GPU it must not.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from helpers import store_entries
from workbench import analysis, workloads
from workbench.capturing import capture
from workbench.capturing.session import decode_outputs
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.capturing.run import compare

SMALL = dict(layers=2, heads=2, head_dim=16, index_dim=16, mlp_dim=64, vocab=128, page_size=16, rows=256,
             bucket=64, ctx=16)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def traces(store):
    """The acceptance grid on CPU: both kv_write variants, eager and compile, torch backend."""
    out = {}
    for engine in ("eager", "compile"):
        for kv in ("unfused", "fused"):
            out[(kv, engine)] = capture("decoder", {**SMALL, "kv_write": kv}, engine=engine, backend="torch",
                                        name=f"cpu-{kv}-{engine}", steps=2, repeats=2, warmup=1, device="cpu",
                                        root=store, progress=False)
    return out


def _kv_write_units(trace) -> set[int]:
    by_path = analysis.summary(trace, by="path")
    rows = by_path[by_path["path"].astype(str).str.endswith("/kv_write")]
    assert len(rows) == SMALL["layers"] * 2  # every layer of every recorded step
    return set(rows["kernels"])


def test_per_layer_kv_write_work_units(traces):
    assert _kv_write_units(traces[("unfused", "eager")]) == {15}
    assert _kv_write_units(traces[("fused", "eager")]) == {1}
    # The compile engine compiles the decode step whole; the compiler's provenance puts each
    # kernel in its module's range (layer.N.qkv, ...): every layer has its rows, and inductor's
    # fusion (the unfused cache write fused with its neighbours) leaves fewer units per step.
    for kv in ("unfused", "fused"):
        layers = analysis.summary(traces[(kv, "compile")], by="layer")
        for label in ("qkv", "attention", "mlp"):
            assert sorted(layers[layers["range"] == label]["layer"]) == list(range(SMALL["layers"])), (kv, label)
    # The fused write is a custom op inductor calls through a node it makes after its passes:
    # it is counted in kv_write, as in eager code, not in the module of its sliced inputs (qkv).
    fused = analysis.summary(traces[("fused", "compile")], by="layer")
    kv = fused[fused["range"] == "kv_write"]
    assert sorted(kv["layer"]) == list(range(SMALL["layers"])) and set(kv["kernels"]) == {2}  # 1 per step
    sites = traces[("fused", "compile")].sites
    calls = sites[sites["kernel"].astype(str).str.contains("kv_write_fused")].sort_values("call")
    assert list(calls["module"]) == [f"layer.{i}.kv_write" for i in range(SMALL["layers"])]  # each its own layer's
    eager = analysis.launches_per_step(traces[("unfused", "eager")], phase="decode")["kernels"]
    compiled = analysis.launches_per_step(traces[("unfused", "compile")], phase="decode")["kernels"]
    assert len(compiled) == 2 and compiled.max() < eager.min()
    layer = analysis.summary(traces[("unfused", "eager")], by="layer")
    kv = layer[(layer["range"] == "kv_write") & (layer["layer"] == 1)]
    assert int(kv["kernels"].iloc[0]) == 15 * 2


def test_every_layer_region_is_recorded(traces):
    paths = set(analysis.summary(traces[("fused", "eager")], by="path")["path"].astype(str))
    for step in range(2):
        for layer in range(SMALL["layers"]):
            for region in ("qkv", "kv_write", "attention", "mlp"):
                assert f"step_{step}/layer_{layer:02d}/{region}" in paths


def test_manifest(traces, store):
    trace = traces[("fused", "eager")]
    manifest = json.loads((store / "cpu-fused-eager" / "manifest.json").read_text())
    cap = manifest["capture"]
    assert cap["backend"] == "torch" and cap["engine"] == "eager" and cap["workload"] == "decoder"
    assert cap["variant"]["kv_write"] == "fused" and cap["variant"]["rows"] == 256
    assert cap["command"][:3] == ["workbench", "capture", "decoder"]
    assert cap["engine_info"]["kv_write_impl"] == "triton-interpreter"
    for key in ("torch", "triton", "python", "git", "gpu", "driver", "cuda", "nsys", "hostname"):
        assert key in manifest["env"]
    timing = manifest["timing"]
    assert timing["timer"] == "host" and timing["repeats"] == 2
    d = timing["decode_step_ms"]
    assert d["min"] <= d["median"] <= d["max"] and d["n"] == 2 * 2
    assert trace.meta["outputs"]["tokens"] == manifest["outputs"]["tokens"]


def test_outputs_equal_across_variants_and_engines(traces):
    ref_logits, ref_tokens = decode_outputs(traces[("unfused", "eager")].meta["outputs"])
    assert ref_logits.shape == (3, SMALL["vocab"])
    for key, trace in traces.items():
        logits, tokens = decode_outputs(trace.meta["outputs"])
        cmp = compare(ref_logits, ref_tokens, logits, tokens, "float32")
        assert cmp["equal"], (key, cmp)


def test_cli_capture_and_existing_name(store, capsys):
    args = ["--root", str(store), "capture", "decoder", "--variant", "layers=1", "--variant", "rows=128",
            "--variant", "ctx=8", "--variant", "heads=2", "--variant", "head_dim=8", "--variant", "vocab=64",
            "--variant", "mlp_dim=32", "--variant", "index_dim=8", "--device", "cpu", "--steps", "1",
            "--repeats", "1", "--warmup", "1", "--name", "cli-small", "--quiet"]
    assert main(args) == 0
    assert "cli-small" in capsys.readouterr().out
    manifest = json.loads((store / "cli-small" / "manifest.json").read_text())
    assert "capture" in manifest["capture"]["command"]
    assert main(args) == 2
    assert "exists" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["capture", "nope"], "unknown workload"),
    (["capture", "decoder", "--variant", "kv_write=sideways"], "unknown value"),
    (["capture", "decoder", "--variant", "depth=3"], "unknown variant key"),
    (["capture", "decoder", "--engine", "onnx"], "unknown engine"),
    (["capture", "decoder", "--backend", "perfetto"], "unknown capture backend"),
    (["capture", "decoder", "--device", "cpu", "--engine", "cudagraph"], "need --device cuda"),
    (["capture", "decoder", "--engine", "tensorrt", "--backend", "nsys"], "trtexec not found"),
])
def test_bad_input_exit_2_nothing_written(tmp_path, capsys, argv, message, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys, no trtexec
    root = tmp_path / "store"
    assert main(["--root", str(root), *argv]) == 2
    assert message in capsys.readouterr().err
    assert store_entries(root) == []


def test_nsys_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkbenchError, match="nsys not found"):
        capture("decoder", SMALL, backend="nsys", root=tmp_path / "store")
    assert store_entries(tmp_path / "store") == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_gpu_requested_without_gpu(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "capture", "decoder", "--device", "cuda"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    assert store_entries(tmp_path) == []


class _Raising:
    """A user workload whose forward pass fails: the error must surface as one clear line."""
    options = {"fail_in": workloads.Option("run", ("create", "run"))}

    def create(self, variant, device):
        if variant["fail_in"] == "create":
            raise RuntimeError("cannot allocate the moon")
        base = workloads.get("decoder").create(workloads.resolve("decoder", SMALL), device)

        def forward(tokens, positions, rows):
            raise RuntimeError("shape mismatch in layer 7")

        base.forward = forward
        return base


@pytest.mark.parametrize("fail_in, message", [("create", "create failed: RuntimeError: cannot allocate the moon"),
                                              ("run", "run failed: RuntimeError: shape mismatch in layer 7")])
def test_workload_that_raises(tmp_path, capsys, fail_in, message):
    workloads.register("raising", _Raising())
    root = tmp_path / "store"
    assert main(["--root", str(root), "capture", "raising", "--variant", f"fail_in={fail_in}", "--device", "cpu",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "workload raising" in err and message in err
    assert store_entries(root) == []
