"""``workbench report BASE FIX [MORE...] -o report.html --md report.md [--sweep RESULTS.json]``."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    from .args import layer_regex

    s = sub.add_parser("report", help="self-contained HTML and PR-ready Markdown from stored traces (and a sweep)",
                       needs="two traces, the base and the changed one, then optional more traces or a sweep "
                             "results .json")
    s.add_argument("base", help="base trace: stored name/dir or capture file")
    s.add_argument("fix", help="changed trace")
    # default=[]: argparse lists a `*` positional without a default among the required ones.
    s.add_argument("more", nargs="*", default=[], help="more traces to show beside base and fix, or a sweep "
                                                       "results .json")
    s.add_argument("-o", "--html", dest="html", default=None, help="write the HTML report here")
    s.add_argument("--md", default=None, help="write the Markdown report here (without -o/--md: print it)")
    s.add_argument("--sweep", default=None, help="sweep results JSON (latency vs context length per variant)")
    s.add_argument("--title", default=None)
    s.add_argument("--allow-mixed", action="store_true", help="allow traces of different workloads")
    s.add_argument("--layer-regex", default=None, type=layer_regex, help="regex whose first group is the layer index")
    s.set_defaults(func=run)


def run(args) -> int:
    from ..errors import WorkbenchError
    from ..reporting import report
    from ..reporting.html import require_plotly

    html, missing = args.html, None
    if html is not None:
        try:
            require_plotly()
        except WorkbenchError as e:  # the Markdown report needs no plotly: it is still made
            html, missing = None, e
    r = report(args.base, args.fix, *args.more, html=html, md=args.md, sweep=args.sweep, title=args.title,
               allow_mixed=args.allow_mixed, root=args.root, layer_regex=args.layer_regex)
    if not r.written:
        sys.stdout.write(r.markdown)
    else:
        for p in r.written:
            print(f"wrote {p}")
    if missing is not None:
        raise WorkbenchError(args.html, f"not written: {missing.problem}; the Markdown report was "
                                        f"{'written' if r.written else 'printed'}")
    return 0
