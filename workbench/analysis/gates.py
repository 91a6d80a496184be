"""``--fail-if`` gates of ``workbench diff``: is B worse than A by more than a limit?

Every gate fails only when B is worse (more kernels, more GPU time, slower), never when B
improves, and its message reads A -> B: ``kernels_per_step: 3 -> 5 (+2, limit +0)``.

A gate is written ``METRIC+N`` or ``METRIC+N%`` (B worse than A by more than N, or N% of A):
nothing in it is special to a shell, so it is pasted into bash unquoted. ``METRIC>N`` means the
same, but unquoted bash takes ``>N`` for a redirection to a file named N and passes the bare
metric, which is refused with that said.

* Count and GPU-time gates (``kernels_per_step``, ``gpu_time_per_step``, ``kernels``,
  ``gpu_time``) fail when B - A exceeds N, or N% of A.
* Time gates (``decode_step``, ``prefill``, ``call``: the timed phases of :mod:`.stats`) take a
  percentage and fail only when B is *significantly* slower, the lower bound of the ratio's
  confidence interval above 1, *and* the ratio above 1 + N%: noise alone never fails a build,
  and a real but small slowdown passes a generous limit.
"""

from __future__ import annotations

import re

from ..errors import WorkbenchError
from ..textfmt import MICRO_ASCII, ms, num, us
from .diff import TraceDiff
from .stats import CONFIDENCE

# Gate metric -> the TraceDiff.totals key it reads (``_a`` / ``_b``).
COUNTS = {"kernels_per_step": "kernels_per_step", "gpu_time_per_step": "gpu_time_per_step_ns",
          "kernels": "kernels", "gpu_time": "gpu_time_per_step_ns"}
# Gate metric -> the timed phase (a stats.PHASE_SAMPLES key) it compares.
TIMES = {"decode_step": "decode_step_ms", "prefill": "prefill_ms", "call": "call_ms"}

_GATE = re.compile(r"^\s*([a-z_]+)\s*(?:\+|>\s*\+?)\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def parse_gate(gate: str) -> tuple[str, float, bool]:
    """``"decode_step+5%"`` (or ``"decode_step>5%"``) -> ``("decode_step", 5.0, True)``; a bad
    gate is one line."""
    m = _GATE.match(gate)
    if gate.strip() in {**COUNTS, **TIMES}:  # `METRIC>N` unquoted: the shell kept only METRIC
        metric, limit = gate.strip(), "N%" if gate.strip() in TIMES else "N"
        raise WorkbenchError(gate, f"bad --fail-if gate: {metric} has no limit: unquoted, the shell takes '>{limit}' "
                                   f"in {metric}>{limit} for a redirection (to a file named {limit}); write "
                                   f"{metric}+{limit}, which needs no quotes, or quote the gate: '{metric}>{limit}'")
    if not m or m.group(1) not in {**COUNTS, **TIMES}:
        raise WorkbenchError(gate, "bad --fail-if gate; use METRIC+N or METRIC+N% (B worse than A by more than N, "
                                   f"or N% of A) with METRIC one of {', '.join(COUNTS)}, or METRIC+N% with METRIC "
                                   f"one of {', '.join(TIMES)}")
    metric, value, pct = m.group(1), float(m.group(2)), bool(m.group(3))
    if metric in TIMES and not pct:
        raise WorkbenchError(gate, f"a time gate takes a percentage of A's median ({metric}+{m.group(2)}%)")
    return metric, value, pct


def check_gates(d: TraceDiff, gates: list[str]) -> list[str]:
    """Evaluate ``--fail-if`` gates such as ``kernels_per_step+0`` (B has more kernels per step
    than A), ``gpu_time_per_step+5%`` or ``decode_step+5%``; returns the violated ones,
    described. A time gate on a phase that A and B did not both time is an error, not a pass."""
    parsed = [parse_gate(g) for g in gates]  # every gate checked before any is evaluated
    failed = []
    for metric, value, pct in parsed:
        found = _time_gate(d, metric, value) if metric in TIMES else _count_gate(d, metric, value, pct)
        if found:
            failed.append(found)
    return failed


def _count_gate(d: TraceDiff, metric: str, value: float, pct: bool) -> str | None:
    key = COUNTS[metric]
    va, vb = d.totals[f"{key}_a"], d.totals[f"{key}_b"]
    if metric == "gpu_time":
        va, vb = va * d.totals["steps_a"], vb * d.totals["steps_b"]
    delta = vb - va
    if delta <= (va * value / 100.0 if pct else value):
        return None
    shown = (lambda ns: us(ns, MICRO_ASCII)) if key.endswith("_ns") else num
    change = f"+{shown(delta)}" + (f", +{100.0 * delta / va:.1f}%" if pct and va else "")
    limit = f"+{value:g}%" if pct else f"+{shown(value)}"
    return f"{metric}: {shown(va)} -> {shown(vb)} ({change}, limit {limit})"


def _time_gate(d: TraceDiff, metric: str, value: float) -> str | None:
    c = next((c for c in d.timing if c.metric == TIMES[metric]), None)
    if c is None:
        raise WorkbenchError(f"--fail-if {metric}+{value:g}%", f"{metric} is not timed in both A and B "
                                                               "(nothing to gate)")
    if not c.interval:
        raise WorkbenchError(f"--fail-if {metric}+{value:g}%", f"{metric} has too few samples to gate on "
                                                               f"({c.verdict})")
    if not (c.ci_low > 1.0 and c.ratio > 1.0 + value / 100.0):
        return None
    return (f"{metric}: {ms(c.a_median)} ms -> {ms(c.b_median)} ms, {c.ratio:.3f}x ({CONFIDENCE:.0%} CI "
            f"{c.ci_low:.3f}-{c.ci_high:.3f}x; limit +{value:g}%)")
