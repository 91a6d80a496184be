"""``workbench export TRACE --chrome OUT``: a trace as a Chrome trace JSON, for Perfetto
(ui.perfetto.dev) or chrome://tracing, that also imports again as a Kineto trace."""

from __future__ import annotations


def add_parser(sub) -> None:
    s = sub.add_parser("export", help="write a trace as Chrome / Perfetto trace JSON (OUT ending .gz: gzipped)")
    s.add_argument("trace", help="stored trace name or directory, or any importable file")
    s.add_argument("--chrome", required=True, metavar="OUT",
                   help="the JSON file to write (replaced atomically; its directory must exist)")
    s.set_defaults(func=run)


def run(args) -> int:
    from .args import import_options
    from ..textfmt import clean
    from ..trace import open_trace
    from ..trace.chrome import write_chrome

    trace = open_trace(args.trace, args.root, import_options(args))
    path, events = write_chrome(trace, args.chrome)
    print(f"wrote {clean(str(path))} ({events} events)")
    return 0
