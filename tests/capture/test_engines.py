import os
import shutil

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    # The fused kv_write kernel runs under Triton's interpreter on CPU; on a GPU it must not.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from workbench import engines, workloads
from workbench.errors import WorkbenchError
from workbench.capturing.run import compare, generate, time_engine

SMALL = dict(layers=2, heads=2, head_dim=16, index_dim=16, mlp_dim=64, vocab=128, page_size=16, rows=512,
             bucket=64, ctx=40)


def _variant(**kw):
    return workloads.resolve("decoder", {**SMALL, **kw})


def test_builds_are_cached_by_key():
    a = engines.build("decoder", _variant(), "eager", "cpu")
    assert engines.build("decoder", _variant(), "eager", "cpu") is a
    b = engines.build("decoder", _variant(kv_write="fused"), "eager", "cpu")
    assert b is not a and b.key != a.key
    assert engines.build_key("decoder", _variant(), "eager", "cpu") == a.key
    assert engines.build_key("decoder", _variant(), "compile", "cpu") != a.key
    assert a.info["engine"] == "eager" and a.info["build_key"] == a.key


def test_unknown_engine():
    with pytest.raises(WorkbenchError, match="unknown engine"):
        engines.build("decoder", _variant(), "onnxruntime", "cpu")


def test_cudagraph_needs_cuda():
    with pytest.raises(WorkbenchError, match="need --device cuda"):
        engines.check("cudagraph", "cpu")


@pytest.mark.skipif(shutil.which("trtexec") is not None, reason="checks the error without TensorRT")
def test_tensorrt_without_trtexec_is_a_clear_error():
    with pytest.raises(WorkbenchError, match="trtexec not found on PATH"):
        engines.build("decoder", _variant(), "tensorrt", "cuda")


def test_time_engine_on_cpu():
    engine = engines.build("decoder", _variant(), "eager", "cpu")
    out = time_engine(engine, steps=2, repeats=3, warmup=1, progress=False)
    t = out["timing"]
    assert t["timer"] == "host" and t["repeats"] == 3
    assert t["prefill_ms"]["n"] == 3 and t["decode_step_ms"]["n"] == 6
    for s in (t["prefill_ms"], t["decode_step_ms"], t["decode_step_ms_per_repeat"]):
        assert 0 < s["min"] <= s["median"] <= s["max"]
    assert out["logits"].shape == (3, SMALL["vocab"]) and len(out["tokens"]) == 3


def test_compare_flags_differences():
    logits = torch.randn(3, 10)
    tokens = [1, 2, 3]
    assert compare(logits, tokens, logits.clone(), tokens, "float32")["equal"]
    off = compare(logits, tokens, logits + 1.0, tokens, "float32")
    assert not off["equal"] and off["max_abs_diff"] == pytest.approx(1.0)
    assert not compare(logits, tokens, logits, [1, 2, 4], "float32")["equal"]


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("kv", ["unfused", "fused"])
def test_cudagraph_matches_eager_on_gpu(kv):
    v = _variant(kv_write=kv, cache_rows="bucketed")
    eager = generate(engines.build("decoder", v, "eager", "cuda"), 4, keep=True)
    graph = generate(engines.build("decoder", v, "cudagraph", "cuda"), 4, keep=True)
    assert compare(*eager, *graph, "bfloat16")["equal"]


@pytest.mark.gpu
@gpu
def test_fused_kernel_writes_what_aten_writes_on_gpu():
    a = engines.build("decoder", _variant(), "eager", "cuda")
    b = engines.build("decoder", _variant(kv_write="fused"), "eager", "cuda")
    generate(a, 3)
    generate(b, 3)
    assert b.info["kv_write_impl"] == "triton"
    for ca, cb in zip(a.instance.caches, b.instance.caches):
        for x, y in zip(ca, cb):
            assert torch.equal(x, y)
