"""The one definition of "per decode step" behind every per-step number of a diff.

A diff's range key counts **per decode step** when its work ran in decode steps (:mod:`.steps`:
outermost step-named ranges, else model calls after the first), or, for a trace without steps,
anywhere but prefill (the whole trace is one step). Its numbers are its totals over the captured
decode steps divided by their count. Prefill keys (a ``prefill`` range, or the first model call)
are per prefill and work outside every step (set-up, a ``generate`` loop's own ops between model
calls) is apart: neither is ever added into a per-step figure. The diff marks each key
(``ranges.per_step``); the per-step totals, the per-layer table, the grouping across layers
here, the report's tables, the widget and the figures read only those rows, so they agree with
one another and with sums over the projection's decode kernels.

:func:`by_label` groups the per-step keys that repeat a label across layers (``attn`` of layers
0-15): one row per label, with the instances per step on each side, the layers it covers, its
work summed and per instance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import textfmt as fmt

_SUMS = ["kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b"]

# A range's per-step GPU time "changed" when it moved by at least this much (both): the time
# of an unchanged range moves a little between any two captures.
TIME_CHANGE_NS = 1000
TIME_CHANGE = 0.2


def time_moved(a, b):
    """Whether per-step GPU times ``a`` -> ``b`` (scalars or arrays) moved enough to call the
    range changed (see :data:`TIME_CHANGE`, :data:`TIME_CHANGE_NS`)."""
    delta = np.abs(np.asarray(b, dtype=float) - np.asarray(a, dtype=float))
    return (delta >= TIME_CHANGE_NS) & (delta >= TIME_CHANGE * np.asarray(a, dtype=float))


def labels(r: pd.DataFrame) -> pd.Series:
    """Each row's range label: its name, or for a key that is no range of its own (``(step)``:
    kernels launched directly in a step; ``(no range)``) the key itself."""
    key = r["range"].astype(str)
    return key.where(key.str.startswith("("), r["name"].astype(str))


def per_layer(r: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, range label) of per-step rows ``r``: kernels and GPU time per decode step."""
    g = r.assign(name=labels(r)).groupby(["layer", "name"], sort=True)
    out = g[_SUMS].sum().reset_index()
    out = out.rename(columns={"name": "range"})
    out["delta_kernels"] = out["kernels_b"] - out["kernels_a"]
    out["delta_gpu_time_ns"] = out["gpu_time_ns_b"] - out["gpu_time_ns_a"]
    return out


def by_label(r: pd.DataFrame) -> pd.DataFrame:
    """Per range label of per-step rows ``r`` (a diff's ``ranges``), largest GPU time change
    first: ``instances_a``/``_b`` (keys of that label per decode step on each side),
    ``layers`` (the layers they are in, sorted; empty for none), ``all_layers`` (they cover every
    layer the per-step rows have), the work per decode step summed (``kernels_a``, ...,
    ``gpu_time_ns_b``) and per instance (``gpu_time_each_ns_a``, ...), ``ratio`` (B/A GPU time),
    ``changed`` (a member's kernels changed or it is on one side only, or the summed time moved
    by :func:`time_moved`: a layer's time alone moves between any two captures)."""
    cols = ["range", "instances_a", "instances_b", "layers", "all_layers", *_SUMS, "kernels_each_a", "kernels_each_b",
            "gpu_time_each_ns_a", "gpu_time_each_ns_b", "delta_gpu_time_ns", "ratio", "changed"]
    if not len(r):
        return pd.DataFrame(columns=cols)
    every = sorted({int(x) for x in r["layer"] if x >= 0})
    rows = []
    for label, g in r.groupby(labels(r), sort=True):
        ia, ib = int((g["status"] != "only_b").sum()), int((g["status"] != "only_a").sum())
        sums = {c: float(g[c].sum()) for c in _SUMS}
        layers = sorted({int(x) for x in g["layer"] if x >= 0})
        ta, tb = sums["gpu_time_ns_a"], sums["gpu_time_ns_b"]
        rows.append({
            "range": label, "instances_a": ia, "instances_b": ib, "layers": layers,
            "all_layers": bool(layers) and layers == every and len(every) > 1, **sums,
            "kernels_each_a": sums["kernels_a"] / ia if ia else 0.0, "kernels_each_b": sums["kernels_b"] / ib if ib else 0.0,
            "gpu_time_each_ns_a": ta / ia if ia else 0.0, "gpu_time_each_ns_b": tb / ib if ib else 0.0,
            "delta_gpu_time_ns": tb - ta, "ratio": tb / ta if ta > 0 else float("nan"),
            "changed": bool((g["changed"] == "kernels").any() or (g["status"] != "both").any() or time_moved(ta, tb)),
        })
    out = pd.DataFrame(rows, columns=cols)
    order = np.lexsort((out["range"].to_numpy(), -out["delta_gpu_time_ns"].abs().to_numpy()))
    return out.iloc[order].reset_index(drop=True)


def describe(g, units: str = "kernels", arrow: str = "→", micro: str = fmt.MICRO, per: str = "decode step") -> str:
    """One :func:`by_label` row as a line: ``attn in all 4 layers: 576.1 → 160.9 µs each per
    decode step, 0.28x; kernels 26 → 20 each`` (per instance where it has several)."""
    each = " each" if max(g.instances_a, g.instances_b) > 1 else ""
    where = fmt.layers_where(g.layers, g.all_layers) if each else ""
    if not g.instances_a or not g.instances_b:
        side = "b" if g.instances_b else "a"
        return (f"{g.range}{where}: only in {side.upper()}, {fmt.us_from_ns(getattr(g, 'gpu_time_each_ns_' + side))} "
                f"{micro}{each} per {per}; {units} {fmt.num(getattr(g, 'kernels_each_' + side))}{each}")
    ta, tb = g.gpu_time_each_ns_a, g.gpu_time_each_ns_b
    ka, kb = g.kernels_each_a, g.kernels_each_b
    ratio = f", {tb / ta:.2f}x" if ta > 0 else ""
    counts = fmt.num(ka) if ka == kb else f"{fmt.num(ka)} {arrow} {fmt.num(kb)}"
    return (f"{g.range}{where}: {fmt.us_from_ns(ta)} {arrow} {fmt.us_from_ns(tb)} {micro}{each} per "
            f"{per}{ratio}; {units} {counts}{each}")
