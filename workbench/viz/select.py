"""Pick one range instance of a trace and the kernels it launched: what a timeline shows.

A *range key* is a range path with the step level removed, as :func:`workbench.diff` matches
ranges (``step_2/layer_03/kv_write`` has key ``layer_03/kv_write``). A key names a range in
every step; :func:`instances` lists its instances in time order, :func:`window` returns one
instance's sub-ranges and kernels.

**A typical instance.** A key, a layer (``("layer", 3)``) or no ``where`` at all (a step) names
many instances; a timeline draws the typical one: among its instances in decode steps (any
instance that launched kernels where none is), the one of median duration (the earlier of the
two middle ones). The
first is the least typical: ``step_0`` holds the warm-up's slow launches, and a layer's first
range can be the one a CUDA graph was captured in, which launched nothing.

**Descendants** are found by parent links, not by time: the ranges the workbench gives a CUDA
graph's kernels from its capture (``step_0/layer_03/kv_write``) all span the graph's replay, so
every layer's would lie inside any one of them.

Every lookup goes through the trace's :class:`Index`, made once per trace and kept on it: a
widget selection then touches the rows of the instance it draws, not every row of the trace.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.diff import step_free
from ..analysis.layers import label_parts
from ..analysis.projection import project, trace_layers
from ..analysis.steps import DECODE, step_parts, trace_steps, trace_steps_info
from ..errors import WorkbenchError
from ..trace.schema import Trace

# Windows kept per trace: going back to an instance just drawn costs nothing.
_WINDOWS = 32


class Index:
    """What a selection looks up in one trace, computed once (:func:`index`).

    - Ranges in thread order, by (pid, tid, start, depth, id): an instance's descendants (same
      thread, inside its interval, at its depth or deeper) lie in one block right after it,
      found by a binary search on the start times.
    - The projected kernels grouped by their innermost range (by start within a range): the
      kernels of any set of ranges are a gather of contiguous slices, never a scan of every kernel.
    - Each range's key as a code into the distinct keys, and per key its instances by start.
    """

    def __init__(self, trace: Trace, step_regex: str | None = None):
        self.trace, self.step_regex = trace, step_regex
        r = trace.ranges
        n = len(r)
        self.start, self.end, self.depth, self.parent = (r[c].to_numpy() for c in ("start", "end", "depth", "parent"))
        self.phase = trace_steps_info(trace, step_regex).phase
        pid, tid = r["pid"].to_numpy(), r["tid"].to_numpy()
        self.order = np.lexsort((np.arange(n), self.depth, self.start, tid, pid))
        self.pos = np.empty(n, dtype=np.int64)
        self.pos[self.order] = np.arange(n)
        po, to = pid[self.order], tid[self.order]
        head = np.r_[True, (po[1:] != po[:-1]) | (to[1:] != to[:-1])] if n else np.zeros(0, bool)
        heads = np.flatnonzero(head)
        block = np.cumsum(head) - 1
        self.thread_lo, self.thread_hi = heads[block], np.r_[heads[1:], n][block]  # per position: its thread's block
        self.start_sorted = self.start[self.order]
        self.projected = p = project(trace)
        rid = p["range_id"].to_numpy()
        self.kernel_start, self.kernel_end = p["start"].to_numpy(), p["end"].to_numpy()
        rows = np.lexsort((self.kernel_end, self.kernel_start, rid))
        self.kernel_rows = rows[np.searchsorted(rid[rows], 0):]  # kernels in no range left out
        self.kernel_off = np.r_[0, np.cumsum(np.bincount(rid[rid >= 0], minlength=n))]
        if n:
            paths = r["path"].astype(str).to_numpy(dtype=object)
            # The diff's keys: each range's step level cut out wherever its step range sits.
            self.key_code, self.keys = step_free(paths, trace_steps(trace, step_regex) >= 0,
                                                 step_parts(trace, step_regex) - 1)
        else:
            self.key_code, self.keys = np.zeros(0, np.int64), np.zeros(0, object)
        self.by_key = np.lexsort((np.arange(n), self.start, self.key_code))
        self.key_off = np.searchsorted(self.key_code[self.by_key], np.arange(len(self.keys) + 1))
        self._key_of = {str(k): i for i, k in enumerate(self.keys)}
        self._layers: dict[str | None, dict[int, int]] = {}
        self._first_step: tuple | None = None
        self._paths = None  # the paths as Arrow strings, made on the first lookup by path
        self._windows: OrderedDict = OrderedDict()

    def instances(self, key: str) -> np.ndarray:
        """Ids of the ranges whose key or full path is ``key``, earliest first."""
        import pyarrow as pa
        import pyarrow.compute as pc

        code = self._key_of.get(key)
        ids = self.by_key[self.key_off[code]:self.key_off[code + 1]] if code is not None else np.zeros(0, np.int64)
        if self._paths is None:
            self._paths = pa.array(self.trace.ranges["path"], pa.large_string())
        by_path = np.flatnonzero(pc.fill_null(pc.equal(self._paths, key), False).to_numpy(zero_copy_only=False))
        if not len(by_path):
            return ids
        both = np.union1d(ids, by_path)
        return both[np.lexsort((both, self.start[both]))]

    def typical(self, ids: np.ndarray) -> int | None:
        """The typical one of range instances ``ids`` (see the module docstring)."""
        if not len(ids):
            return None
        decode = ids[self.phase[ids] == DECODE]
        if len(decode):
            ids = decode
        else:  # none in a decode step: those that launched something, where any did
            launched = np.asarray([i for i in ids.tolist() if len(self.kernels_of(self.subtree(i)))], dtype=np.int64)
            ids = launched if len(launched) else ids
        ids = ids[np.lexsort((ids, self.start[ids], self.end[ids] - self.start[ids]))]
        return int(ids[(len(ids) - 1) // 2])

    def layer_instance(self, layer: int, layer_regex: str | None = None) -> int | None:
        """The typical range that *is* layer ``layer`` (its own name matches the layer pattern)."""
        if layer_regex not in self._layers:
            r = self.trace.ranges
            chosen: dict[int, int] = {}
            if len(r):
                own_by_name = label_parts(r["name"].cat.categories.astype(str), layer_regex)[0] >= 0
                codes = r["name"].cat.codes.to_numpy()
                own = (np.where(codes >= 0, own_by_name[np.maximum(codes, 0)], False) if len(own_by_name)
                       else np.zeros(len(codes), dtype=bool))
                lay = trace_layers(self.trace, layer_regex)
                ids = np.flatnonzero(own)
                # The outermost range of each layer on its branch (a layer range inside another of
                # the same layer is part of it).
                par = self.parent[ids]
                inner = (par >= 0) & (lay[np.maximum(par, 0)] == lay[ids]) & own[np.maximum(par, 0)]
                ids = ids[~inner]
                order = np.argsort(lay[ids], kind="stable")
                ids = ids[order]
                cuts = np.flatnonzero(np.diff(lay[ids])) + 1
                for group in np.split(ids, cuts) if len(ids) else []:
                    chosen[int(lay[group[0]])] = self.typical(group)
            self._layers[layer_regex] = chosen
        return self._layers[layer_regex].get(int(layer))

    def first_step(self) -> int | None:
        """The typical step range (at any depth), else the longest top-level range; None
        without ranges."""
        if self._first_step is None:
            n = len(self.start)
            found = None
            if n:
                step = trace_steps(self.trace, self.step_regex)
                ids = np.flatnonzero(step == np.arange(n))
                if not len(ids):  # the longest top-level range
                    ids = np.flatnonzero(self.depth == 0)
                    ids = ids[np.lexsort((ids, self.start[ids], self.start[ids] - self.end[ids]))]
                    found = int(ids[0]) if len(ids) else None
                else:
                    found = self.typical(ids)
            self._first_step = (found,)
        return self._first_step[0]

    def subtree(self, rid: int) -> np.ndarray:
        """Range ``rid`` and its descendants, in (start, depth, id) order: the candidates are
        the ranges inside it on its thread (one block of the thread order), kept when ``rid``
        is their ancestor (see the module docstring)."""
        p = int(self.pos[rid])
        a, b = int(self.thread_lo[p]), int(self.thread_hi[p])
        starts = self.start_sorted[a:b]
        lo = a + int(np.searchsorted(starts, self.start[rid], side="left"))
        hi = a + int(np.searchsorted(starts, self.end[rid], side="right"))
        ids = self.order[lo:hi]
        ids = ids[(self.end[ids] <= self.end[rid]) & (self.depth[ids] >= self.depth[rid])]
        node = ids.copy()
        while (up := self.depth[node] > self.depth[rid]).any():
            node[up] = self.parent[node[up]]
        return ids[node == rid]

    def kernels_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows of the projected kernels whose innermost range is one of ``ids``."""
        lo, hi = self.kernel_off[ids], self.kernel_off[ids + 1]
        n = hi - lo
        if not n.sum():
            return np.zeros(0, np.int64)
        shift = np.repeat(lo - np.r_[0, np.cumsum(n)[:-1]], n)
        return self.kernel_rows[shift + np.arange(int(n.sum()))]


def index(trace: Trace, step_regex: str | None = None) -> Index:
    """The :class:`Index` of ``trace``, made on first use and kept on the trace."""
    key = f"viz_index:{step_regex}"
    if key not in trace.memo:
        trace.memo[key] = Index(trace, step_regex)
    return trace.memo[key]


def range_keys(trace: Trace, step_regex: str | None = None) -> pd.Series:
    """The step-free key of every range (indexed like ``trace.ranges``)."""
    ix = index(trace, step_regex)
    return pd.Series(ix.keys[ix.key_code], index=trace.ranges.index, dtype=object)


def instances(trace: Trace, key: str, step_regex: str | None = None) -> pd.DataFrame:
    """Ranges (rows of ``trace.ranges``) whose key or full path is ``key``, earliest first."""
    return trace.ranges.iloc[index(trace, step_regex).instances(str(key))]


def first_step(trace: Trace, step_regex: str | None = None) -> int | None:
    """Range id of the typical step (a decode step of median duration; any step where none is
    decode), else the longest top-level range; None without ranges."""
    return index(trace, step_regex).first_step()


def resolve(trace: Trace, where=None, step_regex: str | None = None) -> int | None:
    """A range id from ``where``: an int range id, ``("layer", n)``, or a key/path string
    (their typical instance: see the module docstring). ``None`` means the typical decode step
    (or None for a trace without ranges)."""
    if where is None:
        return first_step(trace, step_regex)
    if isinstance(where, (int, np.integer)):
        if not 0 <= int(where) < len(trace.ranges):
            raise WorkbenchError(trace.label, f"no range with id {where}")
        return int(where)
    if isinstance(where, tuple) and len(where) == 2 and where[0] == "layer":
        ix = index(trace, step_regex)
        rid = ix.layer_instance(int(where[1]))
        if rid is None:
            raise WorkbenchError(trace.label, f"no range for layer {where[1]}")
        _launched(ix, rid, f"layer {where[1]}")
        return rid
    ix = index(trace, step_regex)
    ids = ix.instances(str(where))
    if not len(ids):
        raise WorkbenchError(trace.label, f"no range {where!s:.200}")
    rid = ix.typical(ids)
    _launched(ix, rid, f"range {where!s:.200}")
    return rid


def _launched(ix: Index, rid: int, what: str) -> None:
    """Refuse, in one line, a typical instance outside every decode step that launched nothing:
    its trace has no instance of it holding kernels (a CUDA graph captured inside it, whose
    replays' kernels this trace puts in no such range) and an empty timeline would say otherwise."""
    if ix.phase[rid] != DECODE and not len(ix.kernels_of(ix.subtree(rid))):
        path = ix.trace.ranges["path"].iat[rid]
        raise WorkbenchError(ix.trace.label, f"{what}: its only instances ({path!s:.200}, ...) launched no kernels; "
                             "this trace puts the kernels of its decode steps in no such range (a CUDA graph's "
                             "replays captured without the ranges it was captured in)")


@dataclass
class Window:
    """One range instance: the range itself, its descendants and the kernels they launched."""

    range_id: int | None
    ranges: pd.DataFrame   # the range and its descendants, by start
    kernels: pd.DataFrame  # projected kernels launched inside, by start
    t0: int                # window start (ns), the origin of the timeline's time axis
    t1: int

    @property
    def title(self) -> str:
        if self.range_id is None or not len(self.ranges):
            return "whole trace"
        return str(self.ranges.loc[self.ranges["id"] == self.range_id, "path"].iloc[0])


def window(trace: Trace, where=None, *, max_kernels: int = 20000, step_regex: str | None = None) -> Window:
    """The range instance named by ``where`` (see :func:`resolve`) with its descendants and
    its first ``max_kernels`` kernels; a trace without ranges gives its first ``max_kernels``
    kernels. Windows are kept on the trace's index: asking again costs nothing."""
    ix = index(trace, step_regex)
    rid = resolve(trace, where, step_regex)
    memo = (rid, max_kernels)
    if memo in ix._windows:
        ix._windows.move_to_end(memo)
        return ix._windows[memo]
    r, p = trace.ranges, ix.projected
    if rid is None:
        sub = r.iloc[:0]
        rows = np.arange(len(p))
    else:
        ids = ix.subtree(rid)
        sub = r.iloc[ids]
        rows = ix.kernels_of(ids)
    rows = rows[np.lexsort((rows, ix.kernel_end[rows], ix.kernel_start[rows]))][:max_kernels]  # by start, end, as stored
    k = p.iloc[rows]
    starts = [int(x.min()) for x in (sub["start"], k["start"]) if len(x)]
    ends = [int(x.max()) for x in (sub["end"], k["end"]) if len(x)]
    t0 = min(starts) if starts else 0
    t1 = max(ends) if ends else t0
    w = Window(rid, sub.reset_index(drop=True), k.reset_index(drop=True), t0, t1)
    ix._windows[memo] = w
    if len(ix._windows) > _WINDOWS:
        ix._windows.popitem(last=False)
    return w
