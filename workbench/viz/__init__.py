"""Figures (plotly) and widgets (ipywidgets) over traces and trace diffs.

Nothing here imports plotly or ipywidgets until a figure or widget is asked for::

    from workbench import viz
    viz.layer_counts(d, range="kv_write")        # d = workbench.diff(a, b)
    viz.timeline(trace, "layer_03/kv_write")         # view="auto": GPU time only where the host dominates
    viz.timeline_pair((a, b), "layer_03/kv_write")   # base and fix on one time axis, one kernel colour map
    viz.rank_steps(wb.open_set("cpu4"))              # per rank and step, the warm-up left out
    viz.TraceDiffWidget(a="ref-h200-kvwrite-unfused-nsys", b="ref-h200-kvwrite-fused-nsys")

A kernel keeps one colour in every figure of a session (:mod:`.colors`); layers and names with
numbers read in numeric order; long names are wrapped beside horizontal bars, never rotated.
"""

from __future__ import annotations

from importlib import import_module

# Public name -> the module that defines it: a submodule's short name, or a module's dotted
# name. No public name is also a submodule's name: a submodule, once imported, would take that
# name's place on the package.
_API = {
    "layer_counts": "diff_figures", "layer_time": "diff_figures", "diff_bars": "diff_figures",
    "range_composition": "trace_figures", "launches_per_step": "trace_figures", "summary_bars": "trace_figures",
    "timeline": "timelines", "timeline_pair": "timelines", "sweep": "sweeps", "rank_steps": "set_figures",
    "TraceDiffWidget": "diff_widget", "TraceExplorer": "explorer", "alignment_table": "widgets",
    "kernel_colors": "colors", "range_color": "colors", "range_colors": "colors", "variant_color": "colors",
    "variant_colors": "colors", "color_map": "colors", "color_scope": "colors", "trace_presentation": "colors",
    "units": "common",
    "default_pair": "notebook", "load_sweep": "notebook",
    # The store look-ups live below viz: nothing in them draws.
    "traces_root": "workbench.trace.store.catalog", "find_trace": "workbench.trace.store.catalog",
    "find_pair": "workbench.trace.store.catalog", "store_summary": "workbench.trace.store.catalog",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        where = _API[name]
        value = getattr(import_module(where if "." in where else f"{__name__}.{where}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
