"""Timed comparisons with confidence intervals, on the committed H200 traces: ``TraceDiff.timing``,
``workbench diff`` (text and ``--json``), and the ``--fail-if`` gates on times and counts.

The bootstrap is seeded, so every interval below is the same on every run: these are checks
of recorded samples, not timings of this machine."""

from __future__ import annotations

import json
import re

import pytest

from helpers import TRACES
import workbench as wb
from workbench.analysis.stats import compare_samples, compare_timing, timed_samples
from workbench.cli import main

UNFUSED_GRAPH, FUSED_GRAPH = "h200-kvwrite-unfused-cudagraph-nsys", "h200-kvwrite-fused-cudagraph-nsys"
EAGER_NSYS, EAGER_TORCH = "h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-unfused-eager-torch"
UNTIMED = ("ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys")  # imported: no timing
LINE = re.compile(r"^  (decode step|prefill|call): [\d.]+ ms -> [\d.]+ ms, [\d.]+x \(95% CI [\d.]+-[\d.]+x\): "
                  r"(faster|slower|no evidence of a change|changed by less than the 10% threshold)$")


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["--root", str(TRACES), *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _timing(a: str, b: str) -> dict:
    return {c.metric: c for c in wb.diff(str(TRACES / a), str(TRACES / b)).timing}


# ---------------------------------------------------------------- on committed traces


def test_fused_kv_write_decode_step_is_significantly_faster():
    t = _timing(UNFUSED_GRAPH, FUSED_GRAPH)
    assert set(t) == {"decode_step_ms", "prefill_ms"}
    c = t["decode_step_ms"]
    assert c.verdict == "faster" and c.significant
    assert c.ci_low <= c.ratio <= c.ci_high < 0.9
    assert c.n_a == c.n_b == 30  # one sample per repetition: each repetition's mean step
    assert c.b_median < c.a_median


def test_same_variant_two_backends_is_no_significant_change():
    t = _timing(EAGER_NSYS, EAGER_TORCH)
    # A shift the interval shows but below the threshold is said as such, not as "no change".
    c = t["decode_step_ms"]
    assert c.verdict == "changed by less than the 10% threshold" and not c.significant and c.ci_low > 1.0
    assert "1.014x (95% CI 1.001-1.075x)" in c.describe()  # an end above 1 never prints as 1.00
    assert t["prefill_ms"].verdict == "no evidence of a change" and t["prefill_ms"].ci_low < 1.0


def test_a_trace_against_itself_is_ratio_one():
    for c in _timing(EAGER_NSYS, EAGER_NSYS).values():
        assert c.ratio == 1.0 and c.a_median == c.b_median
        assert c.ci_low <= 1.0 <= c.ci_high
        assert c.verdict == "no evidence of a change"


def test_diff_text_prints_one_line_per_timed_phase(capsys):
    code, out, err = run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if LINE.match(ln)]
    assert [ln.split(":")[0].strip() for ln in lines] == ["decode step", "prefill"]
    decode = lines[0]
    assert decode.endswith(": faster") and " -> " in decode and "95% CI" in decode
    c = _timing(UNFUSED_GRAPH, FUSED_GRAPH)["decode_step_ms"]
    assert f"{c.ratio:.3f}x (95% CI {c.ci_low:.3f}-{c.ci_high:.3f}x)" in decode  # 0.670 (0.666-0.674): never zero-width
    assert "bench samples" not in out  # both from the captures' own timing


def test_diff_text_says_when_a_wall_time_comparison_is_confounded(capsys):
    """The eager fusion pair is host-bound and its untouched ranges moved on the host: the text
    says so under the timed lines, in ASCII; under CUDA graphs it does not."""
    code, out, err = run(capsys, "diff", "h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys")
    assert code == 0, err
    assert ("  wall time confounded: base and fix host/launch-bound (GPU busy 7.6% -> 4.5% of a decode step); ranges "
            "the change did not touch moved on the host: qkv +51%, mlp +29%, attention +23%: read the per-step counts "
            "and times below, not these verdicts\n") in out
    assert out.isascii()
    code, out, err = run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH)
    assert code == 0 and "confounded" not in out


def test_diff_text_says_when_nothing_was_timed(capsys):
    # Untimed captures are timed from their traces (issue 37), and the line says so.
    code, out, _ = run(capsys, "diff", *UNTIMED)
    assert code == 0 and "[from the trace (A: 3 steps, B: 3 steps; step range's start to its last kernel's end)]" in out
    # One timed a call, the other decode steps: no phase in common, so both decode steps are
    # timed from the traces alike.
    code, out, _ = run(capsys, "diff", "h200-user-call-nsys", FUSED_GRAPH)
    assert code == 0 and "decode step: " in out and "[from the trace (A: 3 steps, B: 3 steps;" in out
    # Steps timed from the trace are wall time too: launch-bound ones are said to be confounded
    # (a profiler's cost per launch is in them), as timed ones are.
    code, out, _ = run(capsys, "diff", "h200-user-mlp-window-nsys", "h200-user-mlp-extra-window-nsys")
    assert code == 0 and "[from the trace (A: 3 steps, B: 3 steps;" in out
    assert "wall time confounded: base and fix host/launch-bound (GPU busy 3.7% -> 4.1% of a decode step)" in out


def test_diff_json_is_an_object_with_timing(capsys):
    code, out, err = run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) >= {"a", "b", "ranges", "timing", "totals", "steps"}
    assert doc["steps"] == {"a": 3, "b": 3}
    assert doc["totals"]["kernels_per_step_a"] > doc["totals"]["kernels_per_step_b"]
    assert isinstance(doc["ranges"], list) and all("alignment" in r for r in doc["ranges"])
    decode = next(t for t in doc["timing"] if t["metric"] == "decode_step_ms")
    for key in ("a_median", "b_median", "ratio", "ci_low", "ci_high", "significant", "verdict", "n_a", "n_b"):
        assert key in decode, key
    assert decode["verdict"] == "faster" and decode["significant"] is True and decode["unit"] == "ms"
    assert decode["samples_a"] == decode["samples_b"] == "timing"
    code, out, _ = run(capsys, "diff", *UNTIMED, "--json")
    [decode] = json.loads(out)["timing"]
    assert decode["metric"] == "decode_step_ms" and "from the trace (A: 3 steps, B: 3 steps" in decode["method"]


# ---------------------------------------------------------------- gates


def test_time_gate_fails_only_when_b_is_significantly_and_sizably_slower(capsys):
    # Fused -> unfused: B is slower, its interval well above 1.
    code, _, err = run(capsys, "diff", FUSED_GRAPH, UNFUSED_GRAPH, "--fail-if", "decode_step>5%")
    assert code == 1
    msg = re.search(r"gate failed: (decode_step: .*)", err).group(1)
    assert re.fullmatch(r"decode_step: [\d.]+ ms -> [\d.]+ ms, [\d.]+x \(95% CI ([\d.]+)-[\d.]+x; limit \+5%\)", msg)
    assert float(re.search(r"CI ([\d.]+)-", msg).group(1)) > 1.05
    # The same pair the other way round: B faster, the gate passes.
    assert run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--fail-if", "decode_step>5%")[0] == 0
    # Same variant, two captures: a prefill interval holding 1 passes even a 0% limit, and a
    # decode step about 1% slower passes a 5% one.
    assert run(capsys, "diff", EAGER_NSYS, EAGER_TORCH, "--fail-if", "decode_step>5%", "--fail-if", "prefill>0%")[0] == 0
    # A limit above the change passes: the ratio must exceed 1 + N% as well. (In these captures
    # the fused engine's prefill is a few percent slower, its interval above 1.)
    c = _timing(UNFUSED_GRAPH, FUSED_GRAPH)["prefill_ms"]
    assert c.ci_low > 1.0
    above = f"prefill>{(c.ratio - 1) * 100 + 1:.0f}%"
    below = f"prefill>{max(0.0, (c.ratio - 1) * 100 - 1):.0f}%"
    assert run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--fail-if", above)[0] == 0
    assert run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--fail-if", below)[0] == 1


def test_time_gates_refuse_what_they_cannot_check(capsys):
    code, out, err = run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--fail-if", "call>5%")
    assert code == 2 and "call is not timed in both A and B" in err and err.count("\n") == 1
    code, _, err = run(capsys, "diff", *UNTIMED, "--fail-if", "prefill>5%")
    assert code == 2 and "not timed in both" in err
    code, out, err = run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--fail-if", "decode_step>5")
    assert code == 2 and "takes a percentage" in err and out == ""
    code, _, err = run(capsys, "diff", UNFUSED_GRAPH, FUSED_GRAPH, "--fail-if", "latency>5%")
    assert code == 2 and "bad --fail-if gate" in err


def test_count_gates_read_a_to_b_and_fail_only_when_b_has_more(capsys):
    more, fewer = UNTIMED[1], UNTIMED[0]  # fused: 48 kernels per step; unfused: 160
    code, _, err = run(capsys, "diff", more, fewer, "--fail-if", "kernels_per_step>0")
    assert code == 1 and "gate failed: kernels_per_step: 48 -> 160 (+112, limit +0)\n" in err
    # B has fewer: every count gate passes, however tight.
    code, _, err = run(capsys, "diff", fewer, more, "--fail-if", "kernels_per_step>0", "--fail-if", "kernels>0",
                       "--fail-if", "gpu_time_per_step>0%", "--fail-if", "gpu_time>0")
    assert code == 0, err
    code, _, err = run(capsys, "diff", more, fewer, "--fail-if", "gpu_time_per_step>5%")
    assert code == 1
    assert re.search(r"gpu_time_per_step: [\d.,]+ us -> [\d.,]+ us \(\+[\d.,]+ us, \+[\d.]+%, limit \+5%\)", err)
    assert run(capsys, "diff", more, fewer, "--fail-if", "kernels_per_step>112")[0] == 0


# ---------------------------------------------------------------- stats


def test_intervals_are_deterministic():
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01]
    b = [x * 0.7 for x in a]
    first, second = compare_samples("decode_step_ms", a, b), compare_samples("decode_step_ms", a, b)
    assert first == second
    assert first.ratio == pytest.approx(0.7) and first.ci_low <= 0.7 <= first.ci_high
    assert first.verdict == "faster" and first.n_a == first.n_b == 8


def test_identical_samples_are_no_change_and_a_small_shift_is_not_significant():
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02]
    same = compare_samples("prefill_ms", a, list(a))
    assert same.ratio == 1.0 and not same.significant and same.verdict == "no evidence of a change"
    # 5% slower on every sample: the interval excludes 1, but the effect is under the 10% minimum.
    small = compare_samples("prefill_ms", [1.0] * 10, [1.05] * 10)
    assert small.ci_low > 1.0 and not small.significant
    assert small.verdict == "changed by less than the 10% threshold"
    big = compare_samples("prefill_ms", [1.0] * 10, [1.5] * 10)
    assert big.significant and big.verdict == "slower"


def test_too_few_samples_give_no_interval_and_no_verdict():
    # Five samples a side: the 95% interval's ends would be the smallest and largest sample.
    from workbench.analysis.stats import MIN_SAMPLES, change_text

    assert MIN_SAMPLES == 6
    one = compare_samples("wall_ms", [100.0], [86.0])
    assert not one.interval and not one.significant and one.verdict == "n = 1: no interval"
    assert change_text(one) == "0.86x (n = 1: no interval)"  # before: 0.86x (95% CI 0.86-0.86x): faster
    five = compare_samples("decode_step_ms", [1.0] * 5, [2.0] * 30)
    assert five.verdict == "n = 5 vs 30: no interval" and not five.interval
    assert compare_samples("decode_step_ms", [1.0] * 6, [2.0] * 6).verdict == "slower"


def test_empty_samples_are_an_error():
    with pytest.raises(ValueError, match="no samples"):
        compare_samples("call_ms", [], [1.0])
    with pytest.raises(ValueError, match="no samples"):
        compare_samples("call_ms", [float("nan")], [1.0])  # non-finite samples are dropped


def test_bench_samples_are_preferred_to_the_captures():
    capture = {"timing": {"call_ms": {"samples": [1.0, 1.1]}, "prefill_ms": {"samples": [2.0]}}}
    benched = {**capture, "timing_bench": {"call_ms": {"samples": [3.0, 3.1]}}}
    assert timed_samples(capture, "call_ms") == [1.0, 1.1]
    assert timed_samples(benched, "call_ms") == [3.0, 3.1]
    assert timed_samples({}, "call_ms") is None
    assert [c.metric for c in compare_timing(benched, benched)] == ["call_ms"]
