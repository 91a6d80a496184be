"""The entry point: global options, every subcommand (imported here, explicitly), and the rule
that every user error prints one line ``workbench: <where>: <problem>`` and exits 2."""

from __future__ import annotations

import sys

from . import bench, capture, demo, diff, export, recipe, report, traces
from .args import Parser, add_global_args


def build_parser() -> Parser:
    p = Parser(prog="workbench", description="GPU performance workbench for LLM inference engines")
    add_global_args(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    traces.add_parsers(sub)
    for module in (capture, diff, bench, report, demo, export, recipe):
        module.add_parser(sub)
    for command in sub.choices.values():  # every command reads the store: --root before or after its name
        add_global_args(command, in_command=True)
    p.needs = f"a command, one of {', '.join(sub.choices)}"
    return p


def main(argv: list[str] | None = None) -> int:
    from ..errors import WorkbenchError
    from ..textfmt import one_line

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `capture ... -- COMMAND ARGS`: everything after the first `--` is the user's command,
    # options included, so it is split off before argparse sees it.
    tail = None
    if "--" in argv and "capture" in argv[:argv.index("--")]:
        argv, tail = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = None
    try:
        args, extra = parser.parse_known_args(argv)  # every option checked here (args.py): one line if bad
        if extra:  # what argparse would refuse, with the command's hint where it has one (capture: the --)
            hint = getattr(args, "extra_hint", None)
            raise WorkbenchError(args.command, f"unrecognized arguments: {' '.join(extra)}"
                                 + (f" ({hint(args, extra)})" if hint else ""))
        if tail is not None:
            args.command_argv = tail
        return int(args.func(args) or 0)
    except WorkbenchError as e:
        print(f"workbench: {one_line(e.cli_message(), 2000)}", file=sys.stderr)
        return e.exit_code
    except MemoryError:
        where = getattr(args, "src", None) or getattr(args, "trace", None) or getattr(args, "command", "workbench")
        print(f"workbench: {one_line(str(where), 2000)}: out of memory (the trace or the result is too large)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
