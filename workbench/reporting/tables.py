"""The diff's tables: the ranges that changed, per layer and summed, their aligned kernel
sequences, and the sweep as a table with its notes.
"""

from __future__ import annotations

import numpy as np

from .. import textfmt as fmt
from ..analysis.per_step import TIME_CHANGE, TIME_CHANGE_NS, describe, labels
from .inputs import Sweep
from .model import AlignGroup, Code, Table, listing
from ..trace.words import Words

# A range counts as changed when its kernel count differs in any layer, or when its GPU time
# per step, summed over layers, moved by the diff's rule (analysis.diff.time_moved).
MAX_COLUMNS = 8  # changed ranges shown in the per-layer table (all are in the range table)
MAX_ALIGNMENTS = 12  # kernel-sequence groups shown
MAX_OPS = 200  # lines of one aligned sequence


def ranges_view(d):
    """The diff's per-decode-step ranges (``d.per_step()``: prefill and work outside the steps
    are never added into a per-step number) with ``name`` made readable for keys that are not a
    range of their own: kernels launched directly inside a step show as ``(step)``, unattributed
    ones by their key."""
    r = d.per_step()
    return r.assign(name=labels(r)) if len(r) else r


def changed_names(d) -> list[str]:
    """The labels of the per-step ranges that changed in any layer (``d.groups()``)."""
    g = d.groups()
    return sorted(g.loc[g["changed"], "range"].astype(str)) if len(g) else []


TOP_CHANGES = 1  # range labels a headline names: the one that changed most


def top_changes(d, words: Words, n: int = TOP_CHANGES, by_count: bool = False) -> list[str]:
    """The range labels whose GPU time per decode step changed most (``by_count``: whose count
    did, where the times measure something else), one line each (``attention in all 32 layers:
    94.1 → 72.0 µs each per decode step, 0.77x; kernels 2 each``)."""
    g = d.groups()
    g = g[g["changed"]]
    if by_count:
        g = g.iloc[np.argsort(-(g["kernels_b"] - g["kernels_a"]).abs().to_numpy(), kind="stable")]
    return [describe(row, words.units) for row in g.head(n).itertuples(index=False)]


def _arrow(a: float, b: float) -> str:
    return fmt.num(a) if a == b else f"{fmt.num(a)} → {fmt.num(b)}"


def layer_counts(d, names: list[str], words: Words) -> Table | None:
    lay = d.layers[(d.layers["layer"] >= 0) & d.layers["range"].astype(str).isin(names)]
    if not len(lay):
        return None
    cols = sorted(set(lay["range"].astype(str)))
    more = 0
    if len(cols) > MAX_COLUMNS:  # keep the ranges whose kernel counts, then times, moved most
        w = lay.assign(k=(lay["kernels_b"] - lay["kernels_a"]).abs(), t=(lay["gpu_time_ns_b"] - lay["gpu_time_ns_a"]).abs())
        moved = w.groupby(w["range"].astype(str))[["k", "t"]].sum()
        keep = sorted(sorted(cols, key=lambda c: (-float(moved.at[c, "k"]), -float(moved.at[c, "t"]), c))[:MAX_COLUMNS])
        more = len(cols) - len(keep)
        cols = keep
        lay = lay[lay["range"].astype(str).isin(cols)]
    counts: dict[int, dict[str, str]] = {}
    times: dict[int, dict[str, tuple[float, float]]] = {}
    for row in lay.itertuples(index=False):
        counts.setdefault(int(row.layer), {})[str(row.range)] = _arrow(row.kernels_a, row.kernels_b)
        times.setdefault(int(row.layer), {})[str(row.range)] = (float(row.gpu_time_ns_a), float(row.gpu_time_ns_b))
    # Merge runs of consecutive layers whose counts are identical (a 60-layer model stays short);
    # a merged row's times are the mean over its layers.
    groups: list[tuple[list[int], tuple]] = []
    for layer in sorted(counts):
        key = tuple(counts[layer].get(c, "–") for c in cols)
        if groups and groups[-1][1] == key and groups[-1][0][-1] == layer - 1:
            groups[-1][0].append(layer)
        else:
            groups.append(([layer], key))

    def cell(ls: list[int], c: str, count: str) -> str:
        ts = [times[x][c] for x in ls if c in times[x]]
        if not ts:
            return count
        ta, tb = (sum(t[i] for t in ts) / len(ts) for i in (0, 1))
        return f"{count} ({fmt.us_from_ns(ta)} → {fmt.us_from_ns(tb)} {fmt.MICRO})"

    rows = [[fmt.layer_span(ls), *[cell(ls, c, k) for c, k in zip(cols, key)]] for ls, key in groups]
    return Table(["Layer(s)", *[Code(c) for c in cols]], rows, numeric=tuple(range(1, len(cols) + 1)),
                 note=f"{words.Units} per decode step in each changed range of each layer, base → fix, and in "
                      f"parentheses its {words.time} per decode step (consecutive layers with identical counts share "
                      "a row, with their mean time)."
                      + (f" {more} more changed range(s) are in the table below." if more else ""))


def range_times(d, names: list[str], words: Words) -> Table | None:
    """Per changed label, summed over its instances in one decode step (``d.groups()``)."""
    g = d.groups()
    g = g[g["range"].astype(str).isin(names)].sort_values("range", kind="stable")
    if not len(g):
        return None
    rows = []
    for row in g.itertuples(index=False):
        ia, ib = int(row.instances_a), int(row.instances_b)
        where = "only in base" if not ib else "only in fix" if not ia else ""
        count = str(ia) if ia == ib or where else f"{ia} → {ib}"
        ta, tb = float(row.gpu_time_ns_a), float(row.gpu_time_ns_b)
        rows.append([Code(str(row.range)), count + (f" ({where})" if where else ""), _arrow(row.kernels_a, row.kernels_b),
                     f"{fmt.us_from_ns(ta)} → {fmt.us_from_ns(tb)}", fmt.pct(tb, ta)])
    return Table(["Range", "Instances per decode step", f"{words.Units} per decode step",
                  f"{words.time} per decode step ({fmt.MICRO})", "Change"], rows, numeric=(1, 2, 3, 4),
                 note=f"Summed over layers, decode steps only: prefill and work outside the steps are not in "
                      f"these numbers. A range is listed when its {words.unit} count changed or its "
                      f"{words.time} moved by at least {TIME_CHANGE:.0%} (and {TIME_CHANGE_NS / 1000:g} {fmt.MICRO}).")


def alignments(d, names: list[str]) -> tuple[list[AlignGroup], int]:
    r = ranges_view(d)
    r = r[(r["status"] == "both") & r["name"].astype(str).isin(names)]
    groups: dict[tuple, list] = {}
    for row in r.itertuples(index=False):
        al = d.alignments.get(row.range)
        if al is None or not (al.removed or al.added):
            continue
        ops = tuple(al.runs())
        groups.setdefault((str(row.name), ops), []).append((int(row.layer), str(row.range)))
    out = []
    for (name, ops), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0][0], kv[1][0][1])):
        layers = [lay for lay, _ in members if lay >= 0]
        if len(layers) == len(members) and layers:
            where = f"layer{'s' if len(layers) > 1 else ''} {fmt.layer_span(layers)}"
        elif len(members) == 1 and members[0][1] == name:
            where = ""  # a range of its own, e.g. (step): kernels launched directly in the step
        else:
            where = ", ".join(k for _, k in sorted(members)[:6]) + (" …" if len(members) > 6 else "")
        removed = sum(c for op, _, c in ops if op == "removed")
        added = sum(c for op, _, c in ops if op == "added")
        out.append(AlignGroup(name, where, len(members), list(ops[:MAX_OPS]), removed, added,
                              truncated=max(0, len(ops) - MAX_OPS)))
    total = len(out)
    if total > MAX_ALIGNMENTS:  # keep the groups that changed most, in name order
        keep = sorted(out, key=lambda g: (-(g.removed + g.added) * g.count, g.range, g.where))[:MAX_ALIGNMENTS]
        out = [g for g in out if g in keep]
    return out, total


def metric_rank(metric: str) -> int:
    return {"decode_step": 0, "prefill": 1}.get(metric, 2)


def sweep_table(sweep: Sweep) -> Table:
    """One row per (metric, series), one column per context length."""
    contexts = sorted({r["context"] for r in sweep.rows}, key=float)
    cells: dict[tuple, dict] = {}
    for r in sweep.rows:
        n = f", {r['n']} runs" if r.get("n") else ""
        spread = "" if r["min"] == r["max"] == r["median"] else f" ({fmt.ms(r['min'])}–{fmt.ms(r['max'])}{n})"
        cells.setdefault((r["metric"], r["series"]), {})[r["context"]] = \
            f"{fmt.ms(r['median'])} {r.get('unit', 'ms')}{spread}"
    order = sorted(cells, key=lambda k: (metric_rank(k[0]), k[0], k[1]))
    rows = [[Code(m), Code(s), *[cells[(m, s)].get(c, "–") for c in contexts]] for m, s in order]
    return Table(["Metric", "Series", *[f"context {c}" for c in contexts]], rows,
                 numeric=tuple(range(2, 2 + len(contexts))),
                 note="Median (min–max over runs) of each point; a series is what differs between the "
                      "sweep's captures.")


def sweep_note(sweep: Sweep) -> list[list]:
    """Lines: each metric's series at every context they share (not only the longest: a change
    can grow or shrink with the context), with the ratio of two series; what was left out."""
    lines: list[list] = []
    for metric in sorted(sweep.metrics, key=lambda m: (metric_rank(m), m)):
        rows = [r for r in sweep.rows if r["metric"] == metric]
        by: dict[str, dict] = {}
        for r in rows:
            by.setdefault(r["series"], {})[r["context"]] = r["median"]
        series = sorted(by)
        if len(series) < 2:
            continue
        common = set.intersection(*(set(v) for v in by.values()))
        if not common:
            continue
        unit = rows[0].get("unit", "ms")
        line: list = [f"{metric.replace('_', ' ')} by context: "]
        for i, c in enumerate(sorted(common, key=float)):
            vs = [by[s][c] for s in series]
            ratio = f" ({vs[0] / vs[1]:.2f}x)" if len(series) == 2 and vs[1] else ""
            line += (["; "] if i else []) + [f"{c}: ", listing((Code(s), f" {fmt.ms(by[s][c])} {unit}") for s in series),
                                            ratio]
        if len(series) == 2:
            line += [" (ratio: ", Code(series[0]), " / ", Code(series[1]), ")"]
        lines.append(line)
    groups = sweep.meta.get("left_out_groups") or []
    if groups:
        lines.append(["not part of the sweep (a single context length): group(s) ", listing(map(Code, groups))])
    left = sweep.meta.get("left_out") or []
    if left:
        lines.append(["measured at one context length only, so not plotted: ", listing(map(Code, left))])
    return lines
