import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    # The fused kv_write kernel runs under Triton's interpreter on CPU; on a GPU it must not.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from workbench import workloads
from workbench.engines import build
from workbench.errors import WorkbenchError
from workbench.capturing.run import compare, generate
from workbench.workloads.decoder import bucket_rows

SMALL = dict(layers=2, heads=2, head_dim=16, index_dim=16, mlp_dim=64, vocab=128, page_size=16, rows=512,
             bucket=64, ctx=70)


def test_bucket_rows():
    assert bucket_rows(0, 256, 10368) == 1  # empty cache: one masked row
    assert bucket_rows(1, 256, 10368) == 256
    assert bucket_rows(256, 256, 10368) == 256
    assert bucket_rows(257, 256, 10368) == 512
    assert bucket_rows(10300, 256, 10368) == 10368  # never past the allocation


def test_variant_parsing_and_errors():
    assert workloads.parse_assignments(["kv_write=fused", "layers=2"]) == {"kv_write": "fused", "layers": "2"}
    v = workloads.resolve("decoder", {"layers": "2", "kv_write": "fused"})
    assert v["layers"] == 2 and v["kv_write"] == "fused" and v["rows"] == 10368
    with pytest.raises(WorkbenchError, match="unknown workload"):
        workloads.get("nope")
    with pytest.raises(WorkbenchError, match="unknown variant key"):
        workloads.resolve("decoder", {"colour": "red"})
    with pytest.raises(WorkbenchError, match="unknown value"):
        workloads.resolve("decoder", {"cache_rows": "some"})
    with pytest.raises(WorkbenchError, match="expected int"):
        workloads.resolve("decoder", {"layers": "many"})
    with pytest.raises(WorkbenchError, match="key=value"):
        workloads.parse_assignments(["layers"])


def _engine(**variant):
    return build("decoder", workloads.resolve("decoder", {**SMALL, **variant}), "eager", "cpu")


def _run(**variant):
    engine = _engine(**variant)
    return engine, generate(engine, 4, keep=True)


def test_all_variants_same_logits_and_tokens():
    runs = {(kw, cr): _run(kv_write=kw, cache_rows=cr) for kw in ("unfused", "fused") for cr in ("full", "bucketed")}
    (ref_engine, (ref_logits, ref_tokens)) = runs[("unfused", "full")]
    assert ref_logits.shape == (5, SMALL["vocab"])
    for key, (engine, (logits, tokens)) in runs.items():
        cmp = compare(ref_logits, ref_tokens, logits, tokens, "float32")
        assert cmp["equal"], (key, cmp)
    # Fused writes exactly the bytes the aten ops write, index-K included.
    fused = runs[("fused", "full")][0].instance
    assert fused.info["kv_write_impl"] == "triton-interpreter"
    for a, b in zip(ref_engine.instance.caches, fused.caches):
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def test_bucketed_binds_only_the_bucket():
    engine, _ = _run(cache_rows="bucketed")
    inst = engine.instance
    assert inst.rows_for(SMALL["ctx"]) == 128 and inst.rows_for(129) == 192
    full, _ = _run()
    assert full.instance.rows_for(SMALL["ctx"]) == SMALL["rows"]


def test_fused_falls_back_without_triton_interpreter(monkeypatch):
    from workbench.workloads import kv_fused

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert kv_fused.implementation(torch.device("cpu")) == "torch"
    engine, (logits, tokens) = _run(kv_write="fused", seed=3)
    ref_engine, (ref_logits, ref_tokens) = _run(kv_write="unfused", seed=3)
    assert compare(ref_logits, ref_tokens, logits, tokens, "float32")["equal"]


def test_bad_sizes_are_clear_errors():
    with pytest.raises(WorkbenchError, match="multiple of page_size"):
        _run(rows=500)
    with pytest.raises(WorkbenchError, match="no room to decode"):
        _run(ctx=512)
    engine = _engine(ctx=510)
    with pytest.raises(WorkbenchError, match="past the 512-row"):
        generate(engine, 3)
