"""Helpers the notebooks share besides the store look-ups (``trace.store.catalog``): the pair
a workload opens with, the sweep results as a frame to plot, and a trace's decode-step times
as a sweep-like record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.sweeps import CONTEXT, SERIES, latency, read, swept_groups, varying
from ..errors import WorkbenchError
from ..trace.store.catalog import find_pair, traces_root
from ..trace.store.read import manifest_or_empty
from ..workloads import workload_name


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

def _labels(variants: list[dict]) -> list[str]:
    """A series label for each variant: the values of the keys that differ between them (the
    context aside), or, where none differ, its first text value ("all" without one)."""
    keys = varying(variants, skip=CONTEXT)
    if keys:
        return [" ".join(str(v.get(k, "\u2013")) for k in keys) for v in variants]
    return [next((x for k, x in v.items() if k not in CONTEXT and isinstance(x, str)), "all") for v in variants]


def load_sweep(path) -> pd.DataFrame | None:
    """The decode-latency sweep in the results file ``path`` (for example the repository's
    ``benchmarks/results/h200_live.json``) as a frame (context, variant, median_ms, min_ms,
    max_ms), or None where the file is missing, unreadable or holds no sweep. A campaign
    file's frame names, in ``attrs["workload"]``, the workload its traces were captured from
    (what :func:`workbench.viz.sweep` colours its series by), and has a column
    ``attention_gpu_us_per_layer`` where its captures measured attention per layer.

    The shapes accepted are :mod:`workbench.analysis.sweeps`'; the latency of a point is its
    :func:`~workbench.analysis.sweeps.latency`. A variant given as a dict of settings is
    labelled by the settings that differ between points; one given as a label (or a series
    label: :data:`~workbench.analysis.sweeps.SERIES`) is that label.
    """
    try:
        sweep = read(path)
    except WorkbenchError:
        return None
    timed = [(p, st) for p in sweep.points
             if p.not_run is None and p.context is not None and (st := latency(p)) is not None]
    if sweep.listed_under == "captures":
        df = _campaign(timed)
        if df is not None:
            df.attrs["workload"] = _workload(df["trace"], traces_root())
        return df
    if not timed:
        return None
    nested = iter(_labels([p.variant for p, _ in timed if isinstance(p.variant, dict)]))
    rows = [{"context": int(p.context), "variant": next(nested) if isinstance(p.variant, dict) else _label(p),
             "median_ms": st.median, "min_ms": st.lo, "max_ms": st.hi} for p, st in timed]
    return pd.DataFrame(rows).sort_values(["variant", "context"], kind="stable").reset_index(drop=True)


def _label(point) -> str:
    """A point's own series label: its variant or a label it gives ("all" without one)."""
    v = next((point.fields[k] for k in ("variant", *SERIES) if point.fields.get(k) is not None), None)
    return "all" if v is None else str(v)


def _campaign(timed: list) -> pd.DataFrame | None:
    """``benchmarks/live_campaign.py`` results: the captures of the groups that make a sweep
    (:func:`~workbench.analysis.sweeps.swept_groups`), decode-step time median/min/max per
    (context, variant, engine) and attention's GPU time per layer (us) where measured, the
    variant labelled by :func:`_labels`; the torch.profiler capture's timing is taken over the
    nsys one when both exist."""
    swept = swept_groups((str(p.fields.get("group", "")), int(p.context)) for p, _ in timed)
    kept = [(p, st) for p, st in timed if str(p.fields.get("group", "")) in swept]
    labels = _labels([p.variant if isinstance(p.variant, dict) else {} for p, _ in kept])
    rows = [{"context": int(p.context), "variant": label, "engine": str(p.fields.get("engine", "")),
             "backend": str(p.fields.get("backend", "")), "median_ms": st.median, "min_ms": st.lo, "max_ms": st.hi,
             "trace": str(p.fields.get("trace", p.fields.get("name", ""))),
             "attention_gpu_us_per_layer": _attention(p)}
            for (p, st), label in zip(kept, labels)]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    if df["attention_gpu_us_per_layer"].isna().all():  # no capture measured it
        df = df.drop(columns="attention_gpu_us_per_layer")
    df["_rank"] = (df["backend"] != "torch").astype(int)
    df = df.sort_values(["variant", "engine", "context", "_rank"], kind="stable")
    df = df.drop_duplicates(["variant", "engine", "context"], keep="first").drop(columns="_rank")
    return df.reset_index(drop=True)


def _attention(point) -> float:
    """Attention's GPU time per layer (us) a capture measured; NaN where it did not."""
    st = point.values.get("attention_gpu_us_per_layer")
    return float("nan") if st is None else st.median


def _workload(names, root: Path) -> str | None:
    """The one workload that the stored traces ``names`` were captured from, or None (none
    stored, none recorded, or several): what colours a sweep of them."""
    found = {workload_name(manifest_or_empty(root / n)) for n in map(str, set(names))
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
