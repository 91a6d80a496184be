"""What the files beside the graph tell: the per-iteration latencies of ``--exportTimes`` as
the trace's timing samples, and from the metadata the GPU, versions and build and inference
options. Every metadata file is optional; one that is present must be valid JSON."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ....errors import TraceFormatError
from .files import Artifacts, load

# The per-iteration field compared across engines: host-to-device, compute and device-to-host
# of one inference, as trtexec reports "Latency".
LATENCY = "latencyMs"


def timing(path: Path) -> dict:
    """``meta["timing"]`` of a ``--exportTimes`` file: one ``call_ms`` sample per iteration."""
    doc = load(path, "trtexec --exportTimes output")
    if not isinstance(doc, list) or not doc:
        raise TraceFormatError(path, "not a list of per-iteration records (trtexec --exportTimes output)")
    samples = []
    for i, rec in enumerate(doc):
        value = rec.get(LATENCY) if isinstance(rec, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise TraceFormatError(path, f"record {i} has no {LATENCY} number")
        samples.append(float(value))
    summary = {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
               "mean": statistics.fmean(samples), "n": len(samples), "samples": samples}
    return {"timer": "trtexec", "source": path.name, "field": LATENCY, "call_ms": summary}


def environment(files: Artifacts) -> tuple[dict, dict]:
    """``(env, engine)``: the GPU and versions, and the build, model and inference options
    and trtexec's performance summary, from whichever metadata files are present."""
    env: dict = {}
    engine: dict = {}
    if "metadata" in files.beside:
        doc = load(files.beside["metadata"], "engine metadata JSON")
        devices = doc if isinstance(doc, list) else [doc.get("device_properties", doc)] if isinstance(doc, dict) else []
        device = next((d for d in devices if isinstance(d, dict) and isinstance(d.get("Name"), str)), None)
        if device is not None:
            env["gpu"] = device["Name"]
            if isinstance(device.get("ComputeCapability"), list):
                env["compute_capability"] = ".".join(str(v) for v in device["ComputeCapability"])
            if isinstance(device.get("CUDA_VERSION"), list):
                env["engine_cuda_version"] = ".".join(str(v) for v in device["CUDA_VERSION"])
        if isinstance(doc, dict):
            engine.update(_versions(doc))
    for role, keys in (("build_metadata", ("model_options", "build_options")),
                       ("profile_metadata", ("inference_options", "performance_summary", "device_information"))):
        if role in files.beside:
            doc = load(files.beside[role], "engine metadata JSON")
            if not isinstance(doc, dict):
                raise TraceFormatError(files.beside[role], "not a JSON object (engine metadata)")
            engine.update({k: doc[k] for k in keys if isinstance(doc.get(k), dict)})
            engine.update(_versions(doc))
            selected = doc.get("device_information", {})
            if isinstance(selected, dict) and isinstance(selected.get("Selected Device"), str):
                env.setdefault("gpu", selected["Selected Device"])
    return env, engine


def _versions(doc: dict) -> dict:
    """Top-level entries naming a version (``trt_version``, ``TensorRT version``), as text."""
    return {k: str(v) for k, v in doc.items() if "version" in k.lower() and isinstance(v, (str, int, float, list))}
