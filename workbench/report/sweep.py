"""Normalize a sweep results file (latency against context length, per variant) into rows.

Accepted shapes, so results written by ``benchmarks/`` scripts or by hand both work:

* a list of points, or an object holding one under ``points``, ``results``, ``rows``, ``runs``
  or ``sweep``;
* each point has a context length (``ctx``, ``context``, ``context_len``, ``context_length``,
  ``seq_len``, ``prompt_len``, ``tokens``), a series name (``series``, ``label``, ``mode``,
  ``cache``, ``variant`` — a mapping becomes ``k=v,...`` — or ``name``) and timed phases: any
  ``<phase>_ms`` key (directly or under ``timing``) holding a number or
  ``{median|mean, min, max, n}``;
* a point with ``skipped``/``error``/``not_run`` (or a ``status`` other than ok) is listed as
  not run, with its reason.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import WorkbenchError

_LISTS = ("points", "results", "rows", "runs", "sweep", "data")
_CTX = ("ctx", "context", "context_len", "context_length", "seq_len", "prompt_len", "tokens", "cached")
_SERIES = ("series", "label", "mode", "cache", "variant", "name")
_SKIP = ("skipped", "error", "not_run", "reason")


def _points(doc: Any, where) -> tuple[list, dict]:
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict):
        for k in _LISTS:
            if isinstance(doc.get(k), list):
                meta = {kk: v for kk, v in doc.items() if kk != k}
                return doc[k], meta
    raise WorkbenchError(where, "sweep results: expected a list of points or an object with a 'points'/'results' list")


def _series(p: dict) -> str:
    for k in _SERIES:
        v = p.get(k)
        if v is None:
            continue
        if isinstance(v, dict):
            return ",".join(f"{kk}={v[kk]}" for kk in sorted(v, key=str))
        return str(v)
    return "all"


def _number(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)) and math.isfinite(float(v)):
        return float(v)
    return None


def _stat(v) -> dict | None:
    x = _number(v)
    if x is not None:
        return {"median": x, "min": x, "max": x, "n": 1}
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
    for k in ("skipped", "not_run", "error"):
        v = p.get(k)
        if v:
            return str(v if not isinstance(v, bool) else (p.get("reason") or k))
    return None


def normalize(doc: Any, where) -> tuple[list[dict], dict, list[str]]:
    """``(rows, meta, not_run)``: rows sorted by (metric, series, context)."""
    points, meta = _points(doc, where)
    rows: list[dict] = []
    not_run: list[str] = []
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise WorkbenchError(where, f"sweep point {i} is not an object")
        series = _series(p)
        ctx = next((p[k] for k in _CTX if _number(p.get(k)) is not None), None)
        reason = _skip_reason(p)
        if reason is not None:
            not_run.append(f"{series} at context {ctx if ctx is not None else '?'}: {reason}")
            continue
        if ctx is None:
            raise WorkbenchError(where, f"sweep point {i} has no context length (one of {', '.join(_CTX)})")
        found = False
        for src in (p, p.get("timing") if isinstance(p.get("timing"), dict) else {}):
            for k in sorted(src):
                if not (isinstance(k, str) and k.endswith("_ms")) or k.endswith("_per_repeat"):
                    continue
                st = _stat(src[k])
                if st is None:
                    continue
                found = True
                rows.append({"series": series, "context": int(ctx) if float(ctx).is_integer() else float(ctx),
                             "metric": k[: -len("_ms")], **st})
        if not found:
            not_run.append(f"{series} at context {ctx}: no timing recorded")
    # One row per (metric, series, context): a later duplicate replaces an earlier one.
    uniq = {(r["metric"], r["series"], r["context"]): r for r in rows}
    rows = [uniq[k] for k in sorted(uniq, key=lambda k: (k[0], k[1], float(k[2])))]
    return rows, meta, sorted(set(not_run))
