"""Helpers the notebooks share: where the traces are, which stored trace to use for a case,
and the sweep results when a benchmark has produced them.

Live captures (stored traces whose name does not start with ``ref-`` and that recorded GPU
kernels) are preferred over the committed reference traces (``ref-h200-*``); set
``WORKBENCH_PREFER_LIVE=0`` to use the reference traces only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace.store import MANIFEST, list_traces

REFERENCE_PREFIX = "ref-"


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def traces_root() -> Path:
    """``$WORKBENCH_TRACES``, else ``./traces``, ``../traces`` (a notebook in ``notebooks/``),
    else the ``traces/`` beside the installed package (an editable checkout)."""
    env = os.environ.get("WORKBENCH_TRACES")
    if env:
        return Path(env)
    for cand in (Path("traces"), Path("..") / "traces", _repo_root() / "traces"):
        if cand.is_dir() and list_traces(cand):
            return cand.resolve()
    return Path("traces").resolve()


def _manifest(root: Path, name: str) -> dict:
    try:
        meta = json.loads((root / name / MANIFEST).read_text())
        return meta if isinstance(meta, dict) else {}
    except (OSError, ValueError):
        return {}


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


def _variant_tokens(meta: dict) -> set[str]:
    v = (meta.get("capture") or {}).get("variant") or meta.get("variant") or {}
    out: set[str] = set()
    if isinstance(v, dict):
        for key, val in v.items():  # {"kv_write": "fused"} -> kvwrite, fused
            out |= _tokens(str(val)) | {str(key).replace("_", "").lower()}
    return out


def _is_live(name: str, meta: dict) -> bool:
    if name.startswith(REFERENCE_PREFIX):
        return False
    counts = meta.get("counts") or {}
    units = (meta.get("source") or {}).get("work_units", "kernel")
    return int(counts.get("kernels", 0) or 0) > 0 and units == "kernel"


def find_trace(*tokens: str, root=None, prefer_live: bool | None = None, exclude: tuple[str, ...] = ()) -> str | None:
    """Name of the stored trace for a case: its name (split at non-alphanumerics) or its
    captured variant holds every token in ``tokens`` and none in ``exclude``.

    ``find_trace("kvwrite", "unfused", "nsys")`` -> ``ref-h200-kvwrite-unfused-nsys`` unless a
    live capture matches. Among several matches the last by name wins (names carry dates or
    counters). None when nothing matches.
    """
    root = Path(root) if root is not None else traces_root()
    if prefer_live is None:
        prefer_live = os.environ.get("WORKBENCH_PREFER_LIVE", "1") != "0"
    want = {t.lower() for t in tokens}
    avoid = {t.lower() for t in exclude}
    live, ref = [], []
    for name in list_traces(root):
        meta = _manifest(root, name)
        have = _tokens(name) | _variant_tokens(meta) | _tokens(str((meta.get("capture") or {}).get("backend", "")))
        if not want <= have or (avoid & have):
            continue
        (live if _is_live(name, meta) else ref).append(name)
    ref = [n for n in ref if n.startswith(REFERENCE_PREFIX)]
    pool = (live or ref) if prefer_live else (ref or live)
    return pool[-1] if pool else None


# --- sweep results ------------------------------------------------------------------------

_X = ("context", "ctx", "context_len", "context_length", "seq_len", "cached")
_VAR = ("variant", "cache_rows", "cache", "mode")
_MED = ("median_ms", "p50_ms", "decode_step_ms", "latency_ms", "median")
_MIN = ("min_ms", "lo_ms", "min")
_MAX = ("max_ms", "hi_ms", "max")


def _first(d: dict, keys):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None


def _record(rec: dict) -> dict | None:
    flat = dict(rec)
    for key in ("variant", "timing", "stats"):  # nested dicts: lift their fields
        if isinstance(flat.get(key), dict):
            inner = flat.pop(key)
            for k, v in inner.items():
                flat.setdefault(k, v)
            if key == "variant" and "cache_rows" in inner:
                flat["variant"] = inner["cache_rows"]
    for k, v in list(flat.items()):  # {"decode_step_ms": {"median": .., "min": .., "max": ..}}
        if isinstance(v, dict) and "median" in v:
            flat.setdefault("median_ms", v["median"])
            flat.setdefault("min_ms", v.get("min"))
            flat.setdefault("max_ms", v.get("max"))
    x, med = _first(flat, _X), _first(flat, _MED)
    if x is None or med is None or isinstance(med, dict):
        return None
    var = _first(flat, _VAR)
    lo, hi = _first(flat, _MIN), _first(flat, _MAX)
    return {"context": int(x), "variant": str(var) if var is not None else "all", "median_ms": float(med),
            "min_ms": float(lo) if isinstance(lo, (int, float)) else float(med),
            "max_ms": float(hi) if isinstance(hi, (int, float)) else float(med)}


def load_sweep(path=None) -> pd.DataFrame | None:
    """The decode-latency sweep (context, variant, median_ms, min_ms, max_ms), from ``path`` or
    ``benchmarks/results/h200_live.json`` beside the traces, or None when there is none.

    Accepts a list of records or an object with ``results``/``rows``/``records``/``sweep``;
    field names are matched loosely (``ctx``/``context``, ``cache_rows``/``variant``,
    ``decode_step_ms: {median, min, max}`` or ``median_ms``/``min_ms``/``max_ms``).
    """
    if path is None:
        cands = [traces_root().parent / "benchmarks" / "results" / "h200_live.json",
                 Path("..") / "benchmarks" / "results" / "h200_live.json",
                 _repo_root() / "benchmarks" / "results" / "h200_live.json"]
        path = next((c for c in cands if c.is_file()), None)
        if path is None:
            return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if isinstance(data, dict):
        data = next((data[k] for k in ("results", "rows", "records", "sweep", "runs") if isinstance(data.get(k), list)), [])
    rows = [r for r in (_record(x) for x in data if isinstance(x, dict)) if r is not None]
    if not rows:
        return None
    return pd.DataFrame(rows).sort_values(["variant", "context"], kind="stable").reset_index(drop=True)


def step_times(trace, label: str | None = None) -> dict:
    """GPU time per step of a trace as a sweep-like record (median/min/max over its steps, ms)."""
    from ..analysis.tables import launches_per_step

    df = launches_per_step(trace)
    ms = df["gpu_time_ns"].to_numpy(dtype=float) / 1e6 if len(df) else np.array([np.nan])
    return {"variant": label or trace.label, "median_ms": float(np.median(ms)), "min_ms": float(ms.min()),
            "max_ms": float(ms.max()), "steps": int(len(df))}
