"""Trace diff: match ranges of two traces by path, compare kernel counts and GPU time per
range, per layer and per step, and align the kernel sequences inside each matched range.

Ranges are matched by their path with the step level removed (``step_2/layer_03/kv_write``
and ``step_0/layer_03/kv_write`` are both ``layer_03/kv_write``), so traces with different
step counts or numbering compare. Counts are reported per step: ``kernels_a`` of
``layer_03/kv_write`` is the kernels that range launches in one step of A (the total over
the captured steps divided by the number of steps); totals are kept as ``kernels_total_a``.
A trace without step ranges counts as one step.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

import numpy as np
import pandas as pd

from ..errors import WorkbenchError
from ..trace.model import Trace
from .projection import NO_LAUNCH, NO_RANGE, project

STEP_REGEX = r"^(step|ProfilerStep)"


@dataclass
class Alignment:
    """Aligned kernel-name sequences of one range: ``ops`` is a list of
    (``equal``|``removed``|``added``, [kernel names]) in order."""

    ops: list[tuple[str, list[str]]]

    @property
    def removed(self) -> list[str]:
        return [k for op, ks in self.ops if op == "removed" for k in ks]

    @property
    def added(self) -> list[str]:
        return [k for op, ks in self.ops if op == "added" for k in ks]

    def describe(self, limit: int = 6) -> str:
        """``15 removed: vectorized_elementwise_kernel x6, ...; 1 added: kv_write_fused``."""
        parts = []
        for label, names in (("removed", self.removed), ("added", self.added)):
            if names:
                counts = Counter(names).most_common()
                shown = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in counts[:limit])
                more = f", +{len(counts) - limit} more kinds" if len(counts) > limit else ""
                parts.append(f"{len(names)} {label}: {shown}{more}")
        return "; ".join(parts) if parts else "unchanged"


@dataclass
class TraceDiff:
    """The result of :func:`diff`. All tables are pandas DataFrames."""

    a: str
    b: str
    ranges: pd.DataFrame  # per matched range key
    layers: pd.DataFrame  # per (layer, innermost range name)
    steps: dict[str, int]  # number of steps in A and B
    alignments: dict[str, Alignment] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)

    @property
    def common(self) -> int:
        return int((self.ranges["status"] == "both").sum()) if len(self.ranges) else 0

    def changed(self, n: int = 10) -> pd.DataFrame:
        """The ranges whose per-step GPU time or kernel count changed most."""
        r = self.ranges
        r = r[(r["kernels_a"] != r["kernels_b"]) | (r["gpu_time_ns_a"] != r["gpu_time_ns_b"])]
        order = (r["delta_gpu_time_ns"].abs() + 0).sort_values(ascending=False, kind="stable").index
        return r.loc[order].head(n).reset_index(drop=True)

    def to_rows(self) -> list[dict]:
        rows = self.ranges.copy()
        rows["alignment"] = rows["range"].map(lambda k: self.alignments[k].describe() if k in self.alignments else "")
        return rows.to_dict(orient="records")


def _keys(p: pd.DataFrame, step_rx: re.Pattern) -> tuple[pd.Series, int]:
    """Step-free range key of each kernel, and the number of steps."""
    paths = p["path"].cat.categories.astype(str)
    stepped = np.array([bool(step_rx.search(s)) for s in p["step"].cat.categories.astype(str)])
    step_codes = p["step"].cat.codes.to_numpy()
    in_step = np.where(step_codes >= 0, stepped[np.maximum(step_codes, 0)], False)
    key = p["path"].astype(str).to_numpy(dtype=object)
    if in_step.any():
        # Strip "<step>/" from the path; kernels launched directly in a step get "(step)".
        def strip(path: str) -> str:
            i = path.find("/")
            return path[i + 1 :] if i >= 0 else "(step)"

        table = {c: strip(c) for c in paths}
        key[in_step] = [table[x] for x in key[in_step]]
    n_steps = int(p.loc[in_step & (p["status"] == "range").to_numpy(), "step"].astype(str).nunique()) if in_step.any() else 0
    return pd.Series(key, index=p.index), max(n_steps, 1)


def _side(trace: Trace, step_rx: re.Pattern, layer_regex: str | None):
    p = project(trace, layer_regex)
    key, n = _keys(p, step_rx)
    frame = pd.DataFrame({
        "key": key.to_numpy(), "range": p["range"].astype(str).to_numpy(), "layer": p["layer"].to_numpy(),
        "duration": p["duration"].to_numpy(), "range_id": p["range_id"].to_numpy(),
        "launch_start": p["launch_start"].to_numpy(), "start": p["start"].to_numpy(),
        "kernel": p["short_name"].astype(str).to_numpy(),
    })
    return frame, n


def _per_key(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    g = frame.groupby("key", sort=True)
    out = pd.DataFrame({
        "name": g["range"].first(), "layer": g["layer"].first(),
        "kernels_total": g.size().astype(np.int64), "gpu_time_total_ns": g["duration"].sum().astype(np.int64),
    })
    out["kernels"] = out["kernels_total"] / n
    out["gpu_time_ns"] = out["gpu_time_total_ns"] / n
    return out


def _sequences(frame: pd.DataFrame, keys) -> dict[str, list[str]]:
    """Kernel names, in launch order, of the first instance of each range key."""
    f = frame[frame["key"].isin(keys)]
    if not len(f):
        return {}
    f = f.sort_values(["launch_start", "start"], kind="stable")
    # First instance = the range id of the earliest kernel of that key (or all unattributed).
    first = f.groupby("key", sort=False)["range_id"].first()
    sel = f["range_id"].to_numpy() == first.reindex(f["key"]).to_numpy()
    return {k: list(v) for k, v in f[sel].groupby("key", sort=False)["kernel"]}


# Above this many cell comparisons, alignment (quadratic in the worst case) gives way to a
# multiset comparison: still which kernels went away and which came, without their order.
_ALIGN_LIMIT = 4_000_000


def align(seq_a: list[str], seq_b: list[str]) -> Alignment:
    """Align two kernel-name sequences (longest matching blocks, as difflib does)."""
    ops: list[tuple[str, list[str]]] = []
    if len(seq_a) * len(seq_b) > _ALIGN_LIMIT:
        ca, cb = Counter(seq_a), Counter(seq_b)
        common = sorted((ca & cb).elements())
        for op, names in (("equal", common), ("removed", sorted((ca - cb).elements())),
                          ("added", sorted((cb - ca).elements()))):
            if names:
                ops.append((op, names))
        return Alignment(ops)
    sm = SequenceMatcher(a=seq_a, b=seq_b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            ops.append(("equal", seq_a[i1:i2]))
        else:
            if i2 > i1:
                ops.append(("removed", seq_a[i1:i2]))
            if j2 > j1:
                ops.append(("added", seq_b[j1:j2]))
    return Alignment(ops)


def diff(a: Trace, b: Trace, *, layer_regex: str | None = None, step_regex: str = STEP_REGEX) -> TraceDiff:
    """Compare two traces range by range; see the module docstring for the matching rule."""
    from ..trace import open_trace

    a = a if isinstance(a, Trace) else open_trace(a)
    b = b if isinstance(b, Trace) else open_trace(b)
    step_rx = re.compile(step_regex)
    fa, na = _side(a, step_rx, layer_regex)
    fb, nb = _side(b, step_rx, layer_regex)
    ka, kb = _per_key(fa, na), _per_key(fb, nb)
    r = ka.join(kb, how="outer", lsuffix="_a", rsuffix="_b")
    r["status"] = np.where(r["kernels_a"].isna(), "only_b", np.where(r["kernels_b"].isna(), "only_a", "both"))
    r["name"] = r["name_a"].fillna(r["name_b"])
    r["layer"] = r["layer_a"].fillna(r["layer_b"]).astype(np.int64)
    for col in ("kernels", "gpu_time_ns", "kernels_total", "gpu_time_total_ns"):
        for s in ("a", "b"):
            r[f"{col}_{s}"] = r[f"{col}_{s}"].fillna(0)
    for col in ("kernels_total_a", "kernels_total_b", "gpu_time_total_ns_a", "gpu_time_total_ns_b"):
        r[col] = r[col].astype(np.int64)
    r["delta_kernels"] = r["kernels_b"] - r["kernels_a"]
    r["delta_gpu_time_ns"] = r["gpu_time_ns_b"] - r["gpu_time_ns_a"]
    with np.errstate(divide="ignore", invalid="ignore"):
        r["delta_gpu_time_pct"] = np.where(r["gpu_time_ns_a"] > 0, 100.0 * r["delta_gpu_time_ns"] / r["gpu_time_ns_a"], np.nan)
    r = r.reset_index().rename(columns={"key": "range"})
    r = r[["range", "name", "layer", "status", "kernels_a", "kernels_b", "delta_kernels", "gpu_time_ns_a",
           "gpu_time_ns_b", "delta_gpu_time_ns", "delta_gpu_time_pct", "kernels_total_a", "kernels_total_b",
           "gpu_time_total_ns_a", "gpu_time_total_ns_b"]]

    both = r.loc[r["status"] == "both", "range"].tolist()
    sa, sb = _sequences(fa, both), _sequences(fb, both)
    alignments: dict[str, Alignment] = {}
    memo: dict[tuple, Alignment] = {}
    for k in both:
        pair = (tuple(sa.get(k, ())), tuple(sb.get(k, ())))
        if pair not in memo:  # every layer usually has the same pair: align it once
            memo[pair] = align(list(pair[0]), list(pair[1]))
        alignments[k] = memo[pair]

    layers = _layers(r)
    totals = {
        "steps_a": na, "steps_b": nb,
        "kernels_per_step_a": len(fa) / na, "kernels_per_step_b": len(fb) / nb,
        "gpu_time_per_step_ns_a": float(fa["duration"].sum()) / na,
        "gpu_time_per_step_ns_b": float(fb["duration"].sum()) / nb,
        "kernels_a": len(fa), "kernels_b": len(fb),
        "common_ranges": int((r["status"] == "both").sum()),
        "only_a_ranges": int((r["status"] == "only_a").sum()),
        "only_b_ranges": int((r["status"] == "only_b").sum()),
        "unattributed_a": int(fa["key"].isin([NO_RANGE, NO_LAUNCH]).sum()),
        "unattributed_b": int(fb["key"].isin([NO_RANGE, NO_LAUNCH]).sum()),
    }
    return TraceDiff(a.label, b.label, r, layers, {"a": na, "b": nb}, alignments, totals)


def _layers(r: pd.DataFrame) -> pd.DataFrame:
    g = r.groupby(["layer", "name"], sort=True)
    out = g[["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]].sum().reset_index()
    out = out.rename(columns={"name": "range"})
    out["delta_kernels"] = out["kernels_b"] - out["kernels_a"]
    out["delta_gpu_time_ns"] = out["gpu_time_ns_b"] - out["gpu_time_ns_a"]
    return out


_GATE = re.compile(r"^\s*(kernels_per_step|gpu_time_per_step|kernels|gpu_time)\s*>\s*\+?(\d+(?:\.\d+)?)\s*(%?)\s*$")


def check_gates(d: TraceDiff, gates: list[str]) -> list[str]:
    """Evaluate ``--fail-if`` gates such as ``kernels_per_step>0`` (B has more kernels per step
    than A) or ``gpu_time_per_step>5%``; returns the violated ones, described."""
    failed = []
    for gate in gates:
        m = _GATE.match(gate)
        if not m:
            raise WorkbenchError(gate, "bad --fail-if gate; use METRIC>N or METRIC>N% with METRIC one of "
                                       "kernels_per_step, gpu_time_per_step, kernels, gpu_time")
        metric, value, pct = m.group(1), float(m.group(2)), bool(m.group(3))
        key = {"kernels_per_step": "kernels_per_step", "gpu_time_per_step": "gpu_time_per_step_ns",
               "kernels": "kernels", "gpu_time": "gpu_time_per_step_ns"}[metric]
        va, vb = d.totals[f"{key}_a"], d.totals[f"{key}_b"]
        if metric == "gpu_time":
            va, vb = va * d.totals["steps_a"], vb * d.totals["steps_b"]
        delta = vb - va
        limit = va * value / 100.0 if pct else value
        if delta > limit:
            failed.append(f"{metric}: {va:g} -> {vb:g} (+{delta:g}, limit +{value:g}{'%' if pct else ''})")
    return failed
