"""When a timing difference is real: the ratio of two sample sets' medians, its confidence
interval and a verdict.

The interval is a **percentile bootstrap of the ratio of medians** (B / A): both sample sets are
resampled with replacement ``resamples`` times, the ratio of the resampled medians taken each
time, and its ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles kept. The
resampling is seeded, so the same samples always give the same interval (reports regenerate
byte for byte).

The verdict follows asv's rule (``asv compare --factor``): a change is **significant** only when
the interval excludes 1 *and* the ratio moves by at least ``min_effect`` (default 10%), because
samples of one capture come from one process and one machine state: a second capture of the
same variant often moves by a few percent however tight each interval is. Otherwise: "no
significant change". Lower is better for times (``faster`` when B's median is lower).

The samples to compare, per timed phase, are each trace's recorded samples
(:func:`timed_samples`), from an interleaved ``workbench bench --store`` (``timing_bench``) where
the manifest holds one, else from the capture (``timing``; ``trace.manifest.recorded_timing``): per run
where kept (``decode_step_ms_per_repeat``: each repetition's mean step, the unit that varies run
to run), else per step or per call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..trace.manifest import recorded_timing

RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_EFFECT = 0.10
_SEED = 20261201

# Timed phases a capture records (manifest ``timing``): metric -> the keys holding its samples,
# the first present wins.
PHASE_SAMPLES = {
    "decode_step_ms": ("decode_step_ms_per_repeat", "decode_step_ms"),
    "prefill_ms": ("prefill_ms",),
    "call_ms": ("call_ms",),
}


@dataclass(frozen=True)
class Comparison:
    """B against A for one metric. ``ratio`` = B median / A median; ``verdict`` is
    ``faster`` / ``slower`` (B against A, lower is better) or ``no significant change``."""

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

    def describe(self, unit: str = "ms") -> str:
        """``3.71 ms -> 0.48 ms (0.13x, 95% CI 0.12-0.13x): faster``."""
        return (f"{self.a_median:.4g} {unit} -> {self.b_median:.4g} {unit} ({self.ratio:.3g}x, "
                f"{CONFIDENCE:.0%} CI {self.ci_low:.3g}-{self.ci_high:.3g}x): {self.verdict}")


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
    rng = np.random.default_rng(_SEED)
    # Medians of resampled sets, vectorized: one (resamples, n) draw per side.
    ra = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rb / ra
    tail = (1.0 - confidence) / 2.0
    low, high = (float(x) for x in np.quantile(ratios, [tail, 1.0 - tail]))
    significant = (high < 1.0 or low > 1.0) and abs(ratio - 1.0) >= min_effect
    verdict = ("faster" if ratio < 1.0 else "slower") if significant else "no significant change"
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
