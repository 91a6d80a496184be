"""The report's figures, made by :mod:`workbench.viz` (same kernel colours as the notebooks).

Returns ``[(section, caption, figure)]`` in a fixed order, ``section`` being the report section
that shows it (``layers``, ``kernels``, ``steps``, ``sweep``). Which figures: per-layer counts
and time of the ranges that changed (at most ``MAX_RANGES`` of them, largest time change first),
the timeline of the first changed range instance in base and fix, launches per step of every
trace, the range composition, and, with a sweep, latency against context length (one figure per
timed phase). A figure left out comes with the reason in its place. Captions name the work
units as the report does (:mod:`workbench.trace.words`: kernels, or CPU ops for a CPU capture). The figures
take their kernel colours from an assignment of their own (:func:`workbench.viz.colors.color_scope`):
a report's colours do not depend on what its process drew before.
"""

from __future__ import annotations

import html

from ..trace.manifest import lookup
from .tables import metric_rank, ranges_view

MAX_RANGES = 4
# analysis.launches_per_step (behind viz.launches_per_step) scans every kernel once per step:
# above this many steps the figure is left out (the results table still gives median, min-max).
MAX_STEPS_FIGURE = 64


def _ranked(d, names: list[str]) -> list[str]:
    r = ranges_view(d)
    r = r[r["name"].astype(str).isin(names)]
    if not len(r):
        return []
    g = r.groupby(r["name"].astype(str), sort=True)[["delta_gpu_time_ns", "delta_kernels"]].sum()
    order = sorted(g.index, key=lambda n: (-abs(float(g.loc[n, "delta_gpu_time_ns"])), n))
    return order[:MAX_RANGES]


def _first_changed_key(d, names: list[str]) -> str | None:
    """The range key to show as a timeline: the first whose kernel sequence changed, else the one
    whose GPU time moved most."""
    r = ranges_view(d)
    r = r[(r["status"] == "both") & r["name"].astype(str).isin(names)]
    keys = sorted(k for k in r["range"].astype(str)
                  if (al := d.alignments.get(k)) is not None and (al.removed or al.added))
    if keys:
        return keys[0]
    if not len(r):
        return None
    best = max(r.itertuples(index=False), key=lambda x: (abs(float(x.delta_gpu_time_ns)), str(x.range)))
    return str(best.range)


def _steps(trace) -> int:
    """Step ranges (at any depth) in the trace."""
    import numpy as np

    from ..analysis.steps import trace_steps

    step = trace_steps(trace)
    return int((step == np.arange(len(step))).sum())


def _parse(series: str) -> dict | None:
    """``"cache_rows=full engine=eager"`` -> dict; None for a free-form series name."""
    parts = [p.partition("=") for p in series.split(" ")]
    return {k: v for k, _, v in parts} if all(sep and k for k, sep, _ in parts) else None


def _facet_key(series: str, primary: set) -> str | None:
    d = _parse(series)
    if d is None:
        return None
    return " ".join(f"{k}={v}" for k, v in sorted(d.items()) if k not in primary)


def _facets(rows: list[dict], primary: set):
    """Sweep series split into one figure per value of what is not compared (e.g. engine), with
    colour = what base and fix differ in: what is not compared (another engine) can move the
    values far more than the change does, and one axis would flatten the smaller ones."""
    parsed = [_parse(r["series"]) for r in rows]
    keys = set().union(*(p for p in parsed if p)) if all(parsed) else set()
    prim = sorted(keys & primary)
    if not prim or not (keys - set(prim)):
        return [(None, lambda s: s)]

    def color_of(series: str) -> str:
        d = _parse(series)
        return " ".join(d[k] for k in prim)

    return [(f, color_of) for f in sorted({_facet_key(r["series"], primary) for r in rows})]


def build(inputs, d, names: list[str], words, sweep=None, primary=()) -> list[tuple[str, str, object]]:
    from ..viz.colors import color_scope

    with color_scope():
        return _build(inputs, d, names, words, sweep, primary)


def _build(inputs, d, names: list[str], words, sweep, primary) -> list[tuple[str, str, object]]:
    from .. import viz

    w = words
    figs: list[tuple[str, str, object]] = []
    ranked = _ranked(d, names)
    layered = set(d.layers.loc[d.layers["layer"] >= 0, "range"].astype(str))
    for name in ranked:
        if name not in layered:
            continue
        sub = d.ranges[d.ranges["name"].astype(str) == name]
        if (sub["kernels_a"] != sub["kernels_b"]).any():
            figs.append(("layers", f"{w.Units} per step per layer: {name}", viz.layer_counts(d, range=name)))
        figs.append(("layers", f"{w.time} per step per layer: {name}", viz.layer_time(d, range=name)))
    if not ranked and len(d.layers):
        figs.append(("layers", f"{w.Units} per step per layer (all ranges)", viz.layer_counts(d)))
        figs.append(("layers", f"{w.time} per step per layer (all ranges)", viz.layer_time(d)))
    key = _first_changed_key(d, names) if names else None
    if key is not None:
        base, fix = inputs[0], inputs[1]
        where = None if key == "(step)" else key  # kernels directly in a step: show a typical step
        try:
            # One kernel colour map for both: the kernels whose count differs stand out.
            fa, fb = viz.timeline_pair((base.trace, fix.trace), where)
        except Exception:  # a range the window selector cannot find: skip the timeline, keep the report
            fa = fb = None
        if fa is not None:
            what = ("a typical decode step" if where is None else
                    f"{key} (its typical instance: a decode step's, of median duration)")
            figs.append(("kernels", f"{w.Unit} timeline of {what}, one row per {w.lane} (base)", fa))
            figs.append(("kernels", f"{w.Unit} timeline of {what}, one row per {w.lane} (fix)", fb))
    labelled = {f"{i.role}: {i.name}": i.trace for i in inputs}
    steps = max(_steps(i.trace) for i in inputs)
    if steps <= MAX_STEPS_FIGURE:
        figs.append(("steps", f"{w.Launches} per step", viz.launches_per_step(labelled)))
    else:
        figs.append(("steps", f"{w.Launches} per step",
                     f"figure left out: {steps} steps in one trace (more than {MAX_STEPS_FIGURE}); the results "
                     "table gives mean and min–max over steps"))
    figs.append(("steps", f"Range composition by {w.unit} ({w.time} per step)",
                 viz.range_composition({f"{i.role}: {i.name}": i.trace for i in inputs[:2]}, metric="gpu_time")))
    if sweep is not None:
        base_values = {str(v) for v in (lookup(inputs[0].meta, "capture", "variant") or {}).values()}
        for metric in sorted(sweep.metrics, key=lambda m: (metric_rank(m), m)):
            rows = [r for r in sweep.rows if r["metric"] == metric]
            unit = rows[0].get("unit", "ms")
            raw = metric.replace("_", " ")
            label = html.escape(raw, quote=False)  # plotly renders a subset of HTML in titles
            for facet, color_of in _facets(rows, set(primary)):
                sub = [r for r in rows if facet is None or _facet_key(r["series"], set(primary)) == facet]
                pts = [{"context": r["context"], "median_ms": r["median"], "min_ms": r["min"], "max_ms": r["max"],
                        "variant": color_of(r["series"])} for r in sub]
                where = f" ({facet})" if facet else ""
                # The base's series first (legend and colour order), then the others by name.
                order = sorted({p["variant"] for p in pts}, key=lambda v: (not set(v.split(" ")) <= base_values, v))
                figs.append(("sweep", f"{raw} vs context length{where}",
                             viz.sweep(pts, x="context", y="median_ms", color="variant", lo="min_ms", hi="max_ms",
                                       title=f"{label} vs context length{html.escape(where, quote=False)} "
                                             "(median, min–max)",
                                       x_title="context length (tokens)", y_title=f"{label} ({unit})",
                                       workload=inputs[0].workload, order=order)))
    return figs
