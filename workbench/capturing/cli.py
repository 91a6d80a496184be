"""``workbench capture WORKLOAD --variant key=value ... --engine E --backend B [--name N]``."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    from ..engines import KINDS
    from . import BACKENDS, DEVICES

    s = subparsers.add_parser("capture", help="run a workload variant, capture it (torch.profiler or nsys), store it")
    s.add_argument("workload", help="workload name (built in: decoder)")
    s.add_argument("--variant", action="append", metavar="KEY=VALUE", default=[],
                   help="variant setting, repeatable (decoder: kv_write=unfused|fused, cache_rows=full|bucketed, "
                        "ctx=N, layers=N, rows=N, ...)")
    s.add_argument("--engine", default="eager", help=f"one of {', '.join(KINDS)} (default eager)")
    s.add_argument("--backend", default="torch", help=f"one of {', '.join(BACKENDS)} (default torch)")
    s.add_argument("--name", help="stored trace name (default: from workload, changed variant keys, engine, backend)")
    s.add_argument("--steps", type=int, default=3, help="decode steps recorded (default 3)")
    s.add_argument("--repeats", type=int, default=10, help="timed repetitions before the capture (default 10)")
    s.add_argument("--warmup", type=int, default=2, help="untimed warm-up repetitions (default 2)")
    s.add_argument("--device", help=f"one of {', '.join(DEVICES)} (default: cuda when available)")
    # SUPPRESS keeps the top-level --root when this one is not given.
    s.add_argument("--root", default=argparse.SUPPRESS, help="trace store directory")
    s.add_argument("--force", action="store_true", help="replace a stored trace of the same name")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=run)


def _process_command() -> list[str] | None:
    """This process's exact argv when it is a ``workbench capture`` command line; otherwise
    (``main([...])`` called from Python) ``capture`` records the equivalent CLI line."""
    return list(sys.orig_argv) if "capture" in sys.argv[1:] else None


def run(args) -> int:
    from ..workloads import parse_assignments
    from . import capture

    trace = capture(args.workload, parse_assignments(args.variant), engine=args.engine, backend=args.backend,
                    name=args.name, steps=args.steps, repeats=args.repeats, warmup=args.warmup,
                    device=args.device, root=getattr(args, "root", None), overwrite=args.force,
                    progress=not args.quiet, command=_process_command())
    timing = trace.meta["timing"]
    line = f"{trace.path}: {trace.meta['counts']['kernels']} work units"
    if "decode_step_ms" in timing:
        d = timing["decode_step_ms"]
        line += f", decode step {d['median']:.3f} ms (min {d['min']:.3f}, max {d['max']:.3f}, {timing['timer']})"
    print(line)
    return 0
