"""``workbench report BASE FIX [MORE...] -o report.html --md report.md [--sweep RESULTS.json]``."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    s = sub.add_parser("report", help="self-contained HTML and PR-ready Markdown from stored traces (and a sweep)")
    s.add_argument("base", help="base trace: stored name/dir or capture file")
    s.add_argument("fix", help="changed trace")
    s.add_argument("more", nargs="*", help="more traces to show beside base and fix, or a sweep results .json")
    s.add_argument("-o", "--html", dest="html", default=None, help="write the HTML report here")
    s.add_argument("--md", default=None, help="write the Markdown report here (without -o/--md: print it)")
    s.add_argument("--sweep", default=None, help="sweep results JSON (latency vs context length per variant)")
    s.add_argument("--title", default=None)
    s.add_argument("--allow-mixed", action="store_true", help="allow traces of different workloads")
    s.add_argument("--layer-regex", default=None, help="regex whose first group is the layer index")
    s.set_defaults(func=run)


def _is_sweep(path: str) -> bool:
    """A positional ``.json`` file without ``traceEvents`` is sweep results, not a trace."""
    from pathlib import Path

    p = Path(path)
    if p.suffix.lower() != ".json" or not p.is_file():
        return False
    with open(p, "rb") as fh:
        head = fh.read(1 << 20)
    return b'"traceEvents"' not in head and head.lstrip()[:1] in (b"{", b"[")


def run(args) -> int:
    from ..errors import WorkbenchError
    from . import report

    more, sweep = [], args.sweep
    for m in args.more:
        if _is_sweep(m):
            if sweep is not None:
                raise WorkbenchError(m, "a second sweep results file; give one (--sweep or positional)")
            sweep = m
        else:
            more.append(m)
    r = report(args.base, args.fix, *more, html=args.html, md=args.md, sweep=sweep, title=args.title,
               allow_mixed=args.allow_mixed, root=args.root, layer_regex=args.layer_regex)
    if not r.written:
        sys.stdout.write(r.markdown)
    else:
        for p in r.written:
            print(f"wrote {p}")
    return 0
