"""``workbench`` command line: a thin layer over the public API.

Every user error prints one line ``workbench: <where>: <problem>`` and exits 2.
"""

from __future__ import annotations

import json
import sys

from .arguments import Parser, count, layer_regex, query, regex, trace_name


def _print_table(df, as_json: bool, out=None) -> None:
    out = out or sys.stdout
    if as_json:
        out.write(json.dumps(_records(df), indent=1) + "\n")
        return
    if not len(df):
        out.write("(no rows)\n")
        return
    import pandas as pd

    from .textsafe import one_line

    shown = df.copy()
    for c in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[c]):
            # One terminal line per row, and no 50 MB cell: pandas pads every cell to its column.
            shown[c] = shown[c].astype(object).map(lambda v: one_line(str(v), 200))
    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                           "display.max_colwidth", 80):
        out.write(shown.to_string(index=False) + "\n")


def _records(df) -> list[dict]:
    import math

    rows = []
    for rec in df.to_dict(orient="records"):
        row = {}
        for k, v in rec.items():
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            row[str(k)] = v
        rows.append(row)
    return rows


def import_options(args):
    """The import options of a CLI run: its --threads, and memory handed back to the system
    as it is freed (the process does nothing but this command)."""
    from .trace import ImportOptions

    return ImportOptions(threads=args.threads, memory="release")


def add_phase_args(s) -> None:
    """--step-regex / --prefill-regex: which ranges are steps and which are prefill."""
    s.add_argument("--step-regex", default=None, type=regex("--step-regex"),
                   help="ranges that are steps, at any depth (default: ^(step|ProfilerStep); a trace without "
                        "any takes each model call as a step)")
    s.add_argument("--prefill-regex", default=None, type=regex("--prefill-regex"),
                   help="ranges that are prefill work (default: ^prefill)")


def apply_phase_args(trace, args) -> None:
    from .analysis.steps import set_phases

    set_phases(trace, args.step_regex, args.prefill_regex)


def cmd_import(args) -> int:
    from pathlib import Path

    from .sets_cli import maybe_import
    from .trace import import_file, save
    from .trace.store import check_free

    if (done := maybe_import(args, import_options(args))) is not None:  # import --set NAME FILES...
        return done
    name = args.name or _default_name(args.src)
    # A taken name is refused before the file is read; one made from the file name says so,
    # as two file names can make one trace name ("x:1.json", "x;1.json").
    check_free(name, args.root, args.force, derived_from=None if args.name else Path(args.src).name)
    trace = import_file(args.src, import_options(args))
    apply_phase_args(trace, args)
    path = save(trace, name, args.root, overwrite=args.force, raw=[args.src] if args.keep_raw else None)
    counts = ", ".join(f"{v} {k}" for k, v in trace.meta["counts"].items())
    kept = ", raw capture kept" if args.keep_raw else ""
    print(f"stored {path} ({counts}{kept})")
    _print_source_note(trace.meta)
    return 0


def _print_source_note(meta: dict) -> None:
    """The importer's note on the source (GPU activity not imported, one process assumed), as
    one ``# ...`` line."""
    from .textsafe import one_line
    from .trace.schema import source_note

    if source_note(meta):
        print(f"# {one_line(source_note(meta), 2000)}")


def _default_name(src: str) -> str:
    from pathlib import Path

    from .trace.store import safe_name

    base = Path(src).name
    for suffix in (".gz", ".json", ".sqlite", ".nsys-rep"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return safe_name(base, "trace")


def cmd_summary(args) -> int:
    from .analysis import summary
    from .sets_cli import maybe_summary
    from .trace import open_trace
    from .trace.schema import work_units

    if (done := maybe_summary(args, _print_table, cpu_columns)) is not None:  # a trace set
        return done
    trace = open_trace(args.trace, args.root, import_options(args))
    if args.by == "kernel" and work_units(trace.meta) == "trt_layer":
        # An empty or per-layer table here would read as "no kernels ran"; exit 2 says the
        # question does not fit this trace.
        from .errors import WorkbenchError

        raise WorkbenchError(trace.label, "has no kernels: a TensorRT profile times each engine layer, not its "
                                          "kernels; use --by range (or layer, path)")
    apply_phase_args(trace, args)
    df = cpu_columns(trace, summary(trace, by=args.by, layer_regex=args.layer_regex))
    if not args.json:
        from .textsafe import clean
        from .trace.schema import graph_note

        print(f"# {clean(trace.label)}: {len(trace.kernels)} {work_units(trace.meta)}s, "
              f"{len(trace.ranges)} ranges, by {args.by}")
        if graph_note(trace.meta):
            print(f"# {graph_note(trace.meta)}")
        _print_source_note(trace.meta)
    _print_table(df, args.json)
    return 0


# A CPU-only trace's work units are CPU ops timed on the host: its columns say so.
_CPU_COLUMNS = {"kernels": "cpu_ops", "gpu_time_ns": "cpu_time_ns", "kernels_per_instance": "cpu_ops_per_instance",
                "kernel": "cpu_op", "graph_kernels": "graph_cpu_ops"}


def cpu_columns(trace, df):
    """``df`` with a CPU-only trace's column names (``cpu_ops``, ``cpu_time_ns``, ``cpu_op``)."""
    from .trace.schema import work_units

    if work_units(trace.meta) != "cpu_op":
        return df
    return df.rename(columns=_CPU_COLUMNS)


def cmd_sql(args) -> int:
    from .analysis import project
    from .sets_cli import maybe_sql
    from .trace import open_trace

    if (done := maybe_sql(args, _print_table)) is not None:  # a trace set
        return done
    trace = open_trace(args.trace, args.root, import_options(args))
    apply_phase_args(trace, args)
    project(trace, args.layer_regex)
    _print_table(trace.sql(args.query), args.json)
    return 0


def cmd_list(args) -> int:
    from .trace import list_traces
    from .trace.store.sets import list_sets

    for name in list_traces(args.root):
        print(name)
    for name in list_sets(args.root):
        print(f"{name} (trace set)")
    return 0


def build_parser() -> Parser:
    from .sets_cli import GROUPINGS, add_executor_args, add_import_args

    p = Parser(prog="workbench", description="GPU performance workbench for LLM inference engines")
    p.add_argument("--root", default=None, help="trace store directory (default: $WORKBENCH_TRACES or ./traces)")
    p.add_argument("--threads", type=count("--threads"), default=None,
                   help="most threads an import uses (default: one per available CPU)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("import", help="import a capture (nsys .sqlite/.nsys-rep, torch.profiler .json[.gz]) into the store")
    s.add_argument("src")
    s.add_argument("more", nargs="*", help="more captures, with --set")
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

    s = sub.add_parser("list", help="list stored traces (and trace sets)")
    s.set_defaults(func=cmd_list)

    for module in ("capturing.cli", "diff_cli", "bench_cli", "reporting.cli", "demo", "export_cli"):
        _optional(sub, module)
    return p


def _optional(sub, module: str) -> None:
    """Subcommands whose modules register themselves (``add_parser``) when present."""
    import importlib

    try:
        mod = importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError as e:
        parts = f"{__package__}.{module}".split(".")
        if e.name in {".".join(parts[:i]) for i in range(2, len(parts) + 1)}:
            return  # that subcommand is not part of this install
        raise
    mod.add_parser(sub)


def main(argv: list[str] | None = None) -> int:
    from .errors import WorkbenchError

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `capture ... -- COMMAND ARGS`: everything after the first `--` is the user's command,
    # options included, so it is split off before argparse sees it.
    tail = None
    if "--" in argv and "capture" in argv[:argv.index("--")]:
        argv, tail = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = None
    try:
        args = parser.parse_args(argv)  # every option checked here (arguments.py): one line if bad
        if tail is not None:
            args.command_argv = tail
        return int(args.func(args) or 0)
    except WorkbenchError as e:
        from .textsafe import one_line

        print(f"workbench: {one_line(str(e), 2000)}", file=sys.stderr)
        return e.exit_code
    except MemoryError:
        from .textsafe import one_line

        where = getattr(args, "src", None) or getattr(args, "trace", None) or getattr(args, "command", "workbench")
        print(f"workbench: {one_line(str(where), 2000)}: out of memory (the trace or the result is too large)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
