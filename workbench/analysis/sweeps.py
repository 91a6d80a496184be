"""Sweep results (latency against context length, per variant) read into points: the one
reader of the files ``benchmarks/live_campaign.py`` writes and of hand-written ones, for the
figures (``viz.load_sweep``) and the reports (``reporting.sweep``).

Accepted shapes:

* a list of points, or an object holding one under ``points``, ``results``, ``captures``,
  ``rows``, ``records``, ``runs``, ``sweep`` or ``data`` (the first of these that is a list;
  the object's other keys are the sweep's ``meta``); a point's ``measured`` object
  (live_campaign) is merged into it, the point's own keys winning;
* a context length: ``ctx``, ``context``, ``context_len``, ``context_length``, ``seq_len``,
  ``prompt_len`` or ``cached``, a number (or one written as text) on the point, else in its
  ``variant``, ``timing`` or ``stats`` object;
* a variant: an object of settings (``{"cache_rows": "full", "ctx": 512}``) or a label; a
  series label: ``series``, ``label``, ``mode`` or ``cache``;
* timed values: any field that is a number or ``{median|mean, min, max, n}``, on the point,
  else under ``timing`` or ``stats``;
* a point with an ``error``, ``skipped`` or ``not_run`` (or a ``status`` other than ok) is
  not run, with its reason.

What the values mean is read two ways, both here: :func:`metrics` (every ``<phase>_ms`` and
``<metric>_us`` of a point, for a report's tables) and :func:`latency` (the one value a figure
draws per point). How series are labelled is each caller's; :func:`varying` and
:func:`swept_groups` are the rules they share.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import WorkbenchError
from ..textfmt import MICRO

LISTS = ("points", "results", "captures", "rows", "records", "runs", "sweep", "data")
# A series label written out on a point (else callers label points by their variant).
SERIES = ("series", "label", "mode", "cache")
CONTEXT = ("ctx", "context", "context_len", "context_length", "seq_len", "prompt_len", "cached")
# A point's headline latency, best first (see :func:`latency`), and its spread where given apart.
LATENCY = ("median_ms", "p50_ms", "decode_step_ms", "latency_ms", "median")
_LOW = ("min_ms", "lo_ms", "min")
_HIGH = ("max_ms", "hi_ms", "max")
_NESTED = ("timing", "stats")
_OK = ("ok", "done", "passed", "success")


@dataclass(frozen=True)
class Stat:
    """One timed value: its median (or mean), and min, max and sample count where given."""

    median: float
    min: float | None = None
    max: float | None = None
    n: int | None = None
    summary: bool = False  # written as an object of statistics, not a bare number

    @property
    def lo(self) -> float:
        return self.median if self.min is None else self.min

    @property
    def hi(self) -> float:
        return self.median if self.max is None else self.max


@dataclass(frozen=True)
class Point:
    """One entry of the results list that is an object."""

    index: int  # its place in the list
    fields: dict  # the point as written, its ``measured`` object merged in
    context: int | float | None
    values: dict  # field name -> Stat, in the order written (the point's, then timing's, stats')
    not_run: str | None  # why it was not run; None when it was

    @property
    def variant(self):
        return self.fields.get("variant")


@dataclass(frozen=True)
class Sweep:
    """What :func:`read` found: the points, and the rest of the document."""

    points: list[Point]
    meta: dict  # the document's keys besides the list
    listed_under: str | None  # the key the list was under (None: the document is the list)
    not_objects: list[int]  # places in the list of entries that are no object
    sha256: str | None  # of the file read; None for a document given parsed


def read(source, where=None) -> Sweep:
    """The points of a sweep results file (a path) or of its parsed document (a list or dict).
    A file that is missing, unreadable or not JSON, and a document of no accepted shape, are
    refused (:class:`WorkbenchError` naming ``where``, default the path)."""
    sha = None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        where = path if where is None else where
        raw = _read_bytes(path)
        sha = hashlib.sha256(raw).hexdigest()
        try:
            source = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise WorkbenchError(where, f"sweep results are not valid JSON ({e})") from None
    where = "sweep results" if where is None else where
    entries, meta, key = _listed(source, where)
    points = [_point(i, e) for i, e in enumerate(entries) if isinstance(e, dict)]
    not_objects = [i for i, e in enumerate(entries) if not isinstance(e, dict)]
    return Sweep(points, meta, key, not_objects, sha)


def _read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise WorkbenchError(path, "sweep results must be a JSON file, not a directory")
    if not path.is_file():
        raise WorkbenchError(path, "no such sweep results file")
    try:
        return path.read_bytes()
    except OSError as e:
        raise WorkbenchError(path, f"cannot read the sweep results ({e.strerror or e})") from None


def _listed(doc: Any, where) -> tuple[list, dict, str | None]:
    if isinstance(doc, list):
        return doc, {}, None
    if isinstance(doc, dict):
        for k in LISTS:
            if isinstance(doc.get(k), list):
                return doc[k], {kk: v for kk, v in doc.items() if kk != k}, k
    raise WorkbenchError(where, "sweep results: expected a list of points or an object with a 'points'/'results' list")


def _point(index: int, p: dict) -> Point:
    m = p.get("measured")
    fields = {**m, **{k: v for k, v in p.items() if k != "measured"}} if isinstance(m, dict) else dict(p)
    values: dict[str, Stat] = {}
    for src in (fields, *(fields[k] for k in _NESTED if isinstance(fields.get(k), dict))):
        for k, v in src.items():
            if isinstance(k, str) and k not in values and (st := _stat(v)) is not None:
                values[k] = st
    return Point(index, fields, _context(fields), values, _not_run(fields))


def _number(v) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)):
        return float(v)
    return None


def _context(fields: dict) -> int | float | None:
    srcs = [fields] + [fields[k] for k in ("variant", *_NESTED) if isinstance(fields.get(k), dict)]
    for src in srcs:
        for k in CONTEXT:
            v = src.get(k)
            if isinstance(v, str):  # "512": a context written as text
                try:
                    v = float(v)
                except ValueError:
                    continue
            x = _number(v)
            if x is not None:
                return int(x) if x.is_integer() else x
    return None


def _stat(v) -> Stat | None:
    x = _number(v)
    if x is not None:
        return Stat(x)
    if not isinstance(v, dict):
        return None
    mid = _number(v.get("median"))
    mid = _number(v.get("mean")) if mid is None else mid
    if mid is None:
        return None
    n = v.get("n")
    return Stat(mid, _number(v.get("min")), _number(v.get("max")),
                n if isinstance(n, int) and not isinstance(n, bool) else None, summary=True)


def _not_run(p: dict) -> str | None:
    status = p.get("status")
    if isinstance(status, str) and status.lower() not in _OK:
        return str(p.get("reason") or p.get("error") or status)
    for k in ("error", "skipped", "not_run"):
        v = p.get(k)
        if v:
            return str(p.get("reason") or k) if isinstance(v, bool) else str(v)
    return None


def metrics(point: Point) -> dict[str, tuple[str, Stat]]:
    """metric -> (unit, value) of a point, for a report: ``<phase>_ms`` (``<phase>_ms_per_repeat``
    preferred: the run-to-run spread), ``<metric>_us`` and ``<metric>_us_per_layer``."""
    out: dict[str, tuple[str, Stat]] = {}
    for k in sorted(point.values):
        st = point.values[k]
        if k.endswith("_ms_per_repeat"):
            out[k[: -len("_ms_per_repeat")]] = ("ms", st)
        elif k.endswith("_ms") and k[:-3] not in out:
            out[k[:-3]] = ("ms", st)
        elif k.endswith("_us_per_layer"):
            out[k.replace("_us_per_layer", "_per_layer")] = (MICRO, st)
        elif k.endswith("_us"):
            out[k[:-3]] = (MICRO, st)
    return out


def latency(point: Point) -> Stat | None:
    """The one latency a figure draws for a point (ms): the first of :data:`LATENCY` given
    (live_campaign's ``decode_step_ms``: over every timed step), else the first field that is
    an object of statistics; min and max its own where it has them, else the point's
    ``min_ms``/``lo_ms``/``min`` and ``max_ms``/``hi_ms``/``max``, else the median."""
    v = point.values
    st = next((v[k] for k in LATENCY if k in v), None) or next((s for s in v.values() if s.summary), None)
    if st is None:
        return None
    lo = st.min if st.min is not None else next((v[k].median for k in _LOW if k in v), None)
    hi = st.max if st.max is not None else next((v[k].median for k in _HIGH if k in v), None)
    return Stat(st.median, lo, hi, st.n, st.summary)


def varying(dicts: list[dict], skip=()) -> list[str]:
    """The keys (first seen first, ``skip`` aside) whose values, as text, differ between
    ``dicts``; a key some lack differs where others have it."""
    keys = [k for k in dict.fromkeys(k for d in dicts for k in d) if k not in skip]
    return [k for k in keys if len({str(d.get(k)) for d in dicts}) > 1]


def _family(group: str) -> str:
    return re.sub(r"\d+", "#", group)  # cache-ctx512 -> cache-ctx#


def swept_groups(points) -> set[str]:
    """The groups that make a sweep, from (group, context) pairs: those of a family spanning
    two or more contexts (a family: groups whose names differ only in their numbers, as
    ``cache-ctx512`` and ``cache-ctx2048``); a group measured at one context (a single comparison) is none."""
    points = list(points)
    spans: dict[str, set] = {}
    for group, ctx in points:
        spans.setdefault(_family(group), set()).add(ctx)
    return {g for g, _ in points if len(spans[_family(g)]) > 1}
