"""Helpers the notebooks share: where the traces are, which stored trace to use for a case,
and the sweep results when a benchmark has produced them.

Live captures (stored traces whose name does not start with ``ref-`` and that recorded GPU
kernels) are preferred over the committed reference traces (``ref-h200-*``); set
``WORKBENCH_PREFER_LIVE=0`` to use the reference traces only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .. import settings
from ..trace.schema import work_units
from ..trace.store import MANIFEST, default_root, list_traces
from ..workloads import workload_name

REFERENCE_PREFIX = "ref-"


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def traces_root() -> Path:
    """The trace store a notebook uses (see ``trace.store.default_root``, searching)."""
    return default_root(search=True)


def store_summary(root=None) -> str:
    """One line on the trace store a notebook reads: where it is and what it holds (how many
    live captures and committed references). ``wb.list_traces(root)`` lists them."""
    root = Path(root) if root is not None else traces_root()
    names = list_traces(root)
    live = sum(_is_live(n, _manifest(root, n)) for n in names)
    ref = sum(n.startswith(REFERENCE_PREFIX) for n in names)
    other = len(names) - live - ref
    prefer = "live captures preferred" if _prefer_live(None) and live else "references preferred"
    return (f"trace store {root}: {len(names)} traces ({live} live captures, {ref} {REFERENCE_PREFIX}* references"
            f"{f', {other} other' if other else ''}); {prefer}")


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
    return int(counts.get("kernels", 0) or 0) > 0 and work_units(meta) == "kernel"


def _catalog(root: Path, tokens, exclude) -> tuple[list[tuple[str, set]], list[tuple[str, set]]]:
    """(live, reference) traces whose name or capture (variant values and keys, backend,
    engine) holds every token and none of ``exclude``, each with its name's tokens."""
    want = {t.lower() for t in tokens}
    avoid = {t.lower() for t in exclude}
    live, ref = [], []
    for name in list_traces(root):
        meta = _manifest(root, name)
        cap = meta.get("capture") or {}
        own = _tokens(name)
        have = own | _variant_tokens(meta) | _tokens(str(cap.get("backend", ""))) | _tokens(str(cap.get("engine", "")))
        if not want <= have or (avoid & have):
            continue
        if _is_live(name, meta):
            live.append((name, own))
        elif name.startswith(REFERENCE_PREFIX):
            ref.append((name, own))
    return live, ref


def _prefer_live(prefer_live: bool | None) -> bool:
    if prefer_live is None:
        return settings.flag(settings.PREFER_LIVE)
    return prefer_live


def find_trace(*tokens: str, root=None, prefer_live: bool | None = None, exclude: tuple[str, ...] = (),
               prefer: tuple[str, ...] = ()) -> str | None:
    """Name of the stored trace for a case: its name (split at non-alphanumerics) or its
    captured variant, backend or engine holds every token in ``tokens`` and none in ``exclude``.

    ``find_trace("kvwrite", "unfused", "nsys")`` -> ``ref-h200-kvwrite-unfused-nsys`` unless a
    live capture matches. Among several matches, the one whose *name* holds most of
    ``tokens`` + ``prefer`` wins, then the last by name. None when nothing matches.
    """
    root = Path(root) if root is not None else traces_root()
    live, ref = _catalog(root, tokens, exclude)
    pool = (live or ref) if _prefer_live(prefer_live) else (ref or live)
    if not pool:
        return None
    ranked = {t.lower() for t in tokens} | {t.lower() for t in prefer}
    return max(pool, key=lambda x: (len(ranked & x[1]), len({t.lower() for t in prefer} & x[1]), x[0]))[0]


def find_pair(a: str, b: str, *tokens: str, root=None, prefer_live: bool | None = None,
              exclude: tuple[str, ...] = (), prefer: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """Two stored traces that differ only by ``a`` -> ``b`` in their names (the same capture
    otherwise), both holding ``tokens`` and none of ``exclude``: ``find_pair("unfused",
    "fused", "kvwrite")`` -> (``h200-kvwrite-unfused-eager-nsys``, ``h200-kvwrite-fused-eager-nsys``)
    or the reference pair. Live pairs first (unless ``prefer_live`` is False); among several,
    the one whose names hold most ``prefer`` tokens, then the last by name."""
    root = Path(root) if root is not None else traces_root()
    live, ref = _catalog(root, tokens, exclude)
    names = set(list_traces(root))
    rx = re.compile(rf"(?<![a-z0-9]){re.escape(a.lower())}(?![a-z0-9])")

    def pairs(pool):
        out = []
        for name, own in pool:
            if a.lower() not in own:
                continue
            other = rx.sub(b.lower(), name.lower())
            match = next((n for n in names if n.lower() == other), None)
            if match is not None and match != name:
                out.append((name, match, own))
        return out

    lp, rp = pairs(live), pairs(ref)
    pool = (lp or rp) if _prefer_live(prefer_live) else (rp or lp)
    if not pool:
        return None
    pref = {t.lower() for t in prefer}
    best = max(pool, key=lambda x: (len(pref & x[2]), x[0]))
    return best[0], best[1]


def default_pair(root=None, prefer_live: bool | None = None) -> tuple[str, str] | None:
    """The first stored pair a registered workload names as its default
    (:attr:`workbench.workloads.Presentation.default_pair`), or None."""
    from ..workloads import presentations

    for spec in (p.default_pair for p in presentations()):
        found = spec and find_pair(spec.a, spec.b, *spec.tokens, root=root, prefer_live=prefer_live,
                                   exclude=spec.exclude, prefer=spec.prefer)
        if found:
            return found
    return None


# --- sweep results ------------------------------------------------------------------------

_X = ("context", "ctx", "context_len", "context_length", "seq_len", "cached")
_VAR = ("variant", "series", "mode")
_MED = ("median_ms", "p50_ms", "decode_step_ms", "latency_ms", "median")
_MIN = ("min_ms", "lo_ms", "min")
_MAX = ("max_ms", "hi_ms", "max")


def _first(d: dict, keys):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None


def _labels(variants: list[dict]) -> list[str]:
    """A series label for each variant: the values of the keys that differ between them (the
    context aside), or, where none differ, its first text value ("all" without one)."""
    keys = [k for k in dict.fromkeys(k for v in variants for k in v) if k not in _X]
    varying = [k for k in keys if len({repr(v.get(k)) for v in variants}) > 1]
    if varying:
        return [" ".join(str(v.get(k, "\u2013")) for k in varying) for v in variants]
    return [next((x for k, x in v.items() if k not in _X and isinstance(x, str)), "all") for v in variants]


def _record(rec: dict) -> dict | None:
    """One point of a results list, its nested ``variant`` (a dict) kept aside under
    ``"_variant"`` for :func:`_labels`."""
    flat = dict(rec)
    nested = None
    for key in ("variant", "timing", "stats"):  # nested dicts: lift their fields
        if isinstance(flat.get(key), dict):
            inner = flat.pop(key)
            for k, v in inner.items():
                flat.setdefault(k, v)
            nested = inner if key == "variant" else nested
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
            "max_ms": float(hi) if isinstance(hi, (int, float)) else float(med), "_variant": nested}


def load_sweep(path=None, *, name: str = "h200_live.json") -> pd.DataFrame | None:
    """The decode-latency sweep (context, variant, median_ms, min_ms, max_ms), from ``path`` or
    ``benchmarks/results/<name>`` beside the traces (``name="h200_phi4.json"``: the sweep at
    Phi-4-mini-like size), or None when there is none. A campaign file's frame names, in
    ``attrs["workload"]``, the workload its traces were captured from (what
    :func:`workbench.viz.sweep` colours its series by), and has a column
    ``attention_gpu_us_per_layer`` where its captures measured attention per layer.

    Accepts a list of records or an object with ``results``/``rows``/``records``/``sweep``;
    field names are matched loosely (``ctx``/``context``, ``variant``/``series``/``mode``,
    ``decode_step_ms: {median, min, max}`` or ``median_ms``/``min_ms``/``max_ms``); a variant
    given as a dict of settings is labelled by the settings that differ between points.
    """
    if path is None:
        cands = [traces_root().parent / "benchmarks" / "results" / name,
                 Path("..") / "benchmarks" / "results" / name,
                 _repo_root() / "benchmarks" / "results" / name]
        path = next((c for c in cands if c.is_file()), None)
        if path is None:
            return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("captures"), list):
        df = _campaign(data["captures"])
        if df is not None:
            df.attrs["workload"] = _workload(df["trace"], traces_root())
        return df
    if isinstance(data, dict):
        data = next((data[k] for k in ("results", "rows", "records", "sweep", "runs") if isinstance(data.get(k), list)), [])
    if not isinstance(data, list):
        return None
    rows = [r for r in (_record(x) for x in data if isinstance(x, dict)) if r is not None]
    if not rows:
        return None
    nested = [r for r in rows if r["_variant"] is not None]
    for r, label in zip(nested, _labels([r["_variant"] for r in nested])):
        r["variant"] = label
    return pd.DataFrame([{k: v for k, v in r.items() if k != "_variant"} for r in rows]).sort_values(["variant", "context"], kind="stable").reset_index(drop=True)


def _campaign(captures: list) -> pd.DataFrame | None:
    """``benchmarks/live_campaign.py`` results: the captures of the groups that make a sweep
    (see :func:`_swept`), decode-step time median/min/max per (context, variant, engine) and
    attention's GPU time per layer (us) where measured, the variant labelled by
    :func:`_labels`; the torch.profiler capture's timing is taken over the nsys one when both
    exist."""
    kept = []
    for c in captures:
        m = c.get("measured") if isinstance(c, dict) else None
        if not isinstance(m, dict):
            continue
        v, t = m.get("variant") or {}, m.get("decode_step_ms") or {}
        if isinstance(v, dict) and _first(v, _X) is not None and isinstance(t, dict) and t.get("median") is not None:
            kept.append((str(c.get("group", "")), c, m, v, t))
    swept = _swept([(g, int(_first(v, _X))) for g, _, _, v, _ in kept])
    kept = [k for k in kept if k[0] in swept]
    rows = [{"context": int(_first(v, _X)), "variant": label, "engine": str(m.get("engine", "")),
             "backend": str(m.get("backend", "")), "median_ms": float(t["median"]),
             "min_ms": float(t.get("min", t["median"])), "max_ms": float(t.get("max", t["median"])),
             "trace": str(m.get("trace", c.get("name", ""))),
             "attention_gpu_us_per_layer": _number(m.get("attention_gpu_us_per_layer"))}
            for (_, c, m, v, t), label in zip(kept, _labels([k[3] for k in kept]))]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    if df["attention_gpu_us_per_layer"].isna().all():  # no capture measured it
        df = df.drop(columns="attention_gpu_us_per_layer")
    df["_rank"] = (df["backend"] != "torch").astype(int)
    df = df.sort_values(["variant", "engine", "context", "_rank"], kind="stable")
    df = df.drop_duplicates(["variant", "engine", "context"], keep="first").drop(columns="_rank")
    return df.reset_index(drop=True)


def _number(x) -> float:
    """``x`` as a float; NaN where it is no number (None: not measured)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else float("nan")


def _swept(points: list[tuple[str, int]]) -> set[str]:
    """The groups that make a sweep, from (group, context) points: a family of groups whose names
    differ only in their numbers (``cache-ctx512``, ``cache-ctx2048``) spanning two or more
    contexts; groups measured at one context (a single comparison) are no sweep."""
    spans: dict[str, set] = {}
    for group, ctx in points:
        spans.setdefault(re.sub(r"\d+", "#", group), set()).add(ctx)
    return {g for g, _ in points if len(spans[re.sub(r"\d+", "#", g)]) > 1}


def _workload(names, root: Path) -> str | None:
    """The one workload that the stored traces ``names`` were captured from, or None (none
    stored, none recorded, or several): what colours a sweep of them."""
    found = {workload_name(_manifest(root, n)) for n in map(str, set(names))
             if n and "/" not in n and n not in (".", "..")}
    return found.pop() if len(found) == 1 else None


def step_times(trace, label: str | None = None) -> dict:
    """GPU time per decode step of a trace as a sweep-like record (median/min/max over its
    decode steps, ms)."""
    from ..analysis.tables import launches_per_step

    df = launches_per_step(trace, phase="decode")
    ms = df["gpu_time_ns"].to_numpy(dtype=float) / 1e6 if len(df) else np.array([np.nan])
    return {"variant": label or trace.label, "median_ms": float(np.median(ms)), "min_ms": float(ms.min()),
            "max_ms": float(ms.max()), "steps": int(len(df))}
