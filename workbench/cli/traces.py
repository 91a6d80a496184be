"""``workbench import``, ``summary``, ``sql`` and ``list``: the trace store from the command line.
A name that is a trace set is handed to :mod:`.sets`."""

from __future__ import annotations

from .args import (add_executor_args, add_phase_args, apply_phase_args, import_options, layer_regex, query,
                   trace_name)
from .output import cpu_columns, print_source_note, print_table
from .sets import GROUPINGS, add_import_args, maybe_import, maybe_sql, maybe_summary


def add_parsers(sub) -> None:
    s = sub.add_parser("import", help="import a capture (nsys .sqlite/.nsys-rep, torch.profiler .json[.gz]) into the store")
    s.add_argument("src")
    # default=[]: argparse lists a `*` positional without a default among the required ones.
    s.add_argument("more", nargs="*", default=[], help="more captures, with --set")
    s.add_argument("--name", type=trace_name("--name"), help="stored trace name (default: from the file name)")
    s.add_argument("--force", action="store_true", help="replace a stored trace of the same name")
    s.add_argument("--keep-raw", action="store_true",
                   help="also keep SRC itself in the trace directory, under raw/ (gzipped)")
    add_phase_args(s)
    add_import_args(s)
    add_executor_args(s)
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("summary", help="kernel counts and GPU time per range, layer, kernel, path, step or phase")
    s.add_argument("trace", help="stored trace name or directory, or any importable file")
    s.add_argument("--by", choices=GROUPINGS, default="range", metavar="BY",
                   help="range, layer, kernel, path, step or phase; of a trace set also rank, rank,X (X one of "
                        "those), busy, straggler or collective (default range)")
    s.add_argument("--layer-regex", default=None, type=layer_regex, help="regex whose first group is the layer index")
    add_phase_args(s)
    s.add_argument("--json", action="store_true", help="print a JSON list of rows")
    add_executor_args(s)
    s.set_defaults(func=cmd_summary)

    s = sub.add_parser("sql", help="DuckDB SQL over kernels, ranges, api, memcpy, memset and projected")
    s.add_argument("trace")
    s.add_argument("query", type=query, help="one SELECT statement; it reads the trace's tables and nothing else")
    s.add_argument("--layer-regex", default=None, type=layer_regex)
    add_phase_args(s)
    s.add_argument("--json", action="store_true")
    add_executor_args(s)
    s.set_defaults(func=cmd_sql)

    s = sub.add_parser("list", help="list stored traces and trace sets: kind, size, when stored, source")
    s.add_argument("--json", action="store_true", help="print a JSON list of rows (size in bytes, stored_at in UTC)")
    s.set_defaults(func=cmd_list)


def cmd_import(args) -> int:
    from pathlib import Path

    from ..trace import import_file, save
    from ..trace.manifest import COUNTS, section
    from ..trace.store import check_free

    if (done := maybe_import(args, import_options(args))) is not None:  # import --set NAME FILES...
        return done
    name = args.name or _default_name(args.src)
    # A taken name is refused before the file is read; one made from the file name says so,
    # as two file names can make one trace name ("x:1.json", "x;1.json").
    check_free(name, args.root, args.force, derived_from=None if args.name else Path(args.src).name)
    trace = import_file(args.src, import_options(args))
    apply_phase_args(trace, args)
    path = save(trace, name, args.root, overwrite=args.force, raw=[args.src] if args.keep_raw else None)
    counts = ", ".join(f"{v} {k}" for k, v in section(trace.meta, COUNTS).items())
    kept = ", raw capture kept" if args.keep_raw else ""
    print(f"stored {path} ({counts}{kept})")
    print_source_note(trace.meta)
    return 0


def _default_name(src: str) -> str:
    from pathlib import Path

    from ..trace.store import safe_name

    base = Path(src).name
    for suffix in (".gz", ".json", ".sqlite", ".nsys-rep"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return safe_name(base, "trace")


def cmd_summary(args) -> int:
    from ..analysis import summary
    from ..trace import open_trace
    from ..trace.manifest import work_units

    if (done := maybe_summary(args)) is not None:  # a trace set
        return done
    trace = open_trace(args.trace, args.root, import_options(args))
    if args.by == "kernel" and work_units(trace.meta) == "trt_layer":
        # An empty or per-layer table here would read as "no kernels ran"; exit 2 says the
        # question does not fit this trace.
        from ..errors import WorkbenchError

        raise WorkbenchError(trace.label, "has no kernels: a TensorRT profile times each engine layer, not its "
                                          "kernels; use --by range (or layer, path)")
    apply_phase_args(trace, args)
    # Nsight Systems' GPU projection beside the summed kernel time, where there are kernels.
    projected = args.by != "kernel" and work_units(trace.meta) == "kernel"
    df = cpu_columns(trace, summary(trace, by=args.by, layer_regex=args.layer_regex, projection=projected))
    if not args.json:
        from ..textfmt import clean
        from ..trace.compiled import compiled_note
        from ..trace.manifest import graph_note, inferred_note

        print(f"# {clean(trace.label)}: {len(trace.kernels)} {work_units(trace.meta)}s, "
              f"{len(trace.ranges)} ranges, by {args.by}")
        for note in (graph_note(trace.meta), compiled_note(trace.meta), inferred_note(trace.meta)):
            if note:
                print(f"# {note}")
        print_source_note(trace.meta)
        if projected:
            from ..analysis.gpu_projection import NOTE

            print(f"# {NOTE}")
    print_table(df, args.json)
    return 0


def cmd_sql(args) -> int:
    from ..analysis import project
    from ..trace import open_trace

    if (done := maybe_sql(args)) is not None:  # a trace set
        return done
    trace = open_trace(args.trace, args.root, import_options(args))
    apply_phase_args(trace, args)
    project(trace, args.layer_regex)
    print_table(trace.sql(args.query), args.json)
    return 0


def cmd_list(args) -> int:
    import pandas as pd

    from ..sets.store import set_rows
    from ..trace.store.listing import COLUMNS, trace_rows

    rows = sorted(trace_rows(args.root) + set_rows(args.root), key=lambda r: r["name"])
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    if not args.json:
        from ..textfmt import size

        df = pd.DataFrame({"name": df["name"], "kind": df["kind"], "size": df["size_bytes"].map(size),
                           "stored": df["stored_at"].map(_local_time), "source": df["source"]})
    print_table(df, args.json, left=("name", "kind", "source"), width=100)
    return 0


def _local_time(stamp) -> str:
    """A manifest's ``stored_at`` (UTC) in this machine's time, to the minute; ``-`` where
    unknown, and a stamp it cannot read as it is."""
    from datetime import datetime, timezone

    if not isinstance(stamp, str):
        return "-"
    try:
        when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return stamp
    return when.astimezone().strftime("%Y-%m-%d %H:%M")
