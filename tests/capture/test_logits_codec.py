"""The recorded logits' codec (workbench.analysis.outputs): in full when small, the top-k of each position
when large, and every comparison over the entries both sides kept."""

import base64
import json
from types import SimpleNamespace

import numpy as np
import pytest

from helpers import TRACES
from workbench.analysis import outputs as codec
from workbench.capturing import run
from workbench.reporting import checks
from workbench.vocabulary import OUTPUT_TOLERANCE

EAGER, SDPA = "h200-hf-attn-eager-static-nsys", "h200-hf-attn-sdpa-static-nsys"
SMALL_VOCAB = "h200-kvwrite-unfused-eager-nsys"


def manifest(name: str) -> dict:
    return json.loads((TRACES / name / "manifest.json").read_text())


def old_format(arr) -> dict:
    """Outputs as every manifest wrote them before the codec: all logits as base64 float32."""
    arr = np.asarray(arr, dtype=np.float32)
    return {"tokens": [1, 2], "logits_shape": list(arr.shape), "logits_f32_b64": base64.b64encode(arr.tobytes()).decode()}


def inputs(ob: dict, oo: dict, dtype: str = "float32"):
    meta = {"capture": {"engine_info": {"dtype": dtype}}}
    return [SimpleNamespace(role="base", name="a", meta={**meta, "outputs": ob}),
            SimpleNamespace(role="fix", name="b", meta={**meta, "outputs": oo})]


def large(seed: int = 0, rows: int = 2, width: int = 40_000):
    """Logits above FULL_LOGITS_MAX, so encoded as top-k."""
    assert rows * width > codec.FULL_LOGITS_MAX
    return np.random.default_rng(seed).normal(size=(rows, width)).astype(np.float32)


# -- real captures --------------------------------------------------------------------------

@pytest.mark.parametrize("name", [EAGER, SDPA])
def test_real_vocabulary_kept_as_top_k_and_round_trips(name):
    o = manifest(name)["outputs"]
    assert "logits_f32_b64" not in o and o["logits_topk"]["k"] == codec.LOGITS_TOPK
    assert (TRACES / name / "manifest.json").stat().st_size < 64 << 10
    arr = codec.decode_logits(o)
    assert arr.shape == (5, 128256) and arr.dtype == np.float32
    kept = ~np.isnan(arr)
    assert (kept.sum(axis=1) == codec.LOGITS_TOPK).all()
    assert codec.logits_topk(o) == codec.LOGITS_TOPK
    # encoding what was decoded gives the very same fields back
    again = codec.encode_logits(arr)
    assert again == {"logits_shape": o["logits_shape"], "logits_topk": o["logits_topk"]}


def test_real_captures_equal_within_bfloat16_over_top_k():
    from workbench.capturing.session import decode_outputs

    a, b = manifest(EAGER), manifest(SDPA)
    la, ta = decode_outputs(a["outputs"])
    lb, tb = decode_outputs(b["outputs"])
    assert ta == tb
    cmp = run.compare(la, ta, lb, tb, "bfloat16")
    assert cmp["equal"] and cmp["tokens_equal"] and cmp["topk"] == 64 and not cmp["apart"]
    assert 0 < cmp["max_abs_diff"] <= cmp["tolerance"]
    eq = codec.outputs_equal(a, b, tolerance=OUTPUT_TOLERANCE["bfloat16"])
    assert eq["equal"] and eq["topk"] == 64 and eq["max_abs_diff"] == pytest.approx(cmp["max_abs_diff"])
    lines, _, summaries = checks.correctness(inputs(a["outputs"], b["outputs"], "bfloat16"))
    assert "greedy tokens identical (5 tokens); max abs logit diff " in summaries[0]
    assert " over the top-64 logits per position (within tolerance " in summaries[0]


def test_small_vocabulary_keeps_the_exact_full_encoding():
    torch = pytest.importorskip("torch")
    from workbench.capturing.session import decode_outputs, encode_outputs

    o = manifest(SMALL_VOCAB)["outputs"]
    arr = codec.decode_logits(o)
    assert arr.size <= codec.FULL_LOGITS_MAX and not np.isnan(arr).any()
    assert codec.encode_logits(arr) == {"logits_shape": o["logits_shape"], "logits_f32_b64": o["logits_f32_b64"]}
    logits, tokens = decode_outputs(o)
    assert encode_outputs(logits, tokens) == o
    assert encode_outputs(logits.to(torch.bfloat16), tokens) == o  # a bfloat16 capture: exact in bfloat16 too
    assert codec.logits_topk(o) is None
    cmp = run.compare(logits, tokens, logits.clone(), tokens, "float32")
    assert cmp["equal"] and cmp["max_abs_diff"] == 0 and cmp["topk"] is None


# -- old format -----------------------------------------------------------------------------

def test_old_format_manifests_still_decode_small_and_large():
    small = np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)
    assert np.array_equal(codec.decode_logits(old_format(small)), small)
    big = large()  # a manifest written before the codec held even a large vocabulary in full
    full = codec.decode_logits(old_format(big))
    assert np.array_equal(full, big)
    assert checks._logits(old_format(big)) is not None
    topk = {"tokens": [1, 2], **codec.encode_logits(big)}
    assert "logits_topk" in topk
    c = codec.compare(old_format(big), topk)  # full against top-k: over the top-k entries
    assert c["equal"] and c["max_abs_diff"] == 0 and c["topk"] == codec.LOGITS_TOPK
    assert codec.decode_logits({"tokens": [1]}) is None


def test_malformed_logits():
    with pytest.raises(ValueError):
        codec.decode_logits({"logits_shape": [2, 3], "logits_f32_b64": "AAAA"})
    bad = codec.encode_logits(large())
    bad["logits_topk"] = {**bad["logits_topk"], "k": 3}
    with pytest.raises(ValueError):
        codec.decode_logits(bad)
    assert checks._logits(bad) is None
    assert not codec.compare({"tokens": [1], **bad}, {"tokens": [1], **codec.encode_logits(large())})["equal"]


# -- comparisons over the entries kept ------------------------------------------------------

def _lowered(arr, row: int, n: int):
    """``arr`` with the ``n`` largest logits of ``row`` pushed to the bottom: top-k sets that
    share only ``LOGITS_TOPK - n`` entries, with equal values where they share."""
    out = arr.copy()
    top = np.argsort(-arr[row], kind="stable")[:n]
    out[row, top] = arr[row].min() - 10
    return out


def test_top_k_sets_that_barely_overlap_are_not_equal():
    a = large()
    b = _lowered(a, row=1, n=40)  # 24 of 64 shared: under half
    ea, eb = ({"tokens": [7, 7], **codec.encode_logits(x)} for x in (a, b))
    la, lb = codec.decode_logits(ea), codec.decode_logits(eb)
    d = codec.logit_diff(la, lb)
    assert d["apart"] == [1] and d["max_abs_diff"] == 0 and d["topk"] == 64
    cmp = run.compare(la, [7, 7], lb, [7, 7], "float32")
    assert not cmp["equal"] and cmp["tokens_equal"] and cmp["apart"] == [1]
    c = codec.compare(ea, eb)
    assert not c["equal"]
    assert c["differences"] == ["logits: top-64 logits share under half their entries at position(s) 1"]
    _, _, summaries = checks.correctness(inputs(ea, eb))
    assert "logits DIFFER: top-64 logits share under half their entries at position(s) 1" in summaries[0]


def test_top_k_sets_sharing_half_or_more_compare_their_values():
    a = large()
    b = _lowered(a, row=0, n=32)  # exactly half shared
    ea, eb = (codec.encode_logits(x) for x in (a, b))
    assert codec.compare(ea, eb)["equal"]
    assert run.compare(codec.decode_logits(ea), [1], codec.decode_logits(eb), [1], "float32")["equal"]
    b[0, np.argsort(-b[0], kind="stable")[0]] += 0.5  # one shared value moves
    c = codec.compare(ea, codec.encode_logits(b))
    assert not c["equal"] and c["max_abs_diff"] == pytest.approx(0.5)
    assert c["differences"] == ["logits: max abs diff 0.5 over the top-64 logits per position"]


def test_tolerance_scale_and_diff_ignore_values_not_kept():
    a = np.full((2, 4), np.nan, dtype=np.float32)
    b = a.copy()
    a[:, :2], b[:, :2] = [[10, 1], [2, 3]], [[10, 1], [2, 3.0001]]
    b[0, 3] = 1e6  # kept by one side only: not compared, not part of the scale
    d = codec.logit_diff(a, b)
    assert d["max_abs_diff"] == pytest.approx(1e-4, rel=1e-2) and d["scale"] == 10 and d["apart"] == []
    a[1] = np.nan  # a position with nothing kept on one side
    assert codec.logit_diff(a, b)["apart"] == [1]


def test_full_logits_with_nan_still_differ():
    a = np.zeros((2, 3), dtype=np.float32)
    b = a.copy()
    b[0, 1] = np.nan
    c = codec.compare(old_format(a), old_format(b))
    assert not c["equal"] and c["differences"] == ["logits: NaN among the values"]
    _, _, summaries = checks.correctness(inputs(old_format(a), old_format(b)))
    assert "logits DIFFER (NaN among them)" in summaries[0]
