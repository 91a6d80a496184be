"""``workbench diff A B``: per-range and per-layer comparison, aligned kernels, timed phases with
confidence intervals, CI gates.

``--json`` prints one object: ``a``, ``b`` (the traces' labels), ``ranges`` (per-range rows,
with each range's aligned kernels), ``timing`` (one object per phase both traces timed: a
``stats.Comparison`` plus ``unit`` and where each side's samples came from), ``totals``,
``steps``, ``groups`` (the per-decode-step ranges grouped by label across layers:
``analysis.per_step.by_label``) and ``prefill_groups`` (the same for prefill, per prefill).

Two TensorRT engines imported from trtexec are compared layer by layer instead
(``analysis.engine_diff``): ``--json`` then prints ``a``, ``b``, ``layers`` (one row per matched
pair or unmatched layer), ``totals`` and ``timing``."""

from __future__ import annotations

import json
import sys

from ..textfmt import ms
from .output import finite, records

# Timed phase (a stats.PHASE_SAMPLES key) -> how the text names it.
PHASE_NAMES = {"decode_step_ms": "decode step", "prefill_ms": "prefill", "call_ms": "call"}
_SOURCE = {"timing": "capture samples", "timing_bench": "bench samples"}


def add_parser(sub) -> None:
    from .args import add_executor_args, add_phase_args, count, gate, layer_regex

    s = sub.add_parser("diff", help="compare two traces range by range (which kernels were fused away), or two "
                                    "trace sets rank against rank",
                       needs="two traces (or two trace sets), the base and the changed one")
    s.add_argument("a", help="base trace (stored name/dir or capture file), or trace set")
    s.add_argument("b", help="changed trace, or trace set")
    s.add_argument("--layer-regex", default=None, type=layer_regex)
    add_phase_args(s)
    s.add_argument("--top", type=count("--top"), default=10, help="changed ranges to show (default 10)")
    s.add_argument("--json", action="store_true",
                   help="print a JSON object: ranges, timing, totals, steps")
    s.add_argument("--fail-if", action="append", default=[], metavar="GATE", type=gate,
                   help="exit 1 if B is worse than A by more than N (or N%% of A): kernels_per_step+N, "
                        "gpu_time_per_step+N%%, kernels+N, gpu_time+N%%; decode_step+N%%, prefill+N%%, call+N%% (B "
                        "significantly slower and by more than N%%); no quotes needed ('METRIC>N', quoted, means "
                        "the same) (repeatable)")
    add_executor_args(s)
    s.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.diff import diff
    from ..analysis.gates import check_gates
    from ..textfmt import clean
    from .args import apply_phase_args, import_options
    from ..trace import open_trace
    from ..trace.compiled import compiled_note
    from ..trace.manifest import graph_note, inferred_note, interpreter_note, work_units
    from .sets import maybe_diff

    if (done := maybe_diff(args)) is not None:  # two trace sets, rank against rank
        return done
    a = open_trace(args.a, args.root, import_options(args))
    b = open_trace(args.b, args.root, import_options(args))
    for t in (a, b):
        apply_phase_args(t, args)
    d = diff(a, b, layer_regex=args.layer_regex)
    failed = check_gates(d, args.fail_if)
    sources = samples_source(a.meta), samples_source(b.meta)
    engines = None
    if all(work_units(t.meta) == "trt_layer" for t in (a, b)):
        from ..analysis.engine_diff import engine_diff

        engines = engine_diff(a, b)
    if args.json:
        out = _json(d, sources) if engines is None else {**engines.to_dict(), "timing": _timing_json(d, sources)}
        sys.stdout.write(json.dumps(finite(out), indent=1) + "\n")
    elif engines is not None:
        _engine_text(engines, (a.meta, b.meta), args.top, clean, _timing_text(d, a.meta, b.meta, sources))
    else:
        from ..trace.words import words
        from .diff_text import text

        notes = tuple("\n   ".join(n for n in (graph_note(t.meta), compiled_note(t.meta), inferred_note(t.meta), interpreter_note(t.meta)) if n)
                      or None for t in (a, b))
        timing = _timing_text(d, a.meta, b.meta, sources)
        if d.timing and (why := _confounded(a, b, d)):
            timing += f"  wall time confounded: {why}: read the per-step counts and times below, not these verdicts\n"
        text(d, args.top, timing, notes, words((a.meta, b.meta)))
    for f in failed:
        print(f"workbench: gate failed: {f}", file=sys.stderr)
    return 1 if failed else 0


def _engine_text(e, metas: tuple[dict, dict], top: int, clean, timing: str) -> None:
    """Two TensorRT engines, layer by layer: totals, the changed layers (largest time change
    first), the layers only one engine has."""
    from ..trace.manifest import TENSORRT, section

    t, out = e.totals, sys.stdout.write
    for side, label, meta in (("a", e.a, metas[0]), ("b", e.b, metas[1])):
        precisions = ", ".join(f"{k} {v}" for k, v in t[f"precisions_{side}"].items())
        out(f"{side.upper()}: {clean(label)}: TensorRT engine, {t['layers_' + side]} layers ({precisions}), "
            f"{ms(t['total_ms_' + side])} ms summed over its layers' profile (over "
            f"{section(meta, TENSORRT).get('count', '?')} profiled iteration(s))\n")
    out(timing)
    out(f"\nlayers: {t['matched_by_name']} matched by name, {t['matched_by_position']} by position and type "
        f"(fused differently); {t['only_a']} only in A, {t['only_b']} only in B\n"
        f"reformat layers {t['reformat_layers_a']} ({ms(t['reformat_ms_a'])} ms) -> {t['reformat_layers_b']} "
        f"({ms(t['reformat_ms_b'])} ms); no-op layers {t['noop_layers_a']} -> {t['noop_layers_b']}\n"
        f"changed: precision {t['precision_changed']}, time {t['time_changed']}, type {t['type_changed']}, "
        f"fused {t['fused_changed']}\n")
    matched = e.changed()
    matched = matched[matched["match"].isin(("name", "position"))]
    if len(matched):
        out(f"\nchanged layers ({len(matched)}), largest time change first:\n")
        for r in matched.head(top).itertuples():
            name = clean(r.name_a) if r.name_a == r.name_b else f"{clean(r.name_a)} -> {clean(r.name_b)}"
            kind = r.type_a if r.type_a == r.type_b else f"{r.type_a} -> {r.type_b}"
            prec = r.precision_a if r.precision_a == r.precision_b else f"{r.precision_a} -> {r.precision_b}"
            out(f"  {name} [{clean(kind)}, {clean(prec)}]: {ms(r.avg_ms_a)} ms -> {ms(r.avg_ms_b)} ms ({r.change})\n")
        if len(matched) > top:
            out(f"  ... {len(matched) - top} more\n")
    for side, label in (("a", "only in A"), ("b", "only in B")):
        rows = e.only(side)
        if len(rows):
            out(f"\n{label} ({len(rows)}):\n")
            for r in rows.head(top).itertuples():
                out(f"  {clean(getattr(r, 'name_' + side))} [{clean(getattr(r, 'type_' + side))}, "
                    f"{clean(getattr(r, 'precision_' + side))}]: {ms(getattr(r, 'avg_ms_' + side))} ms\n")
            if len(rows) > top:
                out(f"  ... {len(rows) - top} more\n")


def _confounded(a, b, d) -> str | None:
    """Why the pair's wall-time comparison is confounded (``analysis.confounding``), or None."""
    from ..analysis.busy import busy_per_step
    from ..analysis.confounding import assess
    from ..trace.manifest import work_units

    def busy(t):
        f = busy_per_step(t)["busy_fraction"].dropna() if work_units(t.meta) == "kernel" else ()
        return float(f.median()) if len(f) else None

    c = assess(a, b, d, (busy(a), busy(b)))
    return "; ".join(c.reasons(arrow="->")) if c.confounded else None


def samples_source(meta: dict) -> str:
    """Where ``stats.timed_samples`` takes a trace's samples from: ``timing_bench`` (an
    interleaved ``workbench bench --store``) when the manifest holds it, else ``timing``."""
    from ..trace.manifest import recorded_timing

    return recorded_timing(meta)[0]


def timing_line(c) -> str:
    """``decode step: 0.6262 ms -> 0.4180 ms, 0.667x (95% CI 0.662-0.677x): faster``."""
    from ..analysis.stats import change_text

    from ..analysis.inferred.timing import source

    where = source(c)
    return (f"{PHASE_NAMES.get(c.metric, c.metric)}: {ms(c.a_median)} ms -> {ms(c.b_median)} ms, {change_text(c)}"
            + (f" [{where}]" if where else ""))


def _timing_text(d, meta_a: dict, meta_b: dict, sources: tuple[str, str]) -> str:
    """The timed phases both traces recorded, one line each, or why there are none."""
    from ..analysis.stats import CONFIDENCE, PHASE_SAMPLES, timed_samples

    if d.timing:
        # Samples of one interleaved bench compare fairly; a bench's against a capture's less so.
        note = ("" if sources == ("timing", "timing") else " [interleaved bench samples]" if sources[0] == sources[1]
                else f" [A: {_SOURCE[sources[0]]}, B: {_SOURCE[sources[1]]}]")
        lines = "".join(f"  {timing_line(c)}\n" for c in d.timing)
        return f"timing, B against A (medians; ratio B/A, {CONFIDENCE:.0%} bootstrap CI){note}:\n{lines}"
    timed = [[PHASE_NAMES[m] for m in PHASE_SAMPLES if timed_samples(meta, m)] for meta in (meta_a, meta_b)]
    if not any(timed):
        return "timing: no timing recorded\n"
    return (f"timing: no timing recorded for a phase both traces timed (A: {', '.join(timed[0]) or 'none'}; "
            f"B: {', '.join(timed[1]) or 'none'})\n")


def _json(d, sources: tuple[str, str]) -> dict:
    import pandas as pd

    from ..analysis.per_step import by_label

    r = d.ranges
    prefill = r[(r["phase"] == "prefill") & ~r["per_step"]]
    return {"a": d.a, "b": d.b, "ranges": records(pd.DataFrame(d.to_rows())), "timing": _timing_json(d, sources),
            "totals": finite(d.totals), "steps": finite(d.steps),
            "groups": records(d.groups()), "prefill_groups": records(by_label(prefill))}


def _timing_json(d, sources: tuple[str, str]) -> list:
    return finite([{**c.as_dict(), "unit": "ms", "samples_a": sources[0], "samples_b": sources[1]} for c in d.timing])
