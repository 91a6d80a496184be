"""The text of ``workbench diff A B``: per-decode-step totals, the changes grouped by range label
across layers (decode steps, then prefill, then work outside the steps, each under its own
heading), per-layer counts with their time, and the ranges of one side only. Worded for what
the traces hold (kernels and GPU time, or CPU ops and their time: ``trace.words``)."""

from __future__ import annotations

import sys

from ..analysis.per_step import by_label, describe
from ..textfmt import MICRO_ASCII, clean, num, us, us_from_ns


def _us(ns: float) -> str:
    """Terminal output stays ASCII."""
    return us(ns, MICRO_ASCII)


def _blocks(d):
    """(heading, what one number is per, rows) for decode steps, prefill and outside the steps."""
    r = d.ranges
    return (("changed per decode step", "decode step", d.per_step()),
            ("changed in prefill (per prefill)", "prefill", r[(r["phase"] == "prefill") & ~r["per_step"]]),
            ("changed outside the steps (per decode step)", "decode step", r[(r["phase"] == "other") & ~r["per_step"]]))


def text(d, top: int, timing: str, notes: tuple, words) -> None:
    t = d.totals
    out = sys.stdout.write
    u, time = words.units, words.time
    for side, label, note in (("a", d.a, notes[0]), ("b", d.b, notes[1])):
        proj = t.get("gpu_proj_per_step_ns_" + side)
        out(f"{side.upper()}: {clean(label)}: {t['steps_' + side]} decode step(s), {num(t['kernels_per_step_' + side])} "
            f"{u}/step, {_us(t['gpu_time_per_step_ns_' + side])} {time}/step"
            + (f", {_us(proj)} GPU projection/step (nvtx_gpu_proj)" if proj == proj and proj and "GPU" in time else "")
            + "\n" + (f"   {note}\n" if note else ""))
    out(f"per decode step: {u} {num(t['kernels_per_step_a'])} -> {num(t['kernels_per_step_b'])}; {time} "
        f"{_us(t['gpu_time_per_step_ns_a'])} -> {_us(t['gpu_time_per_step_ns_b'])}; total {u} {t['kernels_a']} -> "
        f"{t['kernels_b']} (prefill {t['prefill_kernels_a']} -> {t['prefill_kernels_b']}, outside the steps "
        f"{t['outside_steps_kernels_a']} -> {t['outside_steps_kernels_b']})\n")
    out(timing)
    if none := d.nothing_in_common():
        out(f"\n{none}; nothing to compare range by range.\n")
    else:
        both = d.ranges[d.ranges["status"] == "both"]
        out(f"\n{d.common} range(s) in common; {int((both['changed'] != '').sum())} changed ({u}, or {time} by 20% "
            "and 1 us), grouped by range across layers, largest time change first.\n")
        for heading, per, rows in _blocks(d):
            g = by_label(rows)
            g = g[g["changed"]].head(top)
            if not len(g):
                continue
            out(f"{heading}:\n")
            for row in g.itertuples(index=False):
                out(f"  {clean(describe(row, u, '->', MICRO_ASCII, per))}\n")
                al = d.aligned(row.range, rows)
                if al is not None:
                    out(f"      {clean(al.describe())}\n")
        lay = d.layers[d.layers["layer"] >= 0]
        if len(lay):
            out(f"\nper layer ({u} and {time} per decode step, A -> B):\n")
            for (layer, grp) in lay.groupby("layer"):
                cells = ", ".join(f"{clean(str(x.range))} {num(x.kernels_a)}->{num(x.kernels_b)} "
                                  f"({us_from_ns(x.gpu_time_ns_a)}->{_us(x.gpu_time_ns_b)})" for x in grp.itertuples())
                out(f"  layer {layer}: {cells}\n")
    for status, label in (("only_a", "only in A"), ("only_b", "only in B")):
        rows = d.ranges[d.ranges["status"] == status]
        if len(rows):
            out(f"\n{label} ({len(rows)}):\n")
            for r in rows.head(top).itertuples():
                al = d.alignments.get(r.range)
                per = "prefill" if r.phase == "prefill" else "step"
                out(f"  {clean(r.range)}: {num(r.kernels_a if status == 'only_a' else r.kernels_b)} {u}/{per}"
                    + (f"\n      {clean(al.describe())}" if al else "") + "\n")
            if len(rows) > top:
                out(f"  ... {len(rows) - top} more\n")
