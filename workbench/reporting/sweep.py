"""A sweep's points (read by :mod:`workbench.analysis.sweeps`, which lists the accepted
shapes) as a report's rows: one per (metric, series, context length).

* a series: its label when a point gives one (``series``, ``label``, ``mode``, ``cache``); otherwise the variant keys,
  engine and backend that differ between points (``cache_rows=bucketed engine=eager``);
* values: every metric of a point (:func:`~workbench.analysis.sweeps.metrics`);
* a point that was not run is listed with its reason.

Points of live_campaign groups that are no sweep (one context length), and series measured
at a single context length, are left out of the sweep (and named in a note).
"""

from __future__ import annotations

from ..analysis.sweeps import CONTEXT, SERIES, Point, Sweep, metrics, swept_groups, varying
from ..errors import WorkbenchError

_DIMS = ("engine", "backend")


def _dims(p: Point) -> dict:
    d = {}
    v = p.variant
    if isinstance(v, dict):
        d.update({str(k): v[k] for k in v if k not in CONTEXT and isinstance(v[k], (str, int, float, bool))})
    elif isinstance(v, (str, int, float)):
        d["variant"] = v
    for k in _DIMS:
        if isinstance(p.fields.get(k), (str, int, float)):
            d[k] = p.fields[k]
    return d


def _explicit(p: Point) -> str | None:
    return next((str(p.fields[k]) for k in SERIES if isinstance(p.fields.get(k), (str, int, float))), None)


def _name(p: Point) -> str | None:
    return p.fields.get("name") or p.fields.get("trace") or _explicit(p)


def _families(points: list[Point], meta: dict) -> tuple[list[Point], dict]:
    """Points that carry a ``group`` (live_campaign: ``fusion``, ``cache-ctx512``, ...): the
    groups that make a sweep (:func:`~workbench.analysis.sweeps.swept_groups`) are kept and
    the others named, unless none or all do."""
    if not points or not all(isinstance(p.fields.get("group"), str) for p in points):
        return points, meta
    groups = {p.fields["group"] for p in points}
    swept = swept_groups((p.fields["group"], p.context) for p in points)
    if not swept or swept == groups:
        return points, meta
    return [p for p in points if p.fields["group"] in swept], {**meta, "left_out_groups": sorted(groups - swept)}


def normalize(sweep: Sweep, where) -> tuple[list[dict], dict, list[str]]:
    """``(rows, meta, not_run)``: rows sorted by (metric, series, context); ``meta`` gains
    ``left_out`` (series at a single context length), ``left_out_groups`` and ``engines``."""
    problems = [(i, "is not an object") for i in sweep.not_objects] + [
        (p.index, f"has no context length (one of {', '.join(CONTEXT)}, on the point or in its variant)")
        for p in sweep.points if p.not_run is None and p.context is None]
    if problems:
        i, problem = min(problems)
        raise WorkbenchError(where, f"sweep point {i} {problem}")
    points, not_run = [], []
    for p in sweep.points:
        if p.not_run is None:
            points.append(p)
        else:
            not_run.append(f"{_name(p) or 'point ' + str(p.index)}"
                           f"{' at context ' + str(p.context) if p.context is not None else ''}: {p.not_run}")
    points, meta = _families(points, sweep.meta)
    explicit = any(_explicit(p) is not None for p in points)

    def label(kept: list[Point]) -> list[str]:
        if explicit:
            return [_explicit(p) or "all" for p in kept]
        dims = [_dims(p) for p in kept]
        keys = sorted(varying(dims))
        return [" ".join(f"{k}={d.get(k, '–')}" for k in keys) or "all" for d in dims]

    # A series needs two context lengths to be a line: points of single-context series are
    # named in meta["left_out"], and the rest relabelled by what varies among them alone.
    first = label(points)
    contexts: dict[str, set] = {}
    for p, s in zip(points, first):
        if metrics(p):
            contexts.setdefault(s, set()).add(p.context)
    if any(len(c) > 1 for c in contexts.values()):
        left = sorted(s for s, c in contexts.items() if len(c) < 2)
        if left:
            meta = {**meta, "left_out": left}
            points = [p for p, s in zip(points, first) if s not in left]
    rows: list[dict] = []
    for p, series in zip(points, label(points)):
        vals = metrics(p)
        if not vals:
            not_run.append(f"{_name(p) or series} at context {p.context}: no timing recorded")
        for metric, (unit, st) in vals.items():
            rows.append({"series": series, "context": p.context, "metric": metric, "unit": unit,
                         "median": st.median, "min": st.lo, "max": st.hi, "n": st.n})
    meta = {**meta, "engines": sorted({str(p.fields["engine"]) for p in points if isinstance(p.fields.get("engine"), str)})}
    uniq = {(r["metric"], r["series"], r["context"]): r for r in rows}  # a later duplicate wins
    rows = [uniq[k] for k in sorted(uniq, key=lambda k: (k[0], k[1], float(k[2])))]
    return rows, meta, sorted(set(not_run))
