"""The command line of trace sets, where ``traces`` and ``diff`` hand over when a name is a set:

- ``workbench import --set NAME FILES...`` (``--split``, ``--run-id``, ``--variant``);
- ``workbench summary SET --by rank|rank,X|busy|straggler|collective``;
- ``workbench sql SET QUERY`` (every member at once, with a ``rank`` column);
- ``workbench diff SET_A SET_B`` (rank against rank).

Each takes ``--executor local|ray`` (``--workers``, ``--ray-address``): where the per-member
work runs (:mod:`workbench.sets.executors`).
"""

from __future__ import annotations

import sys

from .args import executor_of
from .output import cpu_columns, print_table

# What ``summary --by`` takes: a trace's groupings; for a set, ``rank`` (one row per member),
# ``rank,X`` (each member's summary by X), and the multi-rank views.
TRACE_BY = ("range", "layer", "kernel", "path", "step", "phase")
VIEWS = ("busy", "straggler", "collective")
GROUPINGS = (*TRACE_BY, "rank", *(f"rank,{b}" for b in TRACE_BY), *VIEWS)


def add_import_args(s) -> None:
    from .args import trace_name

    s.add_argument("--set", dest="set_name", metavar="NAME", default=None, type=trace_name("--set"),
                   help="import every SRC (files, stored traces, folders, globs) as the members of trace set NAME")
    s.add_argument("--split", default="auto",
                   help="with --set: how a capture holding several processes or GPUs becomes members: auto, "
                        "process, device or none (default auto: per process, else per device)")
    s.add_argument("--run-id", default="", help="with --set: the members' run id ({parent}: each file's folder name)")
    s.add_argument("--variant", default="", help="with --set: the members' variant")


def is_set(name: str, root) -> bool:
    """Whether ``name`` is a stored trace set (its name under ``root``, or its directory)."""
    from ..sets.store import find_set

    return find_set(name, root) is not None


def maybe_import(args, options) -> int | None:
    """``workbench import --set NAME SRC...`` (None for the import of one trace)."""
    from ..errors import WorkbenchError

    if not args.set_name:
        if args.more:
            raise WorkbenchError(args.more[0], "a second file: import several files as a trace set, with --set NAME")
        if args.split != "auto" or args.run_id or args.variant:  # else silently ignored
            raise WorkbenchError("--split, --run-id, --variant", "apply to a trace set, imported with --set NAME")
        return None
    if args.name or args.keep_raw or args.step_regex or args.prefill_regex:
        raise WorkbenchError(f"--set {args.set_name}", "--name, --keep-raw, --step-regex and --prefill-regex apply "
                             "to one trace, not to a set")
    from ..sets.importing import import_set as store_set
    from ..sets.store import read_set

    path = store_set(args.set_name, [args.src, *args.more], args.root, executor=executor_of(args), split=args.split,
                     run_id=args.run_id, variant=args.variant, overwrite=args.force, options=options)
    members = read_set(path)["members"]
    ranks = sorted({m["rank"] for m in members})
    print(f"stored trace set {path} ({len(members)} members, ranks {_span(ranks)}, "
          f"{sum(m['kernels'] for m in members)} work units)")
    return 0


def _span(ranks: list[int]) -> str:
    return f"{ranks[0]}-{ranks[-1]}" if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 1 \
        else ", ".join(map(str, ranks))


def _open(name: str, args):
    from ..sets.trace_set import open_set

    return open_set(name, args.root, executor_of(args))


def maybe_summary(args) -> int | None:
    """``workbench summary SET`` (None where the name is no set; ``--by`` a set's grouping
    for a trace is refused)."""
    from ..errors import WorkbenchError
    from ..textfmt import clean

    if not is_set(args.trace, args.root):
        if args.by not in TRACE_BY:
            raise WorkbenchError(args.trace, f"is not a trace set (--by {args.by} groups the members of one)")
        return None
    ts = _open(args.trace, args)
    if args.by == "busy":
        df = ts.steps()
    elif args.by == "straggler":
        df = ts.stragglers()
    elif args.by == "collective":
        df = ts.collectives(layer_regex=args.layer_regex)
    else:
        df = ts.summary(args.by, layer_regex=args.layer_regex)
    df = cpu_columns(ts.trace(member=ts.members["member"].iloc[0]), df)
    if not args.json:
        print(f"# {clean(ts.name)}: trace set of {len(ts.members)} members (ranks "
              f"{_span(sorted(set(ts.members['rank'])))}), by {args.by}")
    print_table(df, args.json)
    return 0


def maybe_sql(args) -> int | None:
    """``workbench sql SET QUERY`` (None where the name is no set)."""
    if not is_set(args.trace, args.root):
        return None
    print_table(_open(args.trace, args).sql(args.query), args.json)
    return 0


def maybe_diff(args) -> int | None:
    """``workbench diff`` of two sets (None where neither is one): one row per rank."""
    from ..errors import WorkbenchError

    sets = is_set(args.a, args.root), is_set(args.b, args.root)
    if not any(sets):
        return None
    if not all(sets):
        raise WorkbenchError(args.a if sets[0] else args.b, "is a trace set and the other side is not: diff compares "
                             "two traces or two sets")
    if args.fail_if:
        raise WorkbenchError("--fail-if", "gates apply to a diff of two traces, not of two sets")
    a, b = _open(args.a, args), _open(args.b, args)
    d = a.diff(b, layer_regex=args.layer_regex)
    if args.json:
        print_table(d, True)
        return 0
    shown = d.copy()
    if "changed" in shown:
        shown["changed"] = shown["changed"].map(lambda c: "; ".join(c[:3]) + (" ..." if len(c) > 3 else "")
                                                if isinstance(c, tuple) else "")
    print(f"# A: {a.name} ({len(a.members)} members), B: {b.name} ({len(b.members)} members), rank against rank; "
          "per step")
    print_table(shown, False)
    sys.stdout.write(_alike(d) + "\n")
    return 0


def _alike(d) -> str:
    """Whether every rank changed the same ranges, in a line."""
    both = d[d["status"] == "both"] if len(d) else d
    kinds = {frozenset(c) for c in both.get("changed", [])}
    if not len(both):
        return "no rank in common"
    if len(kinds) == 1:
        n = len(next(iter(kinds)))
        return f"every rank changed the same {n} range(s)" if n else "no rank changed a range"
    return f"the ranks differ in what changed ({len(kinds)} different sets of changed ranges)"
