"""``workbench recipe NAME TRACE``: an Nsight Systems recipe run on the stored trace's
kept capture, its output kept at ``<trace>/recipes/NAME/`` (:mod:`workbench.capturing.recipes`)."""

from __future__ import annotations


def add_parser(sub) -> None:
    from .args import trace_name

    s = sub.add_parser("recipe", help="run an nsys recipe (nvtx_gpu_proj_sum, ...) on a stored trace's kept "
                                      ".nsys-rep and keep its output with the trace")
    # A recipe is a directory name of nsys's recipe package: checked as a stored name is.
    s.add_argument("name", type=trace_name("recipe"), help="the recipe, as `nsys recipe --help` lists them (e.g. nvtx_gpu_proj_trace)")
    s.add_argument("trace", help="stored trace name or directory, captured or imported with --keep-raw")
    s.set_defaults(func=run)


def run(args) -> int:
    from ..capturing.recipes import run_recipe
    from ..textfmt import clean
    from ..trace import open_trace

    out = run_recipe(args.name, open_trace(args.trace, args.root))
    print(f"wrote {clean(str(out))}")
    return 0
