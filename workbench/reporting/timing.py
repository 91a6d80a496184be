"""The timed phases of a report: what each capture recorded, and fix (and every extra) against
base as the ratio of medians with its confidence interval and a verdict
(:mod:`workbench.analysis.stats`: base against fix is the diff's ``timing``).

A phase's cell shows the samples the comparison uses, as
:func:`workbench.analysis.stats.timed_samples` chooses them: the timing of a ``workbench bench``
(``timing_bench``: variants interleaved round by round) where one was stored, else the capture's
own; for the decode step, the per-run means where their samples were kept (the unit that varies
run to run), else the per-step times.
"""

from __future__ import annotations

import math
import statistics

from .. import textfmt as fmt
from ..analysis.stats import PHASE_SAMPLES
from ..trace.manifest import recorded_timing

NOT_TIMED = "n/a (not captured with timing)"
NO_SAMPLES = "no samples recorded: no interval, no verdict"
ORDER = ("prefill", "decode step")

# What one sample of each timing key is.
_WHAT = {"prefill_ms": "per run", "decode_step_ms_per_repeat": "mean step per run", "decode_step_ms": "per step"}
# Phase -> (timing key, what one sample is), the first key present wins (the first with samples
# before one without): the keys analysis.stats.PHASE_SAMPLES reads, in its order.
_KEYS = {name: tuple((key, _WHAT[key]) for key in PHASE_SAMPLES[metric])
         for name, metric in (("prefill", "prefill_ms"), ("decode step", "decode_step_ms"))}


def _has(stat) -> bool:
    return isinstance(stat, dict) and "median" in stat


def _sampled(stat) -> bool:
    return _has(stat) and isinstance(stat.get("samples"), list) and bool(stat["samples"])


def recorded(meta: dict) -> dict:
    """The timing a trace's phases are compared from: its bench's, else its capture's ({} for none)."""
    return recorded_timing(meta)[1]


def phases(meta: dict) -> dict[str, dict]:
    """Timed phases of one trace: name -> {median, min, max, n, samples, what, metric}; ``metric``
    is the name :mod:`~workbench.analysis.stats` compares it under (``decode_step_ms``)."""
    t = recorded(meta)
    out = {}
    for name, keys in _KEYS.items():
        present = [(k, what) for k, what in keys if _has(t.get(k))]
        chosen = next(((k, w) for k, w in present if _sampled(t[k])), present[0] if present else None)
        if chosen is not None:
            out[name] = dict(t[chosen[0]], what=chosen[1], metric=keys[-1][0])
    known = {k for keys in _KEYS.values() for k, _ in keys}
    for k in sorted(t):
        if k.endswith("_ms") and k not in known and _has(t[k]):
            out[k[:-3].replace("_", " ")] = dict(t[k], what="", metric=k)
    return out


# What one sample is for a decode step timed from the trace itself.
_FROM_TRACE = "per step, from the trace"


def phases_of(traces: list) -> list[dict[str, dict]]:
    """:func:`phases` of each trace; where none of them recorded a decode step (captures the
    workbench did not time), each one's decode steps timed from the trace itself
    (:func:`workbench.analysis.inferred.timing.step_times`, as the diff compares them), the
    cell saying so. Never mixed: a recorded time is not set against a traced one."""
    out = [phases(t.meta) for t in traces]
    if any("decode step" in p for p in out):
        return out
    from ..analysis.inferred.timing import METRIC, step_times

    for p, t in zip(out, traces):
        st = step_times(t)
        if st is not None and st.samples:
            s = st.samples
            p["decode step"] = {"median": statistics.median(s), "min": min(s), "max": max(s), "n": len(s),
                                "samples": list(s), "what": _FROM_TRACE, "metric": METRIC}
    return out


def names(all_phases: list[dict]) -> list[str]:
    """Every phase any trace timed, prefill and decode step first."""
    return list(ORDER) + sorted({p for ph in all_phases for p in ph} - set(ORDER))


def compare(base: dict, other: dict, known: list | None = None) -> dict:
    """Phase -> :class:`~workbench.analysis.stats.Comparison` of ``other`` against ``base``
    (phase dicts of :func:`phases`) for every phase both sampled; ``known`` (the diff's
    ``timing``) is used where it has the phase's metric."""
    from ..analysis.stats import compare_samples

    given = {c.metric: c for c in known or []}
    out = {}
    for name, a in base.items():
        b = other.get(name)
        if b is None or not (_sampled(a) and _sampled(b)):
            continue
        try:
            out[name] = given.get(a["metric"]) or compare_samples(a["metric"], a["samples"], b["samples"])
        except ValueError:  # no finite sample on a side: shown without an interval
            continue
    return out


def _x(r: float) -> str:
    if not math.isfinite(r):
        return "n/a"
    return f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"


def verdict(c) -> str:
    """``0.667x (95% CI 0.664–0.671): faster``: B / A with its interval and verdict, or
    ``0.86x (n = 1: no interval)`` (:func:`workbench.analysis.stats.change_text`)."""
    from ..analysis.stats import change_text

    return change_text(c, "–", "")


CONFOUNDED = "confounded, no verdict (see the headline)"


def change(a: dict | None, b: dict | None, c, confounded: bool = False) -> str:
    """The change cell of one timed phase: the verdict, else the bare ratio and why no more;
    ``confounded``: the interval without a verdict (``analysis.confounding``)."""
    if c is not None:
        text = verdict(c)
        return text.replace(f": {c.verdict}", f": {CONFOUNDED}") if confounded and c.interval else text
    if not a or not b:
        return "n/a"
    x, y = float(a["median"]), float(b["median"])
    return f"{_x(y / x)}x ({NO_SAMPLES})" if x > 0 else "n/a"


def stat_cell(s: dict | None) -> str:
    if s is None:
        return NOT_TIMED
    mid, lo, hi = float(s["median"]), float(s.get("min", s["median"])), float(s.get("max", s["median"]))
    n = s.get("n")
    what = "step" if str(s.get("what", "")).startswith("per step") else "run"
    runs = f"{n} {what}{'s' if n != 1 else ''}" if isinstance(n, int) else ""
    if s.get("what") == _FROM_TRACE:
        runs += ", from the trace"
    if lo == hi == mid:  # one sample (or all equal): no spread to show
        return f"{fmt.ms(mid)} ms ({runs})" if runs else f"{fmt.ms(mid)} ms"
    return f"{fmt.ms(mid)} ms ({fmt.ms(lo)}–{fmt.ms(hi)}{', ' + runs if runs else ''})"


def method() -> str:
    """The note naming how the change column of a timed phase is worked out."""
    from ..analysis.stats import CONFIDENCE, MIN_EFFECT, MIN_SAMPLES, NO_EVIDENCE, RESAMPLES, below_threshold

    return (f"The change of a timed phase is fix / base of the medians with its {CONFIDENCE:.0%} confidence "
            f"interval: a percentile bootstrap of the ratio of medians ({RESAMPLES} resamples, seeded), given "
            f"{MIN_SAMPLES} samples or more on each side (with fewer the interval's ends are just the smallest and "
            f"largest sample; \"n = 1: no interval\"). Faster or slower when the interval excludes 1 and the "
            f"change is at least {MIN_EFFECT:.0%}; \"{below_threshold()}\" when it excludes 1 by less; "
            f"\"{NO_EVIDENCE}\" when it holds 1.")
