"""When a timing difference is real: the ratio of two sample sets' medians, its confidence
interval and a verdict. The one home of these rules: the diff, the report, the notebooks, the
gates and any timing worked out from a trace compare through :func:`compare_samples` and word the
result through :meth:`Comparison.describe` / :func:`change_text`.

The interval is a **percentile bootstrap of the ratio of medians** (B / A): both sample sets are
resampled with replacement ``resamples`` times, the ratio of the resampled medians taken each
time, and its ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles kept. The
resampling is seeded, so the same samples always give the same interval (reports regenerate
byte for byte).

**Enough samples.** An interval (and so a verdict) needs :data:`MIN_SAMPLES` samples on *each*
side. A resampled median takes only the observed values; with ``n`` samples it equals the
smallest one with probability ``P(more than half the draws are the minimum)``: 1 for n = 1 (the
interval is a point), 0.25 for 2, 0.26 for 3, 0.05 for 4, 0.058 for 5, 0.009 for 6. Above the
2.5% tail the 95% interval's ends are simply the smallest and largest sample, an interval that
says no more than the min–max; n = 6 is the first n below it. With fewer the comparison keeps
the medians and the ratio and says ``n = 1: no interval``.

**Verdicts** (lower is better: B against A), following asv's rule (``asv compare --factor``):

- ``faster`` / ``slower``: the interval excludes 1 *and* the ratio moves by at least
  ``min_effect`` (default 10%), because samples of one capture come from one process and one
  machine state: a second capture of the same variant often moves by a few percent however tight
  each interval is;
- ``changed by less than the 10% threshold``: the interval excludes 1, the ratio moves by less
  (a measured +8% with interval 1.06–1.10 is this, not "no change");
- ``no evidence of a change``: the interval holds 1.

The samples to compare, per timed phase, are each trace's recorded samples
(:func:`timed_samples`), from an interleaved ``workbench bench --store`` (``timing_bench``) where
the manifest holds one, else from the capture (``timing``; ``trace.manifest.recorded_timing``): per run
where kept (``decode_step_ms_per_repeat``: each repetition's mean step, the unit that varies run
to run), else per step or per call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .. import textfmt as fmt
from ..trace.display import ascii_text, page_html
from ..trace.manifest import recorded_timing

RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_EFFECT = 0.10
MIN_SAMPLES = 6  # per side; see the module docstring
_SEED = 20261201

FASTER, SLOWER, NO_EVIDENCE = "faster", "slower", "no evidence of a change"


def below_threshold(min_effect: float = MIN_EFFECT) -> str:
    """The verdict of a change the interval shows but smaller than the threshold."""
    return f"changed by less than the {min_effect:.0%} threshold"


def too_few(n_a: int, n_b: int) -> str:
    """The verdict where a side has fewer than :data:`MIN_SAMPLES`: ``n = 1: no interval``."""
    n = f"{n_a}" if n_a == n_b else f"{n_a} vs {n_b}"
    return f"n = {n}: no interval"

# Timed phases a capture records (manifest ``timing``): metric -> the keys holding its samples,
# the first present wins.
PHASE_SAMPLES = {
    "decode_step_ms": ("decode_step_ms_per_repeat", "decode_step_ms"),
    "prefill_ms": ("prefill_ms",),
    "call_ms": ("call_ms",),
}


@dataclass(frozen=True)
class Comparison:
    """B against A for one metric. ``ratio`` = B median / A median; ``verdict`` one of the
    module docstring's (``faster``, ``slower``, ``changed by less than the 10% threshold``, ``no
    evidence of a change``, ``n = 1: no interval``); ``ci_low``/``ci_high`` are NaN where a side has
    too few samples (``interval`` is False)."""

    metric: str
    a_median: float
    b_median: float
    ratio: float
    ci_low: float
    ci_high: float
    significant: bool
    verdict: str
    n_a: int
    n_b: int
    method: str = "bootstrap of the ratio of medians"

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def interval(self) -> bool:
        return bool(np.isfinite(self.ci_low) and np.isfinite(self.ci_high))

    @property
    def phase(self) -> str:
        """What was timed, in words: ``decode_step_ms`` -> ``decode step``."""
        return self.metric.removesuffix("_ms").replace("_", " ")

    def line(self) -> str:
        """``decode step: 3.699 → 4.634 ms, 1.25x (95% CI 1.20–1.27x): slower`` (medians, B against A)."""
        ms_ = self.metric.endswith("_ms")
        a, b = (fmt.ms(x) if ms_ else fmt.num(x) for x in (self.a_median, self.b_median))
        return f"{self.phase}: {a} \u2192 {b}{' ms' if ms_ else ''}, {change_text(self, dash=chr(0x2013))}"

    def _repr_html_(self) -> str:
        return page_html(self.line(), [f"medians of {self.n_a} (A) and {self.n_b} (B) samples; ratio B/A, {self.method}"])

    def __repr__(self) -> str:
        return ascii_text(self.line())  # one line: a diff's ``timing`` is a list of these

    def describe(self, unit: str = "ms") -> str:
        """``3.71 ms -> 0.48 ms, 0.130x (95% CI 0.124-0.135x): faster``."""
        return f"{self.a_median:.4g} {unit} -> {self.b_median:.4g} {unit}, {change_text(self)}"


def _decimals(*xs: float) -> int:
    """Decimals (2 at least, more for ratios below 0.1) that print the ratio and its interval's
    ends apart where they differ, and apart from 1: 0.667 (0.664-0.671), never a zero-width 0.67
    (0.67-0.67)."""
    xs = [x for x in xs if np.isfinite(x)]
    low = min((abs(x) for x in xs if x), default=1.0)
    d = 2 + max(0, int(-np.floor(np.log10(low))) - 1) if low < 1 else 2
    # An end that is not 1 must not print as 1 either: "1.00-1.08" reads as holding 1.
    while d < 8 and (len({f"{x:.{d}f}" for x in xs}) < len(set(xs))
                     or any(x != 1 and f"{x:.{d}f}" == f"{1:.{d}f}" for x in xs)):
        d += 1
    return d


def change_text(c: Comparison, dash: str = "-", x: str = "x") -> str:
    """``0.667x (95% CI 0.664-0.671x): faster`` (``x`` after the interval: ``x`` or nothing), or
    ``0.86x (n = 1: no interval)``."""
    if not c.interval:
        return f"{c.ratio:.{_decimals(c.ratio)}f}x ({c.verdict})" if np.isfinite(c.ratio) else f"n/a ({c.verdict})"
    d = _decimals(c.ratio, c.ci_low, c.ci_high)
    return f"{c.ratio:.{d}f}x ({CONFIDENCE:.0%} CI {c.ci_low:.{d}f}{dash}{c.ci_high:.{d}f}{x}): {c.verdict}"


def compare_samples(metric: str, a, b, *, confidence: float = CONFIDENCE, min_effect: float = MIN_EFFECT,
                    resamples: int = RESAMPLES) -> Comparison:
    """Compare two sample sets of a lower-is-better metric (see the module docstring)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not len(a) or not len(b):
        raise ValueError(f"{metric}: no samples to compare")
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = mb / ma if ma > 0 else float("inf")
    if min(len(a), len(b)) < MIN_SAMPLES:
        nan = float("nan")
        return Comparison(metric, ma, mb, ratio, nan, nan, False, too_few(len(a), len(b)), len(a), len(b))
    rng = np.random.default_rng(_SEED)
    # Medians of resampled sets, vectorized: one (resamples, n) draw per side.
    ra = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rb / ra
    tail = (1.0 - confidence) / 2.0
    low, high = (float(x) for x in np.quantile(ratios, [tail, 1.0 - tail]))
    excludes_one = high < 1.0 or low > 1.0
    significant = excludes_one and abs(ratio - 1.0) >= min_effect
    verdict = ((FASTER if ratio < 1.0 else SLOWER) if significant
               else below_threshold(min_effect) if excludes_one else NO_EVIDENCE)
    return Comparison(metric, ma, mb, ratio, low, high, bool(significant), verdict, len(a), len(b))


def timed_samples(meta: dict, metric: str) -> list[float] | None:
    """The samples a capture recorded for ``metric`` (a key of :data:`PHASE_SAMPLES`), or None."""
    timing = recorded_timing(meta)[1]
    for key in PHASE_SAMPLES.get(metric, (metric,)):
        s = timing.get(key)
        if isinstance(s, dict) and isinstance(s.get("samples"), list) and s["samples"]:
            return [float(x) for x in s["samples"]]
    return None


def compare_timing(meta_a: dict, meta_b: dict, **options) -> list[Comparison]:
    """Every timed phase both captures recorded, compared (decode step, prefill, call)."""
    out = []
    for metric in PHASE_SAMPLES:
        a, b = timed_samples(meta_a, metric), timed_samples(meta_b, metric)
        if a and b:
            out.append(compare_samples(metric, a, b, **options))
    return out
