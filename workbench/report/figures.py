"""The report's figures, made by :mod:`workbench.viz` (same kernel colours as the notebooks).

Returns ``[(title, figure)]`` in a fixed order. Which figures: per-layer kernel counts and GPU
time of the ranges that changed (at most ``MAX_RANGES`` of them, largest time change first),
the kernel timeline of the first changed range instance in base and fix, launches per step of
every trace, the range composition by kernel, and, with a sweep, latency against context
length (one figure per timed phase). A figure left out comes as ``(title, reason)``.
"""

from __future__ import annotations

import html
import re

MAX_RANGES = 4
# analysis.launches_per_step (behind viz.launches_per_step) scans every kernel once per step:
# above this many steps the figure is left out (the results table still gives median, min-max).
MAX_STEPS_FIGURE = 64


def _ranked(d, names: list[str]) -> list[str]:
    r = d.ranges[d.ranges["name"].astype(str).isin(names)]
    if not len(r):
        return []
    g = r.groupby(r["name"].astype(str), sort=True)[["delta_gpu_time_ns", "delta_kernels"]].sum()
    order = sorted(g.index, key=lambda n: (-abs(float(g.loc[n, "delta_gpu_time_ns"])), n))
    return order[:MAX_RANGES]


def _first_changed_key(d, names: list[str]) -> str | None:
    """The range key to show as a timeline: the first whose kernel sequence changed, else the one
    whose GPU time moved most."""
    r = d.ranges[(d.ranges["status"] == "both") & d.ranges["name"].astype(str).isin(names)]
    keys = sorted(k for k in r["range"].astype(str)
                  if (al := d.alignments.get(k)) is not None and (al.removed or al.added))
    if keys:
        return keys[0]
    if not len(r):
        return None
    best = max(r.itertuples(index=False), key=lambda x: (abs(float(x.delta_gpu_time_ns)), str(x.range)))
    return str(best.range)


def _steps(trace) -> int:
    from ..analysis.diff import STEP_REGEX

    r = trace.ranges
    if not len(r):
        return 0
    rx = re.compile(STEP_REGEX)
    return sum(1 for n in r.loc[r["depth"] == 0, "name"].astype(str) if rx.search(n))


def build(inputs, d, names: list[str], sweep=None) -> list[tuple[str, object]]:
    from .. import viz

    figs: list[tuple[str, object]] = []
    ranked = _ranked(d, names)
    layered = set(d.layers.loc[d.layers["layer"] >= 0, "range"].astype(str))
    for name in ranked:
        if name not in layered:
            continue
        sub = d.ranges[d.ranges["name"].astype(str) == name]
        if (sub["kernels_a"] != sub["kernels_b"]).any():
            figs.append((f"Kernels per step per layer: {name}", viz.layer_counts(d, range=name)))
        figs.append((f"GPU time per step per layer: {name}", viz.layer_time(d, range=name)))
    if not ranked and len(d.layers):
        figs.append(("Kernels per step per layer (all ranges)", viz.layer_counts(d)))
        figs.append(("GPU time per step per layer (all ranges)", viz.layer_time(d)))
    key = _first_changed_key(d, names) if names else None
    if key is not None:
        base, fix = inputs[0], inputs[1]
        try:
            fa = viz.timeline(base.trace, key)
            fb = viz.timeline(fix.trace, key)
        except Exception:  # a range the window selector cannot find: skip the timeline, keep the report
            fa = fb = None
        if fa is not None:
            figs.append((f"Kernel timeline of {key} (base)", fa))
            figs.append((f"Kernel timeline of {key} (fix)", fb))
    labelled = {f"{i.role}: {i.name}": i.trace for i in inputs}
    steps = max(_steps(i.trace) for i in inputs)
    if steps <= MAX_STEPS_FIGURE:
        figs.append(("Kernel launches per step", viz.launches_per_step(labelled)))
    else:
        figs.append(("Kernel launches per step", f"figure left out: {steps} steps in one trace (more than "
                                                 f"{MAX_STEPS_FIGURE}); the results table gives median and min–max "
                                                 "over steps"))
    figs.append(("Range composition by kernel (GPU time per step)",
                 viz.range_composition({f"{i.role}: {i.name}": i.trace for i in inputs[:2]}, metric="gpu_time")))
    if sweep is not None:
        for metric in sweep.metrics:
            rows = [{"context": r["context"], "median_ms": r["median"], "min_ms": r["min"], "max_ms": r["max"],
                     "variant": r["series"]} for r in sweep.rows if r["metric"] == metric]
            unit = next(r.get("unit", "ms") for r in sweep.rows if r["metric"] == metric)
            raw = metric.replace("_", " ")
            label = html.escape(raw, quote=False)  # plotly renders a subset of HTML in titles
            figs.append((f"{raw} vs context length",
                         viz.sweep(rows, x="context", y="median_ms", color="variant", lo="min_ms", hi="max_ms",
                                   title=f"{label} vs context length (median, min–max)",
                                   x_title="context length (tokens)", y_title=f"{label} ({unit})")))
    return figs
