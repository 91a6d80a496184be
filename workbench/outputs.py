"""A call's outputs, kept in a manifest so two variants' results can be proven equal later.

:func:`encode` flattens what a function returned (tensors, arrays, numbers, strings, and
tuples, lists and dicts of them: a HuggingFace ``ModelOutput`` is a dict) into items named
by their path (``0``, ``logits``, ``past_key_values.0.1``). Floating tensors up to
``MAX_VALUES`` values are kept exactly, as float32 base64; larger ones and integer tensors
by a SHA-256 of their bytes plus their shape, dtype and value range, which still tells equal
from different. :func:`compare` sets two encodings side by side. Plain data in, plain data
out: both the capture side and the reports use it.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping

MAX_VALUES = 1 << 20
MAX_ITEMS = 256


def _array(value):
    """(numpy array, dtype name) for a tensor or array, else None."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach()
        dtype = str(t.dtype).removeprefix("torch.")
        if t.is_floating_point() or t.is_complex():
            t = t.float() if not t.is_complex() else t.abs().float()
        return t.cpu().contiguous().numpy(), dtype
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return value, str(value.dtype)
    return None


def _walk(value, path: str, out: list) -> None:
    if len(out) >= MAX_ITEMS:
        return
    arr = _array(value)
    if arr is not None:
        out.append(_tensor_item(path, *arr))
    elif isinstance(value, Mapping):
        for k in value:
            _walk(value[k], f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _walk(v, f"{path}.{i}" if path else str(i), out)
    elif value is None or isinstance(value, (bool, int, float, str)):
        out.append({"path": path, "value": value if not isinstance(value, float) or math.isfinite(value)
                    else repr(value)})
    else:
        out.append({"path": path, "type": type(value).__name__})


def _tensor_item(path: str, arr, dtype: str) -> dict:
    import numpy as np

    item = {"path": path, "dtype": dtype, "shape": list(arr.shape)}
    if arr.size and arr.dtype.kind in "fiub":
        item["min"], item["max"] = float(arr.min()), float(arr.max())
    if arr.dtype.kind == "f" and arr.size <= MAX_VALUES:
        item["f32_b64"] = base64.b64encode(np.ascontiguousarray(arr, dtype=np.float32).tobytes()).decode()
    else:
        item["sha256"] = hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()
    return item


def encode(value) -> dict:
    """The outputs block of a manifest for ``value``."""
    items: list = []
    _walk(value, "", items)
    return {"items": items, "truncated": len(items) >= MAX_ITEMS}


def _values(item: dict):
    import numpy as np

    return np.frombuffer(base64.b64decode(item["f32_b64"]), dtype=np.float32).reshape(item["shape"])


def _items(o: dict) -> dict:
    """path -> item, for this module's encoding and for the reference decoder's (greedy
    ``tokens`` and ``logits`` as base64 float32, see capturing/session.py)."""
    if "items" in o:
        return {i["path"]: i for i in o["items"]}
    out = {}
    if "logits_f32_b64" in o:
        out["logits"] = {"path": "logits", "shape": o.get("logits_shape"), "f32_b64": o["logits_f32_b64"]}
    if "tokens" in o:
        out["tokens"] = {"path": "tokens", "value": o["tokens"]}
    return out


def compare(a: dict, b: dict, tolerance: float = 1e-4) -> dict:
    """Two encodings item by item: ``equal`` when every item matches (floats within
    ``tolerance`` relative to the item's magnitude, at least 1), the largest float difference,
    and a line per item that differs."""
    ia, ib = _items(a), _items(b)
    differs, worst = [], 0.0
    for path in sorted(set(ia) | set(ib)):
        x, y = ia.get(path), ib.get(path)
        where = path or "(result)"
        if x is None or y is None:
            differs.append(f"{where}: only in {'the second' if x is None else 'the first'}")
        elif x.get("shape") != y.get("shape"):
            differs.append(f"{where}: shape {x.get('shape')} vs {y.get('shape')}")
        elif "f32_b64" in x and "f32_b64" in y:
            va, vb = _values(x), _values(y)
            diff = float(abs(va.astype("float64") - vb.astype("float64")).max()) if va.size else 0.0
            worst = max(worst, diff)
            if not diff <= tolerance * max(1.0, float(abs(va).max()) if va.size else 1.0):
                differs.append(f"{where}: max abs diff {diff:.3g}")
        elif {k: v for k, v in x.items() if k != "f32_b64"} != {k: v for k, v in y.items() if k != "f32_b64"}:
            differs.append(f"{where}: differs")
    return {"equal": not differs, "max_abs_diff": worst, "differences": differs, "items": len(ia)}


def outputs_equal(a, b, tolerance: float = 1e-4) -> dict:
    """Whether two captures (``Trace`` objects or their manifests) recorded the same outputs:
    :func:`compare` of their ``outputs``; a capture without outputs is an error."""
    from .errors import WorkbenchError

    found = []
    for x in (a, b):
        meta = getattr(x, "meta", x)
        o = meta.get("outputs") if isinstance(meta, Mapping) else None
        if not isinstance(o, Mapping) or not _items(o):
            raise WorkbenchError(getattr(x, "label", "capture"), "recorded no outputs to compare")
        found.append(o)
    return compare(*found, tolerance=tolerance)
