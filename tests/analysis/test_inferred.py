"""Steps, layers and the decode step's timing inferred from the kernel stream
(``workbench.analysis.inferred``), checked against the committed H200 traces with their
ranges taken out: the ranges the traces do have are the ground truth."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from workbench.trace.inferred.boundaries import PREFILL_STEP
from workbench.trace.inferred.structure import infer
from workbench.analysis.inferred.timing import FROM_TRACE, source, step_times, timing
from workbench.analysis.projection import project
from workbench.analysis.tables import summary
from workbench.analysis.stats import MIN_SAMPLES, compare_timing
from workbench.trace import open_trace
from workbench.trace.schema import Trace, empty_table

from helpers import TRACES

# Traces whose decode steps are N identical layers and nothing else, where the host's gap
# between steps is no larger than between layers (windows under torch.profiler and the
# profiler API: the profiler's own launch cost hides the wait between steps): the step and the
# layer repeat alike in the kernel stream (not solved yet: the --layers hint does, below).
NOT_YET = ("h200-user-mlp-window-torch", "h200-user-profapi-")


def stripped(trace: Trace) -> Trace:
    """The trace with every range removed (no kernel in any range) and no recorded timing:
    what a capture with no NVTX and no workbench timing would be."""
    tables = {t: trace.tables[t] for t in ("kernels", "api", "memcpy", "memset")}
    k = tables["kernels"].copy()
    k["range_id"] = np.full(len(k), -1, np.int64)
    tables["kernels"], tables["ranges"] = k, empty_table("ranges")
    meta = {key: v for key, v in trace.meta.items() if not key.startswith("timing")}
    return Trace(tables, meta, name=f"{trace.label} (no ranges)")


def agreement(trace: Trace, layers: int | None = None) -> float | None:
    """Share of the decode kernels the inferred layers hold as the real ones do: a kernel in
    a real layer agrees when its inferred layer is the same layer (counted from 0 in its
    step) and the kernels of its real (step, layer) are one inferred (step, layer), matched one
    to one; a decode kernel in no real layer before its step's first layer or after its last
    agrees when it is in no inferred layer. A kernel in no real layer amid its step's layers is
    not counted: the ground truth gives it no layer there (a compiled kernel that several
    layers call, which provenance gives no one module), and a layer is contiguous. None for a
    trace whose decode kernels are mostly in no real layer (no ground truth), or whose layers
    were themselves inferred at import."""
    if trace.meta.get("inferred", {}).get("applied"):
        return None
    p = project(trace)
    dec = (p["phase"] == "decode").to_numpy()
    layer = p["layer"].to_numpy()
    if not dec.any() or (layer[dec] >= 0).mean() < 0.5:
        return None
    found = infer(stripped(trace), layers)
    truth = pd.factorize(p["step"].astype(str) + "|" + p["layer"].astype(str))[0]
    df = pd.DataFrame({"t": truth, "i": found.step * 1_000_000 + found.layer, "tl": layer, "il": found.layer,
                       "s": p["step"].astype(str).to_numpy(), "at": p["start"].to_numpy()})[dec]
    layered = df[df.tl >= 0].groupby("s")["at"].agg(["min", "max"])
    lo, hi = layered["min"].reindex(df["s"]).to_numpy(), layered["max"].reindex(df["s"]).to_numpy()
    df = df[~((df.tl < 0).to_numpy() & (df["at"].to_numpy() > lo) & (df["at"].to_numpy() < hi))]
    inl = df[df.tl >= 0]
    best = inl.groupby("t")["i"].agg(lambda x: x.value_counts().index[0])
    owners = best.reset_index().groupby("i")["t"].nunique()
    good = ((inl["i"].to_numpy() == best.reindex(inl["t"]).to_numpy())
            & (owners.reindex(inl["i"]).fillna(2).to_numpy() == 1)
            & (inl["il"].to_numpy() == inl["tl"].to_numpy() - inl["tl"].min()))
    return (int(good.sum()) + int(((df.tl < 0) & (df.il < 0)).sum())) / len(df)


def _layered() -> list:
    out = []
    for d in sorted(TRACES.iterdir()):
        marks = [pytest.mark.xfail(strict=True, reason="not solved yet (NOT_YET)")] if d.name.startswith(NOT_YET) else []
        out.append(pytest.param(d.name, marks=marks, id=d.name))
    return out


@pytest.mark.parametrize("name", _layered())
def test_inferred_layers_hold_the_real_layers_kernels(name):
    trace = open_trace(TRACES / name)
    share = agreement(trace)
    if share is None:
        pytest.skip("no layer ranges around its decode kernels: no ground truth")
    assert share >= 0.99, f"{name}: {share:.4f} of decode kernels agree"
    # The right hint never makes it worse.
    p = project(trace)
    layers = int(p.loc[(p["phase"] == "decode").to_numpy() & (p["layer"] >= 0).to_numpy(), "layer"].nunique())
    hinted = agreement(trace, layers)
    assert hinted >= 0.99, f"{name} with --layers {layers}: {hinted:.4f} of decode kernels agree"


def test_inference_says_what_it_rests_on():
    found = infer(stripped(open_trace(TRACES / "h200-phi4-cache-full-ctx512-cudagraph-nsys")))
    assert (found.steps, found.layers, found.block, found.period) == (3, 32, 18, 581)
    assert "graph launches" in found.rests_on[0] and "repeating 32 times" in found.rests_on[1]


def test_the_layers_hint_splits_a_two_layer_block():
    found = infer(stripped(open_trace(TRACES / "h200-kvwrite-fused-cudagraph-nsys")), layers=16)
    assert found.layers == 16
    assert sorted(set(found.layer[found.step == 0].tolist()) - {-1}) == list(range(16))


# Steps of N identical layers and nothing else (the user programs, the reference decoder's
# kernels with no prologue): where no gap tells a step from a layer, the --layers hint does.
HINTED = {"h200-user-call-": 4, "h200-user-mlp-": 3, "h200-user-profapi-": 4, "ref-h200-": 8}


def _hinted() -> list:
    out = []
    for d in sorted(TRACES.iterdir()):
        hint = next((n for prefix, n in HINTED.items() if d.name.startswith(prefix)), None)
        if hint is not None:
            out.append(pytest.param(d.name, hint, id=d.name))
    return out


@pytest.mark.parametrize("name,layers", _hinted())
def test_the_layers_hint_finds_steps_of_identical_layers(name, layers):
    share = agreement(open_trace(TRACES / name), layers)
    assert share is not None and share >= 0.99, f"{name} with --layers {layers}: {share} of decode kernels agree"


def step_agreement(trace: Trace, layers: int | None = None) -> float | None:
    """Share of the decode kernels whose inferred step is their real step's (the inferred
    step that holds most of a real step's kernels, held by no other real step). None for a
    trace with fewer than two real decode steps."""
    p = project(trace)
    dec = (p["phase"] == "decode").to_numpy()
    if p.loc[dec, "step"].nunique() < 2:
        return None
    found = infer(stripped(trace), layers)
    df = pd.DataFrame({"t": p["step"].astype(str).to_numpy(), "i": found.step})[dec]
    best = df.groupby("t")["i"].agg(lambda x: x.value_counts().index[0])
    owners = best.reset_index().groupby("i")["t"].nunique()
    good = ((df["i"].to_numpy() == best.reindex(df["t"]).to_numpy())
            & (owners.reindex(df["i"]).fillna(2).to_numpy() == 1) & (df["i"].to_numpy() >= 0))
    return float(good.mean())


def _stepped() -> list:
    out = []
    for d in sorted(TRACES.iterdir()):
        hint = next((n for prefix, n in HINTED.items() if d.name.startswith(prefix)), None)
        out.append(pytest.param(d.name, hint, id=d.name))
    return out


@pytest.mark.parametrize("name,layers", _stepped())
def test_inferred_steps_hold_the_real_steps_kernels(name, layers):
    """A step ends when its token is picked: the fill and the copies that prepare the next
    step's inputs, and its embedding, are the next step's, as the real step ranges have them,
    however long the host takes before the embedding. Steps launched one by one agree kernel
    for kernel; graph replays leave the input copy launched before each replay to the step
    before."""
    trace = open_trace(TRACES / name)
    if trace.meta.get("inferred", {}).get("applied"):
        pytest.skip("its steps were themselves inferred at import")
    share = step_agreement(trace, layers)
    if share is None:
        pytest.skip("fewer than two real decode steps: no ground truth")
    graphs = bool(trace.kernels["graph"].any())
    assert share >= (0.98 if graphs else 1.0), f"{name}: {share:.4f} of decode kernels in their step"


# Pairs of workbench-timed captures (A, B): unfused against fused KV writes, cache layouts,
# eager against graphs. Eager steps run slower under nsys than timed (its cost per launch), and
# the first few recorded ones slower still: the 3-step eager captures disagree, the cache pair
# even in direction; with 30 recorded steps (`eager30`) the cache pair agrees within 2%. Where
# B launches half the kernels A does, the profiler's cost per launch shrinks the change: the
# direction agrees, the ratio not within 10% (kv_write fused eager, eager against graphs).
_EAGER = pytest.mark.xfail(strict=True, reason="eager steps under the profiler: see benchmarks/RESULTS.md")
PAIRS = [pytest.param("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys", marks=_EAGER),
         pytest.param("h200-kvwrite-unfused-eager30-nsys", "h200-kvwrite-fused-eager30-nsys", marks=_EAGER),
         ("h200-kvwrite-unfused-cudagraph-nsys", "h200-kvwrite-fused-cudagraph-nsys"),
         pytest.param("h200-cache-full-ctx2048-eager-nsys", "h200-cache-bucketed-ctx2048-eager-nsys", marks=_EAGER),
         ("h200-cache-full-ctx2048-eager30-nsys", "h200-cache-bucketed-ctx2048-eager30-nsys"),
         # The same eager pairs with no range at all (WORKBENCH_ANNOTATE=0: an engine nobody
         # instrumented). The kv_write pair captured again minutes later ran every recorded
         # step ~5 ms slower than its timed ones, on both sides: host-bound steps under the
         # profiler, 0.955x against 0.810x timed.
         ("h200-kvwrite-unfused-eager30-bare-nsys", "h200-kvwrite-fused-eager30-bare-nsys"),
         ("h200-cache-full-ctx2048-eager30-bare-nsys", "h200-cache-bucketed-ctx2048-eager30-bare-nsys"),
         pytest.param("h200-kvwrite-unfused-eager30-bare2-nsys", "h200-kvwrite-fused-eager30-bare2-nsys", marks=_EAGER),
         pytest.param("h200-hf-attn-sdpa-static-nsys", "h200-hf-attn-sdpa-static-cudagraph-nsys", marks=_EAGER),
         ("h200-phi4-cache-full-ctx8192-cudagraph-nsys", "h200-phi4-cache-bucketed-ctx8192-cudagraph-nsys"),
         ("h200-phi4-cache-full-ctx512-cudagraph-nsys", "h200-phi4-cache-bucketed-ctx512-cudagraph-nsys"),
         ("h200-phi4-cache-full-ctx2048-cudagraph-nsys", "h200-phi4-cache-bucketed-ctx2048-cudagraph-nsys"),
         ("h100-kvwrite-unfused-cudagraph-torch", "h100-kvwrite-fused-cudagraph-torch"),
         ("h200-kvwrite-unfused-compile-torch", "h200-kvwrite-fused-compile-torch"),
         ("h200-kvwrite-unfused-compile-nsys", "h200-kvwrite-fused-compile-nsys"),
         ("h200-hf-attn-sdpa-static-torch", "h200-hf-attn-eager-static-torch"),
         pytest.param("h200-kvwrite-unfused-eager-torch", "h200-kvwrite-fused-eager-torch", marks=_EAGER),
         pytest.param("h200-cache-full-ctx8192-eager-torch", "h200-cache-bucketed-ctx8192-eager-torch", marks=_EAGER)]


@pytest.mark.parametrize("a,b", PAIRS)
def test_decode_step_from_the_trace(a, b):
    ta, tb = open_trace(TRACES / a), open_trace(TRACES / b)
    timed = next(c for c in compare_timing(ta.meta, tb.meta) if c.metric == "decode_step_ms")
    sa, sb = stripped(ta), stripped(tb)
    found = next(c for c in timing(sa, sb) if c.metric == "decode_step_ms")
    assert source(found).startswith(FROM_TRACE) and found.n_a == len(step_times(sa).samples) >= 3
    # An interval only with enough steps a side (analysis/stats.py: MIN_SAMPLES); else it says so.
    if found.interval:
        assert found.ci_low <= found.ratio <= found.ci_high
    else:
        assert min(found.n_a, found.n_b) < MIN_SAMPLES and "no interval" in found.verdict
    assert (found.ratio < 1) == (timed.ratio < 1), (found.describe(), timed.describe())
    assert abs(found.ratio / timed.ratio - 1) <= 0.10, (found.describe(), timed.describe())


def test_a_layer_that_does_one_op_more_keeps_it():
    """A program whose middle layer scales its output (one elementwise op more, named for its
    functor): the steps start at the gap before the first layer, and the extra op stays at the
    end of its layer, where the host's gaps put it."""
    found = infer(stripped(open_trace(TRACES / "h200-user-mlp-extra-window-nsys")))
    assert (found.steps, found.layers) == (3, 3)
    assert found.layer[found.step == 0].tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("name,period", [("h200-kvwrite-unfused-eager30-bare-nsys", 237),
                                         ("h200-kvwrite-fused-eager30-bare-nsys", 125),
                                         ("h200-cache-bucketed-ctx2048-eager30-bare-nsys", 125)])
def test_an_eager_engine_with_no_ranges_gets_its_steps_and_layers(name, period):
    """30 recorded eager steps of the decoder with every range off: a longer host gap every
    eight or nine steps (the first steps' warm-up) does not make steps of several steps."""
    found = infer(stripped(open_trace(TRACES / name)))
    assert (found.steps, found.period, found.layers) == (30, period, 8)


def test_mixture_of_experts_layers_and_a_hybrid_of_two_kinds_of_layer():
    """transformers' Mixtral and Qwen2-MoE decoding eagerly on the H200 (benchmarks/h200_moe.sh),
    their ranges removed. Mixtral's experts loop syncs the host inside every layer, yet the
    steps end at the token's pick and every layer is found. Qwen2-MoE with every other layer
    dense repeats in pairs: the pair's block splits where its norms and attention recur, into
    a dense layer and an MoE layer, alternating."""
    found = infer(stripped(open_trace(TRACES / "h200-hfmoe-mixtral-nsys")))
    assert (found.steps, found.layers, found.block) == (8, 8, 69)
    hybrid = infer(stripped(open_trace(TRACES / "h200-hfmoe-qwen2moe-sparse2-nsys")))
    assert (hybrid.steps, hybrid.layers) == (8, 8)
    assert "a block of two layers repeating 4 times in a step (its first 39 kernels recur 40 kernels on)" \
        in hybrid.rests_on[1]
    lengths = np.bincount(hybrid.layer[(hybrid.step == 0) & (hybrid.layer >= 0)])
    assert lengths.tolist() == [40, 77] * 4


def test_a_users_moe_program_whose_capture_starts_with_its_prefill():
    """A user's Mixtral program sampling a batch of four with generate() (top-k: a radix
    top-k whose kernels gather), captured as a command on the H200 with no range at all, and
    again with module ranges from outside (--modules). The capture starts with the prefill, whose
    experts loop runs other kernels: the layers are read from the middle of the stream, the
    top-k's gather is no embedding's, and the prefill (a fifth of its kernels in no decode
    step) is its own phase: 11 decode steps of 524 kernels, as the program's 11 decode forwards
    and as its capture with module ranges reads."""
    trace = open_trace(TRACES / "h200-user-moe-nsys")
    bare = trace.meta["inferred"]
    assert (bare["steps"], bare["layers"], bare["kernels_per_layer"]) == (11, 8, 53)
    assert "before them the prefill (645 kernels, 24% of them in no step" in bare["rests_on"]
    phases = summary(trace, by="phase").set_index("phase")["kernels"]
    assert phases["prefill"] == 645 and phases["decode"] == 11 * 524
    truth = open_trace(TRACES / "h200-user-moe-modules-nsys")
    found = infer(stripped(truth))
    assert (found.steps, found.layers, found.block) == (11, 8, 53)
    assert agreement(truth) == 1.0 and step_agreement(truth) == 1.0
    p = project(truth)
    prefill = found.step[(p["phase"] == "prefill").to_numpy()]
    assert (prefill < 0).all() and (prefill == PREFILL_STEP).mean() > 0.99  # no prefill kernel in a decode step
    assert len(step_times(stripped(truth)).samples) == 11


def test_moe_layers_whose_kernel_counts_vary():
    """The same program with transformers' experts loop (``--experts eager``): each hit expert's
    kernels are launched, 2 to 8 experts a layer, so the layers run 110 to 170 kernels and
    no two steps are alike. The steps are found by the kernels that run once a step, the
    layers by those that run once a layer, each layer starting where the first one does
    before its attention; CUB's own NVTX ranges around the experts' scans (domain CCCL) do
    not make the bare capture instrumented: they sit under the inferred layers."""
    truth = open_trace(TRACES / "h200-user-moe-eagerexperts-modules-nsys")
    found = infer(stripped(truth))
    assert (found.steps, found.layers) == (11, 8)
    sizes = {int((found.layer[found.step == s] == j).sum()) for s in range(found.steps) for j in range(8)}
    assert min(sizes) <= 110 and max(sizes) >= 170
    assert agreement(truth) == 1.0 and step_agreement(truth) == 1.0
    bare = open_trace(TRACES / "h200-user-moe-eagerexperts-nsys")
    info = bare.meta["inferred"]
    assert info["applied"] and (info["steps"], info["layers"]) == (11, 8)
    assert "kernels that run once a step (the steps' lengths vary)" in info["rests_on"]
    rows = summary(bare, by="layer")
    assert ((rows["layer"] >= 0) & rows["range"].astype(str).str.startswith("cub::")).any()
