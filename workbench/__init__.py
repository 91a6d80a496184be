"""workbench: a Jupyter-first GPU performance workbench for LLM inference engines.

Public API (imported lazily, so ``workbench summary`` starts fast)::

    import workbench as wb
    t = wb.open_trace("traces/h200-kvwrite-unfused")   # stored name/dir or any capture file
    wb.summary(t, by="layer")                          # per-layer kernel counts and GPU time
    wb.project(t)                                      # every kernel with its innermost range
    t.sql("select range, count(*) from projected group by 1")
    wb.diff(a, b)                                      # per-range / per-layer diff, aligned kernels
    wb.engine_diff(fp32, fp16)                         # two TensorRT engines (trtexec), layer by layer
    wb.capture("decoder", variant={"kv_write": "fused"})
    wb.capture_command(["python", "model.py"], backend="torch")   # any program, recorded
    with wb.record("my-trace"): model(x)               # a notebook block, recorded and stored
    wb.profile_call(model, x, name="eager", repeats=10)  # timed, checked, recorded
    with wb.annotate_modules(hf_model): ...            # a range per layer / attention / MLP call
    wb.report(base, fix, html="report.html", md="report.md")
    ts = wb.import_set("tp4", ["rank*.json.gz"])       # a trace set: one member per rank (or run)
    ts = wb.open_set("tp4", executor="ray")            # per-member work on a process pool or Ray
    ts.summary(by="rank,layer"); ts.stragglers(); ts.sql("select rank, count(*) from kernels group by 1")

Traces, diffs (their alignments and timed phases), trace sets and the tables these return show
themselves in a notebook as compact HTML (headline first, µs/ms, changed rows highlighted) and
as short text on a terminal; the tables stay DataFrames. ``workbench.trace.display.Table(df)``
shows any other frame the same way.
"""

from __future__ import annotations

from importlib import import_module

from .vocabulary import VERSION as __version__  # noqa: F401  (the package version)

# Public name -> the module that defines it. No public name is also a submodule's name: a
# submodule, once imported, would take that name's place on the package.
_API = {
    "Trace": "workbench.trace",
    "ImportOptions": "workbench.trace",
    "import_file": "workbench.trace",
    "open_trace": "workbench.trace",
    "save": "workbench.trace",
    "list_traces": "workbench.trace",
    "export_chrome": "workbench.trace",
    "project": "workbench.analysis",
    "summary": "workbench.analysis",
    "launches_per_step": "workbench.analysis",
    "diff": "workbench.analysis",
    "engine_diff": "workbench.analysis.engine_diff",
    "engine_layers": "workbench.analysis.trt_layers",
    "layer_kernels": "workbench.analysis.trt_layers",
    "capture": "workbench.capturing",
    "capture_command": "workbench.capturing.command",
    "profile_call": "workbench.capturing.calls",
    "bench": "workbench.capturing.bench",
    "record": "workbench.capturing.record",
    "window": "workbench.instrument",
    "outputs_equal": "workbench.analysis.outputs",
    "step": "workbench.instrument",
    "annotate": "workbench.instrument",
    "annotate_modules": "workbench.instrument",
    "report": "workbench.reporting",
    "WorkbenchError": "workbench.errors",
    "open_set": "workbench.sets",
    "import_set": "workbench.sets",
    "TraceSet": "workbench.sets",
    "Executor": "workbench.sets",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        value = getattr(import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
