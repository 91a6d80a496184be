"""A call's outputs, kept in a manifest so two variants' results can be proven equal later.

:func:`encode` flattens what a function returned (tensors, arrays, numbers, strings, and
tuples, lists and dicts of them: a HuggingFace ``ModelOutput`` is a dict) into items named
by their path (``0``, ``logits``, ``past_key_values.0.1``). Floating tensors up to
``MAX_VALUES`` values are kept exactly, as float32 base64; larger ones and integer tensors
by a SHA-256 of their bytes plus their shape, dtype and value range, which still tells equal
from different. :func:`compare` sets two encodings side by side. Plain data in, plain data
out: both the capture side and the reports use it.

The reference decoder's outputs (greedy ``tokens`` and their ``logits``) have their own codec
here too: :func:`encode_logits` keeps logits of up to ``FULL_LOGITS_MAX`` values in full
(``logits_f32_b64``) and only the ``LOGITS_TOPK`` largest of each position otherwise
(``logits_topk``), so a real vocabulary does not make a manifest megabytes large;
:func:`decode_logits` reads either back as one dense array, NaN where a value was not kept,
and :func:`logit_diff` compares two such arrays over the entries both kept.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping

MAX_VALUES = 1 << 20
MAX_ITEMS = 256
FULL_LOGITS_MAX = 1 << 16  # recorded logits up to this many values are kept in full
LOGITS_TOPK = 64  # otherwise the largest this many of each position (row)


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
        item["f32_b64"] = _b64(arr, "<f4")
    else:
        item["sha256"] = hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()
    return item


def encode(value) -> dict:
    """The outputs block of a manifest for ``value``."""
    items: list = []
    _walk(value, "", items)
    return {"items": items, "truncated": len(items) >= MAX_ITEMS}


def _b64(arr, dtype: str) -> str:
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(arr, dtype=dtype).tobytes()).decode()


def _unb64(text: str, dtype: str):
    import numpy as np

    return np.frombuffer(base64.b64decode(text), dtype=dtype)


def _dense(value):
    """A tensor or array as a float32 numpy array (on the CPU)."""
    import numpy as np

    arr = _array(value)
    return np.asarray(arr[0] if arr is not None else value, dtype=np.float32)


def encode_logits(logits) -> dict:
    """Recorded logits (a tensor or array, last axis the vocabulary) as manifest fields:
    ``logits_shape`` and, up to ``FULL_LOGITS_MAX`` values, all of them as base64 float32
    (``logits_f32_b64``); above that per position the ``LOGITS_TOPK`` largest, largest first
    (ties: lower index first), as ``logits_topk`` = {k, indices_b64 (int32), values_b64}."""
    import numpy as np

    arr = _dense(logits)
    out: dict = {"logits_shape": list(arr.shape)}
    if arr.size <= FULL_LOGITS_MAX or arr.ndim == 0:
        out["logits_f32_b64"] = _b64(arr, "<f4")
        return out
    rows = arr.reshape(-1, arr.shape[-1])
    k = min(LOGITS_TOPK, rows.shape[1])
    idx = np.argsort(-rows, axis=1, kind="stable")[:, :k]  # NaN sorts last: never kept before a number
    out["logits_topk"] = {"k": k, "indices_b64": _b64(idx, "<i4"),
                          "values_b64": _b64(np.take_along_axis(rows, idx, axis=1), "<f4")}
    return out


def decode_logits(o: Mapping):
    """The logits in outputs block ``o`` (either encoding of :func:`encode_logits`) as a
    float32 array of ``logits_shape``, NaN where a value was not kept; None when ``o`` holds
    none. A malformed encoding raises ``ValueError``."""
    import binascii

    import numpy as np

    shape, full, topk = o.get("logits_shape"), o.get("logits_f32_b64"), o.get("logits_topk")
    if full is None and topk is None:
        return None
    try:
        shape = [int(x) for x in shape]
        if full is not None:
            return _unb64(full, "<f4").astype(np.float32).reshape(shape)
        k = int(topk["k"])
        width = shape[-1] if shape else 1
        n = math.prod(shape) // width if width else 0
        idx = _unb64(topk["indices_b64"], "<i4").reshape(n, k)
        vals = _unb64(topk["values_b64"], "<f4").reshape(n, k)
        if idx.size and (idx.min() < 0 or idx.max() >= width):
            raise ValueError("top-k index outside the vocabulary")
        out = np.full((n, width), np.nan, dtype=np.float32)
        np.put_along_axis(out, idx.astype(np.intp), vals, axis=1)
        return out.reshape(shape)
    except (TypeError, KeyError, binascii.Error) as e:
        raise ValueError(f"malformed logits: {e}") from None


def logits_topk(o: Mapping) -> int | None:
    """k when outputs block ``o`` kept only the top-k logits of each position, else None."""
    t = o.get("logits_topk")
    return int(t["k"]) if isinstance(t, Mapping) and "k" in t else None


def logit_diff(a, b) -> dict:
    """Two logit arrays (or tensors) of one shape, NaN where not kept, compared over the
    entries both kept: ``max_abs_diff`` (NaN when they share none), ``scale`` (the largest
    magnitude ``a`` kept, at least 1: what a tolerance is relative to), ``topk`` (how many
    entries per position the sparser side kept, when either kept only some, else None) and
    ``apart``: the positions (rows) whose kept sets share fewer than half the entries of the
    side that kept fewer, or none at all; such a position counts as not equal. (When both
    sides were kept in full a NaN is a value: a ``topk`` there means NaN logits.)"""
    import numpy as np

    a, b = _dense(a), _dense(b)
    if a.shape != b.shape:
        raise ValueError(f"logits of different shapes ({list(a.shape)} vs {list(b.shape)})")
    width = a.shape[-1] if a.ndim else 1
    ka, kb = ~np.isnan(a).reshape(-1, width), ~np.isnan(b).reshape(-1, width)
    both = ka & kb
    shared = both.sum(axis=1)
    fewer = np.minimum(ka.sum(axis=1), kb.sum(axis=1))
    apart = [int(r) for r in np.flatnonzero((2 * shared < fewer) | (shared == 0))] if width else []
    d = np.abs(a.reshape(-1, width)[both].astype(np.float64) - b.reshape(-1, width)[both])
    worst = float(d.max()) if d.size else (0.0 if not a.size else math.nan)
    scale = float(np.abs(a[~np.isnan(a)]).max()) if ka.any() else 0.0
    partial = not (ka.all() and kb.all())
    topk = int(min(ka.sum(axis=1).max(), kb.sum(axis=1).max())) if partial and a.size else None
    return {"max_abs_diff": worst, "scale": max(1.0, scale), "topk": topk, "apart": apart}


def apart_text(apart: list[int], topk: int | None) -> str:
    """The difference line for positions whose kept logits barely overlap."""
    where = ", ".join(map(str, apart[:8])) + (", ..." if len(apart) > 8 else "")
    kept = f"top-{topk} logits" if topk else "kept logits"
    return f"{kept} share under half their entries at position(s) {where}"


def over_text(topk: int | None) -> str:
    """What a max abs logit diff was taken over, when not over every logit."""
    return f" over the top-{topk} logits per position" if topk else ""


def _values(item: dict):
    import numpy as np

    if "f32_b64" in item:
        return _unb64(item["f32_b64"], "<f4").astype(np.float32).reshape(item["shape"])
    return decode_logits({"logits_shape": item["shape"], "logits_topk": item["topk"]})


def _items(o: dict) -> dict:
    """path -> item, for this module's encoding and for the reference decoder's (greedy
    ``tokens`` and ``logits`` as :func:`encode_logits` keeps them, see capturing/session.py)."""
    if "items" in o:
        return {i["path"]: i for i in o["items"]}
    out = {}
    if "logits_f32_b64" in o:
        out["logits"] = {"path": "logits", "shape": o.get("logits_shape"), "f32_b64": o["logits_f32_b64"]}
    elif "logits_topk" in o:
        out["logits"] = {"path": "logits", "shape": o.get("logits_shape"), "topk": o["logits_topk"]}
    if "tokens" in o:
        out["tokens"] = {"path": "tokens", "value": o["tokens"]}
    return out


def compare(a: dict, b: dict, tolerance: float = 1e-4) -> dict:
    """Two encodings item by item: ``equal`` when every item matches (floats within
    ``tolerance`` relative to the item's magnitude, at least 1, over the values both kept: see
    :func:`logit_diff`), the largest float difference, and a line per item that differs;
    ``topk`` is k when some values compared were top-k logits only."""
    ia, ib = _items(a), _items(b)
    differs, worst, topk = [], 0.0, None
    values = ("f32_b64", "topk")
    for path in sorted(set(ia) | set(ib)):
        x, y = ia.get(path), ib.get(path)
        where = path or "(result)"
        if x is None or y is None:
            differs.append(f"{where}: only in {'the second' if x is None else 'the first'}")
        elif x.get("shape") != y.get("shape"):
            differs.append(f"{where}: shape {x.get('shape')} vs {y.get('shape')}")
        elif any(k in x for k in values) and any(k in y for k in values):
            try:
                d = logit_diff(_values(x), _values(y))
            except (ValueError, TypeError) as e:
                differs.append(f"{where}: unreadable ({e})")
                continue
            diff, sparse = d["max_abs_diff"], "topk" in x or "topk" in y
            worst = diff if math.isnan(diff) else max(worst, diff)
            kept = d["topk"] if sparse else None
            topk = kept or topk
            if not sparse and d["topk"]:  # both kept in full: NaN is a value
                differs.append(f"{where}: NaN among the values")
            elif sparse and d["apart"]:
                differs.append(f"{where}: {apart_text(d['apart'], kept)}")
            elif not diff <= tolerance * d["scale"]:
                differs.append(f"{where}: max abs diff {diff:.3g}{over_text(kept)}")
        elif {k: v for k, v in x.items() if k not in values} != {k: v for k, v in y.items() if k not in values}:
            differs.append(f"{where}: differs")
    return {"equal": not differs, "max_abs_diff": worst, "differences": differs, "items": len(ia), "topk": topk}


def outputs_equal(a, b, tolerance: float = 1e-4) -> dict:
    """Whether two captures (``Trace`` objects or their manifests) recorded the same outputs:
    :func:`compare` of their ``outputs``; a capture without outputs is an error."""
    from ..errors import WorkbenchError
    from ..trace.manifest import OUTPUTS, section

    found = []
    for x in (a, b):
        o = section(getattr(x, "meta", x), OUTPUTS)
        if not _items(o):
            raise WorkbenchError(getattr(x, "label", "capture"), "recorded no outputs to compare")
        found.append(o)
    return compare(*found, tolerance=tolerance)
