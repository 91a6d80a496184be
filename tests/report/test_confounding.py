"""Wall-time verdicts guarded against confounding (``analysis.confounding``), on the committed
pairs the issue names. Before: fusion.html's headline said "decode 1.25x slower" while GPU time
per step fell 0.65x, hf-attention.html "decode 1.64x slower", the eager bucketing pair a verdict
on 6.52 → 5.84 ms for 0.04 ms of GPU work saved, and the demo's CPU capture called the fused
kv_write 4-8x slower, its Triton kernel having run under the interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.analysis.busy import busy_per_step
from workbench.analysis.confounding import assess

TRACES = Path(__file__).resolve().parents[2] / "traces"
HOST_BOUND = [("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys"),
              ("h200-hf-attn-eager-static-nsys", "h200-hf-attn-sdpa-static-nsys"),
              ("h200-cache-full-ctx2048-eager-nsys", "h200-cache-bucketed-ctx2048-eager-nsys")]
GPU_BOUND = [("h200-kvwrite-unfused-cudagraph-nsys", "h200-kvwrite-fused-cudagraph-nsys"),
             ("h200-phi4-cache-full-ctx2048-cudagraph-nsys", "h200-phi4-cache-bucketed-ctx2048-cudagraph-nsys")]


def _pair(names):
    return [wb.open_trace(TRACES / n) for n in names]


def _headline(md: str) -> str:
    return next(x for x in md.splitlines() if x.startswith("**Headline:**"))


@pytest.mark.parametrize("names", HOST_BOUND, ids=[p[1] for p in HOST_BOUND])
def test_host_bound_pairs_get_no_wall_time_verdict(names, tmp_path):
    a, b = _pair(names)
    busy = tuple(float(busy_per_step(t)["busy_fraction"].median()) for t in (a, b))
    c = assess(a, b, wb.diff(a, b), busy)
    assert c.confounded and all(c.host_bound)
    head = _headline(wb.report(a, b, md=tmp_path / "r.md").markdown)
    assert head.startswith("**Headline:** wall-time comparison: confounded: base and fix host/launch-bound")
    assert "(confounded: no verdict)" in head and ": slower" not in head and ": faster" not in head
    # What the change moves comes before the wall times.
    assert head.index("kernel launches per decode step") < head.index("decode step **")


def test_untouched_ranges_that_moved_on_the_host_are_the_evidence():
    a, b = _pair(HOST_BOUND[0])
    moved = {c.metric: round(100 * (c.ratio - 1)) for c in assess(a, b, wb.diff(a, b), (None, None)).moved}
    assert moved == {"qkv": 51, "mlp": 29, "attention": 23}  # kv_write, the change, is not among them


@pytest.mark.parametrize("names", GPU_BOUND, ids=[p[1] for p in GPU_BOUND])
def test_gpu_bound_pairs_keep_their_verdict(names, tmp_path):
    a, b = _pair(names)
    busy = tuple(float(busy_per_step(t)["busy_fraction"].median()) for t in (a, b))
    assert not assess(a, b, wb.diff(a, b), busy).confounded
    head = _headline(wb.report(a, b, md=tmp_path / "r.md").markdown)
    assert "confounded" not in head and "): faster" in head
    assert head.startswith("**Headline:** changed most: ")  # what changed leads


def test_a_triton_interpreter_capture_leads_with_counts(tmp_path):
    a, b = _pair(GPU_BOUND[0])
    b.meta["capture"]["engine_info"] = {"kv_write_impl": "triton-interpreter"}
    head = _headline(wb.report(a, b, md=tmp_path / "r.md").markdown)
    assert head.startswith("**Headline:** wall-time comparison: confounded: fix ran Triton kernels under the Triton "
                           "interpreter (numpy on the host), whose times measure the interpreter, not the kernels")
    assert "Read the kernel launches per decode step, which the change moves" in head
    assert head.index("kernel launches per decode step **237 → 125**") < head.index("changed most: ")
    assert "): faster" not in head
