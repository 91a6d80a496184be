"""One capture session: build the engine, time it, then run the captured decode steps.

Both backends run this: the torch backend in its own process with a profiler window, the nsys
backend in a child process under ``nsys profile`` (``python -m workbench.capturing.session
SPEC RESULT``) with a ``cudaProfilerStart/Stop`` window. A spec is a JSON-able dict:
workload, variant (resolved), engine, device, steps, repeats, warmup, progress.
"""

from __future__ import annotations

import json
import sys

from ..errors import WorkbenchError


def encode_outputs(logits, tokens: list[int]) -> dict:
    """Greedy tokens and their logits (in full when small, else the top-k of each position:
    ``outputs.encode_logits``) so a manifest can prove two variants equal later."""
    from ..analysis.outputs import encode_logits

    return {"tokens": tokens, **encode_logits(logits)}


def decode_outputs(outputs: dict):
    """(logits as a float32 tensor, NaN where not kept; tokens) of :func:`encode_outputs`."""
    import torch

    from ..analysis.outputs import decode_logits

    arr = decode_logits(outputs)
    if arr is None:
        raise ValueError("outputs hold no logits")
    return torch.from_numpy(arr.copy()), list(outputs["tokens"])


def execute(spec: dict, window) -> dict:
    """Time the engine and run ``spec["steps"]`` decode steps inside ``window``."""
    from .. import engines
    from . import run
    from .provenance import CompilerRecorder

    # Compiled engines compile on first use (the warm-up): what the compiler said is recorded
    # then, and kept with the engine, which later captures in this process reuse compiled.
    with CompilerRecorder() as compiler:
        engine = engines.build(spec["workload"], spec["variant"], spec["engine"], spec["device"])
        try:
            measured = run.time_engine(engine, steps=spec["steps"], repeats=spec["repeats"],
                                       warmup=spec["warmup"], progress=spec.get("progress", True))
            run.generate(engine, spec["steps"], window=window)
        except WorkbenchError:
            raise
        except Exception as e:  # the workload's code failed: one clear line, not a traceback
            raise WorkbenchError(f"workload {spec['workload']}", f"run failed: {type(e).__name__}: {e}") from e
    sites = compiler.rows()
    if sites:
        engine.compiled_sites = sites
    return {"timing": measured["timing"], "outputs": encode_outputs(measured["logits"], measured["tokens"]),
            "engine": engine.info, "compiled": sites or getattr(engine, "compiled_sites", [])}


def _child(spec_path: str, result_path: str) -> int:
    import contextlib

    import torch

    @contextlib.contextmanager
    def profiler_api_window():
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        try:
            yield
        finally:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()

    with open(spec_path) as fh:
        spec = json.load(fh)
    try:
        result = execute(spec, profiler_api_window())
        code = 0
    except WorkbenchError as e:
        result, code = {"error": {"where": e.where, "problem": e.problem}}, 2
    with open(result_path, "w") as fh:
        json.dump(result, fh)
    return code


if __name__ == "__main__":
    from .child import run_child

    run_child(_child, sys.argv[1], sys.argv[2])
