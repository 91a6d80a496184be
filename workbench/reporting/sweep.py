"""Normalize a sweep results file (latency against context length, per variant) into rows.

Accepted shapes, so results written by ``benchmarks/live_campaign.py`` or by hand both work:

* a list of points, or an object holding one under ``points``, ``results``, ``captures``,
  ``rows``, ``runs`` or ``sweep``; a point's ``measured`` object (live_campaign) is merged in;
* a context length: ``ctx``, ``context``, ``context_len``, ``context_length``, ``seq_len``,
  ``prompt_len`` — on the point or in its ``variant``;
* a series: ``series``, ``label``, ``mode`` or ``cache`` when given; otherwise the variant keys,
  engine and backend that differ between points (``cache_rows=bucketed engine=eager``);
* values: ``<phase>_ms`` (``<phase>_ms_per_repeat`` preferred: the run-to-run spread) and
  ``<metric>_us[_per_layer]``, each a number or ``{median|mean, min, max, n}``, on the point or
  under ``timing``;
* a point with an ``error``, ``skipped`` or ``not_run`` (or a ``status`` other than ok) is
  listed as not run, with its reason.

Series measured at a single context length are left out of the sweep (and named in a note).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import WorkbenchError
from ..textfmt import MICRO

_LISTS = ("points", "results", "captures", "rows", "runs", "sweep", "data")
_CTX = ("ctx", "context", "context_len", "context_length", "seq_len", "prompt_len")
_SERIES = ("series", "label", "mode", "cache")
_DIMS = ("engine", "backend")


def _points(doc: Any, where) -> tuple[list, dict]:
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict):
        for k in _LISTS:
            if isinstance(doc.get(k), list):
                return doc[k], {kk: v for kk, v in doc.items() if kk != k}
    raise WorkbenchError(where, "sweep results: expected a list of points or an object with a 'points'/'results' list")


def _flatten(p: dict) -> dict:
    m = p.get("measured")
    if isinstance(m, dict):
        p = {**m, **{k: v for k, v in p.items() if k != "measured"}}
    return p


def _number(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)) and math.isfinite(float(v)):
        return float(v)
    return None


def _ctx(p: dict):
    for src in (p, p.get("variant") if isinstance(p.get("variant"), dict) else {}):
        for k in _CTX:
            if _number(src.get(k)) is not None:
                x = float(src[k])
                return int(x) if x.is_integer() else x
    return None


def _dims(p: dict) -> dict:
    d = {}
    v = p.get("variant")
    if isinstance(v, dict):
        d.update({str(k): v[k] for k in v if k not in _CTX and isinstance(v[k], (str, int, float, bool))})
    elif isinstance(v, (str, int, float)):
        d["variant"] = v
    for k in _DIMS:
        if isinstance(p.get(k), (str, int, float)):
            d[k] = p[k]
    return d


def _stat(v) -> dict | None:
    x = _number(v)
    if x is not None:
        return {"median": x, "min": x, "max": x, "n": None}
    if isinstance(v, dict):
        mid = _number(v.get("median"))
        if mid is None:
            mid = _number(v.get("mean"))
        if mid is None:
            return None
        lo, hi = _number(v.get("min")), _number(v.get("max"))
        n = v.get("n")
        return {"median": mid, "min": mid if lo is None else lo, "max": mid if hi is None else hi,
                "n": int(n) if isinstance(n, int) and not isinstance(n, bool) else None}
    return None


def _skip_reason(p: dict) -> str | None:
    status = p.get("status")
    if isinstance(status, str) and status.lower() not in ("ok", "done", "passed", "success"):
        return str(p.get("reason") or p.get("error") or status)
    for k in ("error", "skipped", "not_run"):
        v = p.get(k)
        if v:
            return str(p.get("reason") or k) if isinstance(v, bool) else str(v)
    return None


def _values(p: dict) -> dict[str, tuple[str, dict]]:
    """metric -> (unit, stat) of one point."""
    out: dict[str, tuple[str, dict]] = {}
    srcs = [p] + ([p["timing"]] if isinstance(p.get("timing"), dict) else [])
    for src in srcs:
        for k in sorted(src, key=str):
            if not isinstance(k, str):
                continue
            st = _stat(src[k])
            if st is None:
                continue
            if k.endswith("_ms_per_repeat"):
                out[k[: -len("_ms_per_repeat")]] = ("ms", st)  # preferred: min-max over runs
            elif k.endswith("_ms") and k[:-3] not in out:
                out[k[:-3]] = ("ms", st)
            elif k.endswith("_us_per_layer"):
                out[k.replace("_us_per_layer", "_per_layer")] = (MICRO, st)
            elif k.endswith("_us"):
                out[k[:-3]] = (MICRO, st)
    return out


def _families(points: list, meta: dict) -> tuple[list, dict]:
    """Points that carry a ``group`` (live_campaign: ``fusion``, ``cache-ctx512``, ...): a
    family of groups whose names differ only in numbers (``cache-ctx#``) and that spans two or
    more context lengths is the sweep; points of other groups are left out and named."""
    if not points or not all(isinstance(p.get("group"), str) for p, _, _ in points):
        return points, meta
    fam = [re.sub(r"\d+", "#", p["group"]) for p, _, _ in points]
    spans: dict[str, set] = {}
    for f, (_, ctx, _) in zip(fam, points):
        spans.setdefault(f, set()).add(ctx)
    sweeps = {f for f, c in spans.items() if len(c) > 1}
    if not sweeps or len(sweeps) == len(spans):
        return points, meta
    left = sorted({p["group"] for (p, _, _), f in zip(points, fam) if f not in sweeps})
    kept = [pt for pt, f in zip(points, fam) if f in sweeps]
    return kept, {**meta, "left_out_groups": left}


def normalize(doc: Any, where) -> tuple[list[dict], dict, list[str]]:
    """``(rows, meta, not_run)``: rows sorted by (metric, series, context); ``meta`` gains
    ``left_out`` (series at a single context length)."""
    raw, meta = _points(doc, where)
    points, not_run = [], []
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise WorkbenchError(where, f"sweep point {i} is not an object")
        p = _flatten(p)
        reason = _skip_reason(p)
        ctx = _ctx(p)
        name = p.get("name") or p.get("trace") or next(
            (str(p[k]) for k in _SERIES if isinstance(p.get(k), (str, int, float))), None)
        if reason is not None:
            not_run.append(f"{name or 'point ' + str(i)}"
                           f"{' at context ' + str(ctx) if ctx is not None else ''}: {reason}")
            continue
        if ctx is None:
            raise WorkbenchError(where, f"sweep point {i} has no context length (one of {', '.join(_CTX)}, "
                                        "on the point or in its variant)")
        points.append((p, ctx, name))
    points, meta = _families(points, meta)
    explicit = any(isinstance(p.get(k), (str, int, float)) for p, _, _ in points for k in _SERIES)

    def label(kept: list) -> list[str]:
        if explicit:
            return [next((str(p[k]) for k in _SERIES if isinstance(p.get(k), (str, int, float))), "all")
                    for p, _, _ in kept]
        dims = [_dims(p) for p, _, _ in kept]
        varying = sorted({k for d in dims for k in d if len({str(x.get(k)) for x in dims}) > 1})
        return [" ".join(f"{k}={d.get(k, '–')}" for k in varying) or "all" for d in dims]

    # A series needs two context lengths to be a line: points of single-context series are
    # named in meta["left_out"], and the rest relabelled by what varies among them alone.
    first = label(points)
    contexts: dict[str, set] = {}
    for (p, ctx, _), s in zip(points, first):
        if _values(p):
            contexts.setdefault(s, set()).add(ctx)
    if any(len(c) > 1 for c in contexts.values()):
        left = sorted(s for s, c in contexts.items() if len(c) < 2)
        if left:
            meta = {**meta, "left_out": left}
            points = [pt for pt, s in zip(points, first) if s not in left]
    rows: list[dict] = []
    for (p, ctx, name), series in zip(points, label(points)):
        vals = _values(p)
        if not vals:
            not_run.append(f"{name or series} at context {ctx}: no timing recorded")
        for metric, (unit, st) in vals.items():
            rows.append({"series": series, "context": ctx, "metric": metric, "unit": unit, **st})
    meta = {**meta, "engines": sorted({str(p["engine"]) for p, _, _ in points if isinstance(p.get("engine"), str)})}
    uniq = {(r["metric"], r["series"], r["context"]): r for r in rows}  # a later duplicate wins
    rows = [uniq[k] for k in sorted(uniq, key=lambda k: (k[0], k[1], float(k[2])))]
    return rows, meta, sorted(set(not_run))
