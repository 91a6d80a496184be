"""``workbench recipe NAME TRACE [-- ARGS]``: an Nsight Systems recipe run on the stored trace's
kept capture, its output kept at ``<trace>/recipes/NAME/`` (:mod:`workbench.capturing.recipes`)."""

from __future__ import annotations


def add_parser(sub) -> None:
    s = sub.add_parser("recipe", help="run an nsys recipe (nvtx_gpu_proj_sum, ...) on a stored trace's kept "
                                      ".nsys-rep and keep its output with the trace")
    s.add_argument("name", help="the recipe, as `nsys recipe --help` lists them (e.g. nvtx_gpu_proj_trace)")
    s.add_argument("trace", help="stored trace name or directory, captured or imported with --keep-raw")
    s.add_argument("recipe_args", nargs="*", help="further arguments for the recipe (after --)")
    s.set_defaults(func=run)


def run(args) -> int:
    from ..capturing.recipes import run_recipe
    from ..textfmt import clean
    from ..trace import open_trace

    out = run_recipe(args.name, open_trace(args.trace, args.root), list(args.recipe_args))
    print(f"wrote {clean(str(out))}")
    return 0
