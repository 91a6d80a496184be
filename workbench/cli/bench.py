"""``workbench bench A B [C...]``: interleaved A/B timing (:mod:`workbench.capturing.bench`)."""

from __future__ import annotations

import json
import sys

from ..textfmt import ms


def add_parser(sub) -> None:
    from .args import count, device

    s = sub.add_parser("bench", help="time stored variants (or WORKLOAD:key=value,...) interleaved in one process, "
                                     "with confidence intervals against the first")
    s.add_argument("refs", nargs="+", metavar="VARIANT",
                   help="a stored trace captured from a workload or a --call, or WORKLOAD:key=value,... "
                        "(engine=KIND picks the engine; WORKLOAD: alone is its defaults); the first is the base")
    # At least 2 rounds: each gives every variant one sample (capturing.bench).
    s.add_argument("--rounds", type=count("--rounds", 2), default=10,
                   help="rounds; each runs every variant once (default 10)")
    s.add_argument("--device", type=device,
                   help="device the workloads run on (default: the traces' own, else cuda when available)")
    s.add_argument("--steps", type=count("--steps"), default=None, help="decode steps per repetition (default: each trace's own, "
                                                           "else 3)")
    s.add_argument("--store", action="store_true",
                   help="write each stored trace's samples into its manifest as timing_bench (workbench diff "
                        "then compares those)")
    s.add_argument("--trust-code", action="store_true",
                   help="import and run the module:function (or plugin workload) a stored trace names")
    s.add_argument("--json", action="store_true", help="print the samples and comparisons as JSON")
    s.add_argument("--quiet", action="store_true", help="no progress output")
    s.set_defaults(func=run)


def run(args) -> int:
    from ..capturing.bench import bench
    from ..textfmt import clean

    r = bench(*args.refs, rounds=args.rounds, device=args.device, store=args.store, steps=args.steps,
              root=args.root, trust_code=args.trust_code, progress=not args.quiet)
    if args.json:
        out = {"labels": r.labels, "rounds": r.rounds, "device": r.device, "orders": r.orders, "timing": r.timing,
               "comparisons": {k: [c.as_dict() for c in v] for k, v in r.comparisons.items()}, "stored": r.stored}
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
        return 0
    _text(r, clean)
    return 0


def _text(r, clean) -> None:
    from ..analysis.stats import PHASE_SAMPLES
    from .diff import PHASE_NAMES, timing_line

    out = sys.stdout.write
    first = r.timing[r.labels[0]]
    out(f"bench: {r.rounds} rounds on {r.device} ({first['timer']} clock), each variant once per round, in an "
        f"order shuffled each round (seed {first['seed']}); per round: median (min, max)\n")
    for i, label in enumerate(r.labels):
        t, cells = r.timing[label], []
        for metric, keys in PHASE_SAMPLES.items():
            key = next((k for k in keys if isinstance(t.get(k), dict)), None)
            if key is not None:
                d = t[key]
                cells.append(f"{PHASE_NAMES[metric]} {ms(d['median'])} ms ({ms(d['min'])}-{ms(d['max'])})")
        out(f"  {clean(label)}{' (base)' if i == 0 else ''}: {'; '.join(cells)}\n")
    for label, comparisons in r.comparisons.items():
        out(f"\n{clean(label)} against {clean(r.labels[0])}:\n")
        for c in comparisons:
            out(f"  {timing_line(c)}\n")
    if r.stored:
        out(f"\nstored as timing_bench in {', '.join(clean(p) for p in r.stored)}\n")
