"""``workbench diff A B``: per-range and per-layer comparison, aligned kernels, CI gates."""

from __future__ import annotations

import json
import sys

from .textfmt import MICRO_ASCII, num, us


def add_parser(sub) -> None:
    from .cli import add_phase_args

    s = sub.add_parser("diff", help="compare two traces range by range (which kernels were fused away)")
    s.add_argument("a", help="base trace (stored name/dir or capture file)")
    s.add_argument("b", help="changed trace")
    s.add_argument("--layer-regex", default=None)
    add_phase_args(s)
    s.add_argument("--top", type=int, default=10, help="changed ranges to show (default 10)")
    s.add_argument("--json", action="store_true", help="print a JSON list of per-range rows")
    s.add_argument("--fail-if", action="append", default=[], metavar="GATE",
                   help="exit 1 if B is worse: kernels_per_step>N, gpu_time_per_step>N%%, kernels>N, gpu_time>N%% "
                        "(repeatable)")
    s.set_defaults(func=run)


def _us(ns: float) -> str:
    """Terminal output stays ASCII."""
    return us(ns, MICRO_ASCII)


def run(args) -> int:
    from .analysis.diff import diff
    from .analysis.gates import check_gates
    from .textsafe import clean
    from .cli import apply_phase_args, import_options
    from .trace import open_trace

    a = open_trace(args.a, args.root, import_options(args))
    b = open_trace(args.b, args.root, import_options(args))
    for t in (a, b):
        apply_phase_args(t, args)
    d = diff(a, b, layer_regex=args.layer_regex)
    failed = check_gates(d, args.fail_if)
    if args.json:
        from .cli import _records
        import pandas as pd

        rows = _records(pd.DataFrame(d.to_rows()))
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
    else:
        _text(d, args.top, clean)
    for f in failed:
        print(f"workbench: gate failed: {f}", file=sys.stderr)
    return 1 if failed else 0


def _text(d, top: int, clean) -> None:
    t = d.totals
    out = sys.stdout.write
    out(f"A: {clean(d.a)}: {t['steps_a']} step(s), {num(t['kernels_per_step_a'])} kernels/step, "
        f"{_us(t['gpu_time_per_step_ns_a'])} GPU time/step\n")
    out(f"B: {clean(d.b)}: {t['steps_b']} step(s), {num(t['kernels_per_step_b'])} kernels/step, "
        f"{_us(t['gpu_time_per_step_ns_b'])} GPU time/step\n")
    out(f"kernels/step {num(t['kernels_per_step_a'])} -> {num(t['kernels_per_step_b'])}; "
        f"GPU time/step {_us(t['gpu_time_per_step_ns_a'])} -> {_us(t['gpu_time_per_step_ns_b'])}; "
        f"total kernels {t['kernels_a']} -> {t['kernels_b']}\n")
    if d.common == 0:
        out("\nno range in common between A and B: their range paths differ entirely "
            f"({t['only_a_ranges']} only in A, {t['only_b_ranges']} only in B); nothing to compare range by range.\n")
    else:
        changed = d.changed(top)
        out(f"\n{d.common} range(s) in common; {len(d.ranges[(d.ranges.kernels_a != d.ranges.kernels_b) | (d.ranges.gpu_time_ns_a != d.ranges.gpu_time_ns_b)])} changed. Top {len(changed)} by GPU time change (per step):\n")
        for r in changed.itertuples():
            al = d.alignments.get(r.range)
            out(f"  {clean(r.range)}: kernels {num(r.kernels_a)} -> {num(r.kernels_b)}, GPU {_us(r.gpu_time_ns_a)} -> "
                f"{_us(r.gpu_time_ns_b)}" + (f"\n      {clean(al.describe())}" if al and r.status == "both" else "") + "\n")
        lay = d.layers[d.layers["layer"] >= 0]
        if len(lay):
            out("\nper layer (kernels per step, A -> B):\n")
            for (layer, grp) in lay.groupby("layer"):
                cells = ", ".join(f"{clean(str(x.range))} {num(x.kernels_a)}->{num(x.kernels_b)}" for x in grp.itertuples())
                out(f"  layer {layer}: {cells}\n")
    for status, label in (("only_a", "only in A"), ("only_b", "only in B")):
        rows = d.ranges[d.ranges["status"] == status]
        if len(rows):
            out(f"\n{label} ({len(rows)}):\n")
            for r in rows.head(top).itertuples():
                out(f"  {clean(r.range)}: {num(r.kernels_a if status == 'only_a' else r.kernels_b)} kernels/step\n")
            if len(rows) > top:
                out(f"  ... {len(rows) - top} more\n")
