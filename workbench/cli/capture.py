"""``workbench capture``: a workload variant, a Python callable, or any command.

    workbench capture decoder --variant kv_write=fused --engine eager --backend torch
    workbench capture mypkg.mod:WORKLOAD --variant k=v          (a workload plugin)
    workbench capture --call mymodel:run --backend nsys         (a module:function, timed)
    workbench capture --backend nsys [--windows] -- python model.py --batch 8
    workbench capture --modules ['self_attn$'] -- python hf_model.py   (a range per nn.Module call)
"""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    from .args import assignment, backend, count, device, engine, regex, trace_name
    from ..engines import KINDS
    from ..vocabulary import CAPTURE_BACKENDS as BACKENDS
    from ..devices import DEVICES

    s = subparsers.add_parser(
        "capture", help="capture a command (-- COMMAND), a callable (--call) or a workload variant, and store it",
        usage="workbench capture [options] -- COMMAND [ARGS...]\n"
              "       workbench capture --call MODULE:FUNCTION [options]\n"
              "       workbench capture WORKLOAD [--variant KEY=VALUE ...] [options]")
    s.add_argument("workload", nargs="?", help="workload: a name (built in: decoder; or an installed plugin's) or "
                   "MODULE:ATTRIBUTE")
    s.add_argument("--call", metavar="MODULE:FUNCTION", help="time and record this function (no arguments), "
                   "imported from the current directory")
    s.add_argument("--backend", default="torch", type=backend, help=f"one of {', '.join(BACKENDS)} (default torch)")
    s.add_argument("--name", type=trace_name("--name"), help="stored trace name (default: from the script, function or workload variant)")
    s.add_argument("--windows", action="store_true", help="COMMAND: record only the first window the program opens "
                   "(workbench.window(), or cudaProfilerStart/Stop), not the whole run")
    s.add_argument("--modules", nargs="?", const=True, default=False, metavar="REGEX", type=regex("--modules"),
                   help="COMMAND (a Python program): a range around each call of the program's nn.Modules whose "
                        "path matches REGEX (default: decoder layers and their children, embeddings, final norm, "
                        "head; see wb.annotate_modules)")
    s.add_argument("--no-provenance", dest="provenance", action="store_false",
                   help="COMMAND: do not record what the compiler says of the program's torch.compile'd graphs (its "
                        "kernels then stay in the range around each compiled call)")
    s.add_argument("--keep-raw", action="store_true", help="store the raw capture (.nsys-rep / Kineto JSON, gzipped) "
                   "beside the tables")
    s.add_argument("--variant", action="append", metavar="KEY=VALUE", default=[], type=assignment,
                   help="workload variant setting, repeatable (decoder: kv_write=unfused|fused, "
                        "cache_rows=full|bucketed, ctx=N, layers=N, rows=N, ...)")
    s.add_argument("--engine", default="eager", type=engine, help=f"workload: one of {', '.join(KINDS)} (default eager)")
    # At least 1 each, as capture and profile_call require.
    s.add_argument("--steps", type=count("--steps"), default=None, help="recorded decode steps / calls (default 3 / 1)")
    s.add_argument("--repeats", type=count("--repeats"), default=10,
                   help="timed repetitions before the capture (default 10)")
    s.add_argument("--warmup", type=count("--warmup"), default=2, help="untimed warm-up repetitions (default 2)")
    s.add_argument("--device", type=device,
                   help=f"workload: one of {', '.join(DEVICES)}, cuda:N (default: cuda when available)")
    s.add_argument("--force", action="store_true", help="replace a stored trace of the same name")
    s.add_argument("--quiet", action="store_true", help="no progress output")
    s.set_defaults(func=run, command_argv=None, extra_hint=program_hint)


def program_hint(args, extra: list[str]) -> str:
    """What to say of words capture did not take (``capture --backend torch python x.py``):
    a program given without the ``--`` that must come before it."""
    return _dashes([args.workload, *extra] if args.workload else extra)


def _dashes(program: list[str]) -> str:
    import shlex

    return f"to capture a program, put -- before it: workbench capture [options] -- {shlex.join(program)}"


def _check_workload(workload: str) -> None:
    """A WORKLOAD that names no workload but a file or a command (``capture x.py``,
    ``capture python``): the program lacks its ``--``. Checked only where no workload has the
    name, so a workload named like a command on PATH is still captured."""
    import os
    import shutil

    from ..errors import WorkbenchError
    from ..workloads import names

    if ":" not in workload and workload not in names() and (os.path.exists(workload) or shutil.which(workload)):
        what = "a file" if os.path.exists(workload) else "a command"
        program = ["python", workload] if workload.endswith(".py") else [workload, "..."]
        raise WorkbenchError(f"workload {workload}", f"no workload has this name, but {what} has: {_dashes(program)}")


def _process_command() -> list[str] | None:
    """This process's exact argv when it is a ``workbench capture`` command line; otherwise
    (``main([...])`` called from Python) the capture records the equivalent CLI line."""
    return list(sys.orig_argv) if "capture" in sys.argv[1:] else None


def _which(args) -> str:
    from ..errors import WorkbenchError

    given = [k for k, v in (("-- COMMAND", args.command_argv), ("--call", args.call), ("WORKLOAD", args.workload))
             if v]
    if len(given) != 1:
        raise WorkbenchError("capture", "give one of: -- COMMAND, --call MODULE:FUNCTION, or a WORKLOAD"
                             + (f" (got {' and '.join(given)})" if given else ""))
    return given[0]


def run(args) -> int:
    from ..textfmt import clean

    what = _which(args)
    root, progress = args.root, not args.quiet
    if args.modules is not False and what != "-- COMMAND":
        from ..errors import WorkbenchError

        # A workload names its own ranges; a function can call wb.annotate_modules(model) itself.
        raise WorkbenchError("--modules", f"applies to -- COMMAND only, not {what} (in a function, use "
                             "wb.annotate_modules(model))")
    if what == "-- COMMAND":
        from ..capturing.command import capture_command

        trace = capture_command(args.command_argv, backend=args.backend, name=args.name, root=root,
                                windows=args.windows, keep_raw=args.keep_raw, overwrite=args.force, progress=progress,
                                modules=args.modules, provenance=args.provenance)
    elif what == "--call":
        from ..capturing.calls import profile_call

        trace = profile_call(args.call, name=args.name, backend=args.backend, warmup=args.warmup,
                             repeats=args.repeats, steps=args.steps or 1, root=root, overwrite=args.force,
                             keep_raw=args.keep_raw, progress=progress, command=_process_command())
    else:
        from ..workloads import parse_assignments
        from ..capturing import capture

        _check_workload(args.workload)
        trace = capture(args.workload, parse_assignments(args.variant), engine=args.engine, backend=args.backend,
                        name=args.name, steps=args.steps or 3, repeats=args.repeats, warmup=args.warmup,
                        device=args.device, root=root, overwrite=args.force, progress=progress,
                        command=_process_command(), keep_raw=args.keep_raw)
    print(clean(_describe(trace)))
    if what == "-- COMMAND" and (hint := _ranges_hint(trace, args)):
        print(f"workbench: hint: {hint}", file=sys.stderr)
    return 0


def _ranges_hint(trace, args) -> str | None:
    """What gives a program's capture ranges, where it recorded work but none (or only the
    steps and layers the import inferred from the kernel stream): without ranges every kernel
    is unattributed, and summaries by layer or range have nothing to group."""
    from ..capturing.program import parse
    from ..trace.manifest import COUNTS, INFERRED, section

    counts, inferred = section(trace.meta, COUNTS), section(trace.meta, INFERRED).get("applied")
    if hasattr(trace, "members") or (counts.get("ranges") and not inferred) or not counts.get("kernels"):
        return None
    said = "no ranges recorded" + (" (its steps and layers are inferred from the kernel stream)" if inferred else "")
    if parse(args.command_argv) is None:  # not a Python program: only its own NVTX ranges
        return f"{said}: add NVTX ranges to the program (nvtxRangePushA/nvtxRangePop) to attribute its kernels"
    more = "(--modules . for every nn.Module), or NVTX ranges in the program (wb.annotate)"
    if args.modules is not False:
        return f"{said}: --modules REGEX picks modules by their path {more}"
    return f"{said}: add --modules to get a range per layer/module {more}"


def _describe(trace) -> str:
    from .. import textfmt as fmt
    from ..analysis.stats import PHASE_SAMPLES
    from ..trace.manifest import CAPTURE, COUNTS, TIMING, capture_kind, section, work_units

    if hasattr(trace, "members"):  # a job of several ranks: a trace set
        from ..capturing.multirank import describe

        return describe(trace)
    meta = trace.meta
    counts = section(meta, COUNTS)
    unit = work_units(meta)
    line = f"{trace.path}: {counts['kernels']} {unit}s, {counts['ranges']} ranges"
    timing, cap = section(meta, TIMING), section(meta, CAPTURE)
    # The samples diffs and reports compare (analysis.stats.PHASE_SAMPLES): each run's mean
    # decode step where recorded (the number a report shows), else each step or call.
    for metric, what in (("decode_step_ms", "decode step"), ("call_ms", "call")):
        key = next((k for k in PHASE_SAMPLES[metric] if k in timing), None)
        if key is not None:
            d = timing[key]
            per = " (mean per run)" if key.endswith("_per_repeat") else ""
            line += (f", {what}{per} {fmt.ms(d['median'])} ms median of {d.get('n', '?')} (min {fmt.ms(d['min'])}, "
                     f"max {fmt.ms(d['max'])}, {timing['timer']})")
    if "wall_s" in cap and capture_kind(meta) == "command":
        line += f", exit {cap['exit_status']} after {cap['wall_s']:.2f} s"
    windows = cap.get("windows") or {}
    if windows.get("mode") == "windows" and (windows.get("opened") or 0) > (windows.get("recorded") or 0):
        line += f" (recorded the first of {windows['opened']} windows)"
    return line
