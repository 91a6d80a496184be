"""A diff's display (:class:`.trace_diff.TraceDiff` in a notebook and on a terminal): the
headline first, the range label that changed most worded as the command line and the report
word it (:func:`.per_step.describe`), then the per-decode-step totals, the two traces, the timed
phases, the ranges grouped by label across layers (changed rows highlighted, their removed and
added kernels beside), the aligned kernels of the top change, and the per-layer table folded.
Worded for what the traces hold (kernels and GPU time, or CPU ops: :mod:`workbench.trace.words`)."""

from __future__ import annotations

import pandas as pd

from .. import textfmt as fmt
from ..trace.display import Part
from ..trace.words import joined, unit_words
from .per_step import TIME_CHANGE, TIME_CHANGE_NS, by_label, describe

ARROW = "\u2192"
# The columns of a group row shown, per instance of its range: what `describe` words.
_GROUP = ["range", "layers", "kernels_each_a", "kernels_each_b", "gpu_time_each_ns_a", "gpu_time_each_ns_b", "ratio"]


def _per(d) -> str:
    """What one per-step number is per: a decode step, or for traces without steps (a TensorRT
    profile, one call) the whole trace, which the diff counts as one step."""
    return "decode step" if (d.ranges["phase"] == "decode").any() else "trace"


def headline(d, w) -> str:
    """The diff in a line: why it has nothing to compare, its largest change, or that none."""
    if none := d.nothing_in_common():
        return none
    g = d.groups()
    g = g[g["changed"]]
    if len(g):
        return describe(g.iloc[0], w.units, ARROW, per=_per(d))
    return (f"no range changed per {_per(d)} ({w.units}, or {w.time} by {TIME_CHANGE:.0%} and "
            f"{TIME_CHANGE_NS / 1000:g} {fmt.MICRO})")


def _steps(n: int) -> str:
    return f"{n} decode step{'s' if n != 1 else ''}"


def _lines(d, w) -> list[str]:
    t = d.totals
    out = [f"per {_per(d)}: {w.units} {fmt.num(t['kernels_per_step_a'])} {ARROW} {fmt.num(t['kernels_per_step_b'])}; "
           f"{w.time} {fmt.time_change(t['gpu_time_per_step_ns_a'], t['gpu_time_per_step_ns_b'])} "
           f"({fmt.pct(t['gpu_time_per_step_ns_b'], t['gpu_time_per_step_ns_a'])})"]
    proj = [t.get(f"gpu_proj_per_step_ns_{s}", float("nan")) for s in "ab"]
    if w.device and all(x == x and x > 0 for x in proj):
        out.append(f"GPU projection per {_per(d)} (nvtx_gpu_proj): {fmt.time_change(*proj)}")
    stepped = _per(d) == "decode step"
    out.append(f"A: {d.a}" + (f" ({_steps(t['steps_a'])})" if stepped else "") + f"; B: {d.b}"
               + (f" ({_steps(t['steps_b'])})" if stepped else ""))
    apart = [(label, t[f"{key}_a"], t[f"{key}_b"]) for label, key in (("prefill", "prefill_kernels"),
                                                                      ("outside the steps", "outside_steps_kernels"))]
    if any(a or b for _, a, b in apart):
        out.append(f"{w.units} in all {t['kernels_a']:,} {ARROW} {t['kernels_b']:,}: "
                   + ", ".join(f"{label} {a:,} {ARROW} {b:,}" for label, a, b in apart))
    out += [c.line() for c in d.timing]
    if d.timing:
        out.append("(wall-time medians, B against A: wb.report(a, b) checks whether host work, not the change, "
                   "moved them)")
    for status, side in (("only_a", "A"), ("only_b", "B")):
        only = d.ranges.loc[d.ranges["status"] == status, "range"].astype(str).tolist()
        if only:
            out.append(f"only in {side}: {len(only)} range(s): " + ", ".join(fmt.one_line(k, 48) for k in only[:4])
                       + (", \u2026" if len(only) > 4 else ""))
    return out


def _groups(d, rows: pd.DataFrame, title: str, changed_only: bool) -> Part | None:
    """The ranges ``rows`` grouped across layers (:func:`.per_step.by_label`) as a table, with
    the removed and added kernels of each changed group's first changed member."""
    g = by_label(rows)
    if changed_only:
        g = g[g["changed"]]
    if not len(g):
        return None
    frame = g[_GROUP].assign(layers=[f"all {len(ls)}" if every else fmt.layer_span(ls)
                                     for ls, every in zip(g["layers"], g["all_layers"])])
    frame["kernels_changed"] = [al.describe() if (al := d.aligned(label, rows)) else "" for label in g["range"]]
    n = int(g["changed"].sum())
    return Part(frame.reset_index(drop=True), f"{title} ({n} of {len(g)} changed; per instance, largest time change "
                                              "first)", changed=tuple(g["changed"]))


def diff_page(d) -> tuple[str, list[str], list[Part]]:
    """The diff's display as :func:`~workbench.trace.display.page_html` takes it."""
    w = joined(unit_words(u) for u in d.work_units)
    if d.nothing_in_common():  # every range is on one side: nothing to group or align
        return headline(d, w), _lines(d, w), []
    r = d.ranges
    parts = [_groups(d, d.per_step(), f"d.groups(): per {_per(d)}, by range across layers", False),
             _groups(d, r[(r["phase"] == "prefill") & ~r["per_step"]], "changed in prefill (per prefill)", True),
             _groups(d, r[(r["phase"] == "other") & ~r["per_step"]], "changed outside the steps (per decode step)", True)]
    g = d.groups()
    top = next(((label, al) for label in g.loc[g["changed"], "range"] if (al := d.aligned(label))), None)
    if top is not None:  # the largest change whose kernels changed
        parts.append(top[1].part(f"{top[0]}: aligned {w.units}, A {ARROW} B (one instance)"))
    if len(d.layers):
        parts.append(Part(d.layers, "per layer and range (d.layers)", collapsed=True))
    return headline(d, w), _lines(d, w), [p for p in parts if p is not None]
