"""Figures (plotly) and widgets (ipywidgets) over traces and trace diffs.

Nothing here imports plotly or ipywidgets until a figure or widget is asked for::

    from workbench import viz
    viz.layer_counts(d, range="kv_write")        # d = workbench.diff(a, b)
    viz.timeline(trace, "layer_03/kv_write")
    viz.TraceDiffWidget(a="ref-h200-kvwrite-unfused-nsys", b="ref-h200-kvwrite-fused-nsys")
"""

from __future__ import annotations

from importlib import import_module

_API = {
    "layer_counts": "figures", "layer_time": "figures", "diff_bars": "figures", "range_composition": "figures",
    "launches_per_step": "figures", "summary_bars": "figures", "timeline": "figures", "timeline_pair": "figures",
    "sweep": "figures",
    "TraceDiffWidget": "widgets", "TraceExplorer": "widgets", "alignment_table": "widgets",
    "kernel_color": "colors", "range_color": "colors", "variant_color": "colors", "color_map": "colors",
    "traces_root": "notebook", "find_trace": "notebook", "find_pair": "notebook", "load_sweep": "notebook",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        value = getattr(import_module(f"{__name__}.{_API[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
