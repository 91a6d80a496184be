"""Two TensorRT engines compared layer by layer: the comparison TensorRT Engine Explorer made.

Each side's layers are those its trtexec import keeps (``meta["tensorrt"]["layers"]``, in
execution order; see ``trace/readers/trtexec``). Layers are matched

1. by name, in order (``difflib.SequenceMatcher`` over the two name sequences): these are the
   anchors; a name both engines have out of that order is still matched by name;
2. between two consecutive anchors, by position and layer type (the same matcher over the
   types of the layers left there, reformats and no-ops left out): TensorRT names a fused
   layer after the operations it fused (``Conv_5 + Add_6 + Relu_7``), so a layer that fused a
   different set keeps its type and place but not its name.

Layers left unmatched are only in one engine: most often reformats and no-ops that one
precision needs and the other does not, or the parts of a fusion.

Each row's ``change`` lists what differs, comma-separated: ``only_a`` / ``only_b``;
``fused`` (matched by position under another name); ``type`` (another implementation, e.g.
``TiledPooling`` -> ``CudaPooling``); ``precision`` (of the layer's first output); ``time``
(average time moved by at least ``diff.TIME_CHANGE`` and ``diff.TIME_CHANGE_NS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher

import numpy as np
import pandas as pd

from ..trace.schema import Trace
from .per_step import time_moved
from .trt_layers import engine_layers

_NS_PER_MS = 1e6
# The layer types that copy a tensor to another layout or precision, and that do nothing.
REFORMAT, NOOP = "Reformat", "NoOp"
COLUMNS = ["name_a", "name_b", "type_a", "type_b", "match", "precision_a", "precision_b", "avg_ms_a", "avg_ms_b",
           "median_ms_a", "median_ms_b", "delta_ms", "change"]


@dataclass
class EngineDiff:
    """Engine B against engine A, layer by layer (see the module docstring).

    ``layers`` has one row per matched pair or unmatched layer, in execution order
    (:data:`COLUMNS`); ``totals`` the layer counts, total profiled time, matches and the
    reformat and no-op layers of each side.
    """

    a: str
    b: str
    layers: pd.DataFrame
    totals: dict = field(default_factory=dict)

    def changed(self) -> pd.DataFrame:
        """The rows with any change, largest time change first."""
        rows = self.layers[self.layers["change"] != ""]
        return rows.reindex(rows["delta_ms"].abs().sort_values(ascending=False, kind="stable").index)

    def only(self, side: str) -> pd.DataFrame:
        """The layers only engine ``side`` (``"a"`` or ``"b"``) has."""
        return self.layers[self.layers["match"] == f"only_{side}"]

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "totals": self.totals,
                "layers": self.layers.astype(object).where(self.layers.notna(), None).to_dict(orient="records")}


def engine_diff(a: Trace, b: Trace) -> EngineDiff:
    """Engine ``b`` against engine ``a``, layer by layer (both imported from trtexec)."""
    la, lb = engine_layers(a), engine_layers(b)
    pairs = _pairs(la, lb)
    rows = [_row(la.iloc[i] if i is not None else None, lb.iloc[j] if j is not None else None, how)
            for i, j, how in pairs]
    layers = pd.DataFrame(rows, columns=COLUMNS)
    return EngineDiff(a.label, b.label, layers, _totals(la, lb, layers))


def _pairs(la: pd.DataFrame, lb: pd.DataFrame) -> list[tuple[int | None, int | None, str]]:
    """``(row of A, row of B, how)`` in execution order; ``how`` is ``name``, ``position``,
    ``only_a`` or ``only_b`` (the missing side None)."""
    na, nb = la["name"].tolist(), lb["name"].tolist()
    anchors = [(blk.a + k, blk.b + k) for blk in SequenceMatcher(None, na, nb, autojunk=False).get_matching_blocks()
               for k in range(blk.size)]
    anchored_a = {i for i, _ in anchors}
    anchored_b = {j for _, j in anchors}
    b_of_name = {n: j for j, n in enumerate(nb)}
    # Names in both engines but out of order: matched by name where A has them.
    crossing = {i: b_of_name[n] for i, n in enumerate(na) if i not in anchored_a and n in b_of_name}
    crossing_b = set(crossing.values())
    out: list[tuple[int | None, int | None, str]] = []
    prev_a = prev_b = -1
    for ia, ib in [*anchors, (len(na), len(nb))]:
        gap_a = list(range(prev_a + 1, ia))
        gap_b = [j for j in range(prev_b + 1, ib) if j not in anchored_b and j not in crossing_b]
        out += [(i, crossing[i], "name") for i in gap_a if i in crossing]
        gap_a = [i for i in gap_a if i not in crossing]
        out += _by_type(gap_a, gap_b, la["type"].tolist(), lb["type"].tolist())
        if ia < len(na):
            out.append((ia, ib, "name"))
        prev_a, prev_b = ia, ib
    return out


def _by_type(gap_a: list[int], gap_b: list[int], ta: list[str], tb: list[str]) -> list:
    """The layers between two anchors: matched by type in order, the rest only in one engine.
    Reformats and no-ops are never matched by place: TensorRT adds them where two layers'
    formats differ, so two of them at one place are copies of different tensors."""
    ca = [i for i in gap_a if ta[i] not in (REFORMAT, NOOP)]
    cb = [j for j in gap_b if tb[j] not in (REFORMAT, NOOP)]
    match = {}
    for blk in SequenceMatcher(None, [ta[i] for i in ca], [tb[j] for j in cb], autojunk=False).get_matching_blocks():
        match.update((ca[blk.a + k], cb[blk.b + k]) for k in range(blk.size))
    out, k = [], 0
    for i in gap_a:
        if i not in match:
            out.append((i, None, "only_a"))
            continue
        while gap_b[k] != match[i]:  # matches keep order: B's layers before this one are unmatched
            out.append((None, gap_b[k], "only_b"))
            k += 1
        out.append((i, match[i], "position"))
        k += 1
    return out + [(None, j, "only_b") for j in gap_b[k:]]


def _row(ra, rb, how: str) -> dict:
    def get(r, col, missing=None):
        return missing if r is None else r[col]

    avg_a, avg_b = get(ra, "avg_ms", np.nan), get(rb, "avg_ms", np.nan)
    change = []
    if how in ("only_a", "only_b"):
        change.append(how)
    else:
        if how == "position":
            change.append("fused")
        if ra["type"] != rb["type"]:
            change.append("type")
        if ra["precision"] != rb["precision"]:
            change.append("precision")
        if np.isfinite(avg_a) and np.isfinite(avg_b) and time_moved(avg_a * _NS_PER_MS, avg_b * _NS_PER_MS):
            change.append("time")
    return {"name_a": get(ra, "name", ""), "name_b": get(rb, "name", ""), "type_a": get(ra, "type", ""),
            "type_b": get(rb, "type", ""), "match": how, "precision_a": get(ra, "precision", ""),
            "precision_b": get(rb, "precision", ""), "avg_ms_a": avg_a, "avg_ms_b": avg_b,
            "median_ms_a": get(ra, "median_ms", np.nan), "median_ms_b": get(rb, "median_ms", np.nan),
            # A layer only in one engine counts in full: it is what that engine adds or saves.
            "delta_ms": float(np.nan_to_num(avg_b) - np.nan_to_num(avg_a)), "change": ",".join(change)}


def _totals(la: pd.DataFrame, lb: pd.DataFrame, rows: pd.DataFrame) -> dict:
    out = {}
    for side, layers in (("a", la), ("b", lb)):
        out[f"layers_{side}"] = len(layers)
        out[f"total_ms_{side}"] = float(layers["avg_ms"].sum())
        for kind, what in ((REFORMAT, "reformat"), (NOOP, "noop")):
            of = layers[layers["type"] == kind]
            out[f"{what}_layers_{side}"] = len(of)
            out[f"{what}_ms_{side}"] = float(of["avg_ms"].sum())
        out[f"precisions_{side}"] = {str(k): int(v) for k, v in layers["precision"].value_counts().sort_index().items()}
    for how in ("name", "position", "only_a", "only_b"):
        out[f"matched_by_{how}" if how in ("name", "position") else how] = int((rows["match"] == how).sum())
    for what in ("fused", "type", "precision", "time"):
        out[f"{what}_changed"] = int(rows["change"].str.split(",").map(lambda c, w=what: w in c).sum())
    return out
