"""Build a runnable engine from (workload, variant, engine kind, device).

Engines share one interface (``engines/eager.py``): ``prefill()`` and ``decode(token, pos)``
return logits. Kinds:

* ``eager``: the workload's own Python.
* ``compile``: each region (qkv, kv_write, attention, mlp, lm_head) compiled by inductor on
  its own, so every generated kernel still runs inside its ``layer_NN > region`` range; the
  price is no fusion across region boundaries.
* ``cudagraph``: decode steps replayed from CUDA graphs (one per bound-row count); prefill eager.
* ``tensorrt``: drives ``trtexec`` (``engines/tensorrt.py``); needs TensorRT installed.

The instance a workload creates is checked against what the chosen kind uses
(``workloads/contract.py``) before the engine is built.

Builds are cached by ``build_key`` (workload, full variant, kind, device and versions): in this
process for the Python engines (compiled code and graphs are reused across captures), on
disk for TensorRT plans.
"""

from __future__ import annotations

import hashlib
import json

from ..errors import WorkbenchError
from ..vocabulary import ENGINE_KINDS as KINDS

_built: dict[str, object] = {}


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise WorkbenchError(f"engine {kind}", f"unknown engine (choose from {', '.join(KINDS)})")
    return kind


def versions(device: str) -> dict:
    """Versions that change what a build produces."""
    import torch

    out = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return out


def build_key(workload: str, variant: dict, kind: str, device: str) -> str:
    blob = json.dumps({"workload": workload, "variant": variant, "engine": kind, "device": device,
                       "versions": versions(device)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def engine_class(kind: str):
    check_kind(kind)
    if kind == "tensorrt":
        from .tensorrt import TensorRTEngine as cls
    elif kind == "compile":
        from .compiled import CompiledEngine as cls
    elif kind == "cudagraph":
        from .cudagraph import CudaGraphEngine as cls
    else:
        from .eager import EagerEngine as cls
    return cls


def check(kind: str, device: str) -> None:
    """Refuse, before any work, an engine that cannot run here (no GPU, no trtexec)."""
    engine_class(kind).check(device)


def build(workload: str, variant: dict, kind: str, device: str):
    """The engine for this (already resolved) variant, built once per key and process."""
    from .. import workloads
    from ..workloads.contract import check_instance

    cls = engine_class(kind)
    key = build_key(workload, variant, kind, device)
    engine = _built.get(key)
    if engine is not None:
        return engine
    cls.check(device)
    try:
        instance = workloads.get(workload).create(variant, device)
    except WorkbenchError:
        raise
    except Exception as e:  # a user's workload may raise anything: report it, don't crash
        raise WorkbenchError(f"workload {workload}", f"create failed: {type(e).__name__}: {e}") from e
    # A user's instance may lack what this kind uses: name the piece now, not as an
    # AttributeError from inside the engine or halfway through a timed run.
    check_instance(workload, instance, kind)
    engine = cls(instance, key)
    _built[key] = engine
    return engine
