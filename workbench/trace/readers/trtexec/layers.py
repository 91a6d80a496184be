"""The engine's layers: what ``--exportLayerInfo`` says of each (type, tensors and their
formats, tactic, origin) joined with the per-layer times of ``--exportProfile``.

The profile is a JSON array: first ``{"count": N}`` (the iterations profiled), then one
record per layer, in execution order: ``name``, ``timeMs`` (over all iterations),
``averageMs``, ``medianMs`` and ``percentage`` of the total.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ....errors import TraceFormatError

# A tensor's data type, as the end of its "Format/Datatype" ("Row major linear FP32",
# "Channel major FP16 format where channel % 8 == 0") names it.
_DTYPE = re.compile(r"\b(FP32|FP16|BF16|FP8|FP4|INT64|INT32|INT8|INT4|UINT8|BOOL)\b", re.IGNORECASE)


def graph_layers(doc, path: Path) -> list[dict]:
    """Each layer of a layer-information document, in its order: ``name`` and its attributes
    (only the name where the engine was built without detailed profiling verbosity)."""
    layers = doc.get("Layers") if isinstance(doc, dict) else None
    if not isinstance(layers, list):
        raise TraceFormatError(path, 'no "Layers" list: not trtexec --exportLayerInfo output')
    out, seen = [], set()
    for i, layer in enumerate(layers):
        if isinstance(layer, str):  # --profilingVerbosity=layer_names_only
            layer = {"Name": layer}
        name = layer.get("Name") if isinstance(layer, dict) else None
        if not isinstance(name, str) or not name:
            raise TraceFormatError(path, f"Layers[{i}] has no name")
        if name in seen:
            raise TraceFormatError(path, f"layer {name[:120]!r} appears twice")
        seen.add(name)
        out.append(_attributes(name, layer))
    if not out:
        raise TraceFormatError(path, '"Layers" is empty: the engine has no layers')
    return out


def _attributes(name: str, layer: dict) -> dict:
    inputs, outputs = _tensors(layer.get("Inputs")), _tensors(layer.get("Outputs"))
    out = {"name": name, "type": _text(layer.get("LayerType")),
           "precision": precision(outputs[0]["format"]) if outputs else "",
           "inputs": inputs, "outputs": outputs}
    for key, field in (("parameter_type", "ParameterType"), ("tactic", "TacticValue"), ("tactic_name", "TacticName"),
                       ("origin", "Origin")):
        if field in layer:
            out[key] = _text(layer[field])
    return out


def _tensors(value) -> list[dict]:
    out = []
    for t in value if isinstance(value, list) else []:
        if isinstance(t, dict):
            dims = t.get("Dimensions")
            out.append({"name": _text(t.get("Name")), "format": _text(t.get("Format/Datatype")),
                        "shape": [int(d) for d in dims if isinstance(d, (int, float))] if isinstance(dims, list) else []})
    return out


def _text(value) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def precision(fmt: str) -> str:
    """``FP16`` of ``Channel major FP16 format where channel % 8 == 0``; the format itself
    when it names no known data type."""
    m = _DTYPE.search(fmt)
    return m.group(1).upper() if m else fmt


def profile_records(doc, path: Path) -> tuple[int, list[dict]]:
    """``(count, records)`` of a profile: each record's ``name``, ``average_ms``, ``median_ms``,
    ``time_ms`` and ``percentage``, in the profile's order."""
    if not isinstance(doc, list) or not doc or not isinstance(doc[0], dict) or "count" not in doc[0]:
        raise TraceFormatError(path, 'no {"count": N} record first: not trtexec --exportProfile output')
    count = doc[0]["count"]
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise TraceFormatError(path, f'"count" is {str(count)[:40]!r}, not a positive whole number')
    out, seen = [], set()
    for i, rec in enumerate(doc[1:], 1):
        name = rec.get("name") if isinstance(rec, dict) else None
        if not isinstance(name, str):
            raise TraceFormatError(path, f"record {i} has no layer name")
        if name in seen:
            raise TraceFormatError(path, f"layer {name[:120]!r} is profiled twice")
        seen.add(name)
        row = {"name": name}
        for key, field in (("average_ms", "averageMs"), ("median_ms", "medianMs"), ("time_ms", "timeMs"),
                           ("percentage", "percentage")):
            value = rec.get(field)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
            if not ok and (field == "averageMs" or field in rec):
                raise TraceFormatError(path, f"layer {name[:120]!r}: {field} is {str(value)[:40]!r}, not a time")
            row[key] = float(value) if ok else None
        out.append(row)
    if not out:
        raise TraceFormatError(path, "no layer records after the count")
    return count, out


def joined(graph: list[dict], records: list[dict], graph_path: Path, profile_path: Path) -> list[dict]:
    """The layers in execution order (the profile's), each with its graph attributes and its
    times; a graph layer the profile does not time follows the graph layer before it, with
    ``profiled`` False. Raises for a profiled layer the graph does not have."""
    by_name = {layer["name"]: layer for layer in graph}
    unknown = [r["name"] for r in records if r["name"] not in by_name]
    if unknown:
        shown = ", ".join(repr(n[:80]) for n in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
        raise TraceFormatError(profile_path, f"{len(unknown)} profiled layer(s) not in {graph_path.name}: {shown}")
    timed = {r["name"]: r for r in records}
    # Each untimed layer goes right after the nearest timed layer before it in the graph.
    after: dict[str | None, list[str]] = {}
    anchor = None
    for layer in graph:
        if layer["name"] in timed:
            anchor = layer["name"]
        else:
            after.setdefault(anchor, []).append(layer["name"])
    order = after.get(None, [])
    for r in records:
        order += [r["name"], *after.get(r["name"], [])]
    out = []
    for name in order:
        times = timed.get(name)
        out.append({**by_name[name], "profiled": times is not None,
                    **{k: (times[k] if times else None) for k in ("average_ms", "median_ms", "time_ms", "percentage")}})
    return out
