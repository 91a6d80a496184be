"""Steps and phases: which range is the step of each range, and whether it is prefill or
decode work; the one rule every per-step count uses (launches per step, the report's
launches, the projection's ``step`` column, the per-step summary and the diff).

**Named steps.** A *step range* is a range whose name matches the step regex (``step_0``,
``ProfilerStep#3``) and that has no ancestor whose name matches it: the outermost step-named
range on its branch, at any depth. So a program that wraps its steps in a window range
(``decode > step_2 > layer_03``, ``generate > ProfilerStep#3``) has the same steps as one whose
steps are the top-level ranges.

**Model calls.** A trace with no step-named range but with layer ranges (a ``generate`` loop
recorded with ``annotate_modules``, torch.profiler's ``nn.Module:`` events, another tool's
NVTX) takes each call of the model as a step: the outermost range that holds each layer at
most once and holds two layers at least (``LlamaForCausalLM`` around ``model.layers.0..15``;
not the ``generate`` window around many calls, nor a lone layer range). Among the calls under one parent (a window, or the
trace's top level), the first is the prefill and the rest are decode steps, labelled
``prefill``, ``step_0``, ``step_1``, ... as the workbench's own runner names them. Wrap each
``generate`` in a window (``wb.window``) so each has its prefill.

**Phases.** A range is *prefill* when it or an ancestor matches the prefill regex
(``prefill``: the runner's range) or it is in a model call taken as the prefill; *decode* when
it is in a step and not prefill; *other* otherwise (set-up, ranges outside steps). Per-step
numbers count decode steps only; prefill is its own phase.

Regexes come from the call, else from the trace's manifest (``analysis.step_regex`` /
``analysis.prefill_regex``, set by ``workbench import --step-regex/--prefill-regex``), else the
defaults. Worked out per range, never per kernel, by pointer doubling (``climb``) and
vectorized passes over depth: no Python loop over ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..patterns import compile_regex
from ..trace.arrays import climb
from ..trace.manifest import ANALYSIS, section
from ..trace.schema import Trace
from .layers import trace_label_parts

STEP_REGEX = r"^(step|ProfilerStep)"
PREFILL_REGEX = r"^prefill"
PHASES = ("other", "prefill", "decode")
OTHER, PREFILL, DECODE = range(3)


@dataclass
class Steps:
    """Per range of a trace: ``step`` (its step range's id, -1: in none), ``phase`` (OTHER,
    PREFILL, DECODE) and, at each step range's id, ``label`` (its name, or ``prefill`` /
    ``step_i`` for a model call) and ``key`` (its parent's path and its label: the same step on
    several threads or ranks has one key)."""

    step: np.ndarray
    phase: np.ndarray
    label: np.ndarray
    key: np.ndarray
    calls: bool  # steps are model calls, not named ranges

    def ids(self, phase: int | None = None) -> np.ndarray:
        """The step ranges (of one phase), in id order."""
        ids = np.flatnonzero(self.step == np.arange(len(self.step)))
        return ids if phase is None else ids[self.phase[ids] == phase]

    def count(self, phase: int = DECODE, among: np.ndarray | None = None) -> int:
        """Steps of a phase (those of ``among``, step range ids, if given), counted by key."""
        ids = self.ids(phase) if among is None else among[self.phase[among] == phase]
        return len(set(self.key[ids].tolist()))


def _matches(names: pd.Series, regex: str) -> np.ndarray:
    """Per range: whether its name matches (the regex runs once per distinct name)."""
    # A regex recorded in a manifest (set_phases) was checked there; one edited in by hand is
    # refused here in the same one line.
    rx = compile_regex(regex, "range regex")
    by_cat = np.array([bool(rx.search(str(c))) for c in names.cat.categories.tolist()], dtype=bool)
    codes = names.cat.codes.to_numpy()
    return np.where(codes >= 0, by_cat[np.maximum(codes, 0)], False) if len(by_cat) else np.zeros(len(codes), bool)


def step_of_ranges(ranges: pd.DataFrame, step_regex: str = STEP_REGEX) -> np.ndarray:
    """The named step range of each range (its id; itself for a step range), -1 for a range
    in no step. ``ranges`` needs the columns ``name`` (categorical) and ``parent``."""
    parent = ranges["parent"].to_numpy()
    named = _matches(ranges["name"], step_regex)
    if not named.any():
        return np.full(len(parent), -1, dtype=np.int64)
    near = climb(parent, named)[0]  # the nearest step-named range at or above each range
    # The step-named ranges as a forest of their own, each one under the nearest step-named
    # range above it: its roots are the step ranges (one climb, however deep they nest).
    above = np.full(len(parent), -1, dtype=np.int64)
    inner = np.flatnonzero(named & (parent >= 0))
    above[inner] = near[parent[inner]]
    outer = climb(above)[0]
    return np.where(near >= 0, outer[np.maximum(near, 0)], -1)


def _up(node: np.ndarray, parent: np.ndarray, sel: np.ndarray) -> None:
    node[sel] = parent[node[sel]]


def model_calls(parent: np.ndarray, own_layer: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The model call (see the module docstring) of each range, -1 for none. ``own_layer``:
    the layer each range's own name holds (-1: none)."""
    n = len(parent)
    none = np.full(n, -1, dtype=np.int64)
    has = own_layer >= 0
    if not has.any():
        return none
    nearest = climb(parent, has)[0]
    above = np.where(parent >= 0, nearest[np.maximum(parent, 0)], -1)
    roots = np.flatnonzero(has & (above < 0))  # layer ranges with no layer range above them
    depth = climb(parent)[1]
    # Two layer ranges of the same layer: their lowest common ancestor and everything above it
    # holds that layer twice. Consecutive ones (by layer, then time) find every such ancestor.
    order = roots[np.lexsort((start[roots], own_layer[roots]))]
    pairs = np.flatnonzero(own_layer[order][1:] == own_layer[order][:-1])
    a, b = order[pairs].copy(), order[pairs + 1].copy()
    while (deeper := depth[a] > depth[b]).any():
        _up(a, parent, deeper)
    while (deeper := depth[b] > depth[a]).any():
        _up(b, parent, deeper)
    while (apart := (a != b) & (a >= 0)).any():
        _up(a, parent, apart)
        _up(b, parent, apart)
    twice = np.zeros(n, dtype=bool)
    node = np.unique(a[a >= 0])
    while len(node):
        node = node[~twice[node]]
        twice[node] = True
        node = parent[node]
        node = node[node >= 0]
    top = ~twice & ((parent < 0) | twice[np.maximum(parent, 0)])
    call = climb(parent, top)[0]
    call[twice] = -1
    # A call holds two layers at least: a lone layer range (FSDP's per-block ranges with no
    # model range around them) is no model call.
    is_call = np.bincount(call[roots][call[roots] >= 0], minlength=n) >= 2
    return np.where((call >= 0) & is_call[np.maximum(call, 0)], call, none)


def set_phases(trace: Trace, step_regex: str | None = None, prefill_regex: str | None = None) -> None:
    """Record in the trace's manifest which ranges are steps and which are prefill (each regex
    given replaces the one recorded); a stored trace saved afterwards keeps them. Results
    worked out before with other regexes are dropped."""
    chosen = {}
    for flag, regex in (("step_regex", step_regex), ("prefill_regex", prefill_regex)):
        if regex is None:
            continue
        compile_regex(regex, f"--{flag.replace('_', '-')}")
        chosen[flag] = regex
    if chosen:
        trace.meta[ANALYSIS] = {**section(trace.meta, ANALYSIS), **chosen}
        trace.memo.clear()
        trace.views.pop("projected", None)


def _resolve(trace: Trace, step_regex: str | None, prefill_regex: str | None) -> tuple[str, str]:
    chosen = section(trace.meta, ANALYSIS)
    return (step_regex or chosen.get("step_regex") or STEP_REGEX,
            prefill_regex or chosen.get("prefill_regex") or PREFILL_REGEX)


def trace_steps_info(trace: Trace, step_regex: str | None = None, prefill_regex: str | None = None) -> Steps:
    """The :class:`Steps` of a trace, computed once per pair of regexes."""
    step_regex, prefill_regex = _resolve(trace, step_regex, prefill_regex)
    key = f"steps:{step_regex}:{prefill_regex}"
    if key not in trace.memo:
        trace.memo[key] = _steps(trace, step_regex, prefill_regex)
    return trace.memo[key]


def _steps(trace: Trace, step_regex: str, prefill_regex: str) -> Steps:
    r = trace.columns("ranges", ["name", "parent", "start"])
    parent = r["parent"].to_numpy()
    n = len(parent)
    step = step_of_ranges(r, step_regex)
    calls = not (step >= 0).any()
    names = np.asarray(r["name"].cat.categories.astype(str), dtype=object)
    codes = r["name"].cat.codes.to_numpy()
    if calls:
        own_by_cat = trace_label_parts(trace)[0]
        own = np.where(codes >= 0, own_by_cat[np.maximum(codes, 0)], -1) if len(names) else np.full(n, -1)
        step = model_calls(parent, own, r["start"].to_numpy())
    ids = np.flatnonzero(step == np.arange(n))
    prefill = climb(parent, _matches(r["name"], prefill_regex))[0] >= 0 if n else np.zeros(0, bool)
    label = np.full(n, "", dtype=object)
    if calls and len(ids):
        # Per parent, in time order: the first call is the prefill, the others step_0, step_1...
        order = ids[np.lexsort((r["start"].to_numpy()[ids], parent[ids]))]
        first = np.r_[True, parent[order][1:] != parent[order][:-1]]
        rank = np.arange(len(order)) - np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
        label[order] = np.where(first, "prefill", np.char.add("step_", (rank - 1).astype(str)).astype(object))
        prefill[order[first]] = True
        prefill = prefill | (np.where(step >= 0, prefill[np.maximum(step, 0)], False))
    elif len(ids):
        label[ids] = names[codes[ids]] if len(names) else ""
    phase = np.where(prefill, PREFILL, np.where(step >= 0, DECODE, OTHER)).astype(np.int8)
    key = np.full(n, "", dtype=object)
    if len(ids):
        paths = trace.columns("ranges", ["path"])["path"]
        up = parent[ids]
        above = np.full(len(ids), "", dtype=object)
        nested = up >= 0
        if nested.any():
            above[nested] = paths.iloc[up[nested]].to_numpy(dtype=object) + "/"
        key[ids] = above + label[ids]
        # The same key again on one thread is a later step of that name (a step regex that
        # matches an unnumbered range): numbered by its place there, in time order, so only
        # threads (ranks) share a step.
        order = ids[np.argsort(r["start"].to_numpy()[ids], kind="stable")]
        thread = trace.columns("ranges", ["pid", "tid"])
        nth = pd.DataFrame({"pid": thread["pid"].to_numpy()[order], "tid": thread["tid"].to_numpy()[order],
                            "key": key[order]}).groupby(["pid", "tid", "key"], sort=False).cumcount().to_numpy()
        later = np.flatnonzero(nth)
        if len(later):
            key[order[later]] = [f"{k}#{j}" for k, j in zip(key[order[later]].tolist(), nth[later].tolist())]
    return Steps(step, phase, label, key, calls)


def step_rows(info: Steps, steps: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Step ranges ``steps`` (ids; ``start``/``end`` theirs) as rows, one per step key: a step
    that ran on several threads or ranks is one row. Returns each range's row, the number of
    rows, each row's first start and last end, and the first range of each row (it names
    the row)."""
    codes = pd.factorize(info.key[steps].astype(str))[0]
    n = int(codes.max()) + 1 if len(codes) else 0
    first = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first, codes, start)
    last = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(last, codes, end)
    head = np.zeros(n, dtype=np.int64)
    head[codes[::-1]] = steps[::-1]
    return codes, n, first, last, head


def trace_steps(trace: Trace, step_regex: str | None = None) -> np.ndarray:
    """The step range of each range (its id), -1 for none: see :class:`Steps`."""
    return trace_steps_info(trace, step_regex).step


NO_STEP = "(no step)"


def step_groups(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """What each range is counted under per step, as codes into labels: its step's label;
    ``prefill`` for prefill work outside any step (the runner's ``prefill`` range); ``(no
    step)`` for the rest. Only steps are steps: a top-level range that is no step (an NCCL
    call, an aten range of an nsys export) is not one. Strings are made for the distinct
    steps only, never one per range."""
    info = trace_steps_info(trace)
    steps = info.ids()
    # Groups 0 and 1 are the pseudo-steps, then one per step range.
    text = np.concatenate([np.asarray([PHASES[PREFILL], NO_STEP], dtype=object), info.label[steps]])
    slot = np.zeros(len(info.step), dtype=np.int64)
    slot[steps] = np.arange(2, len(steps) + 2)
    group = np.where(info.step >= 0, slot[np.maximum(info.step, 0)], np.where(info.phase == PREFILL, 0, 1))
    codes, labels = pd.factorize(text, sort=True)
    return codes.astype(np.int64)[group], np.asarray(labels, dtype=object)


def step_parts(trace: Trace, step_regex: str | None = None) -> np.ndarray:
    """Per range: 1 + the place of its step range's part among the "/"-separated parts of its
    path, the part the diff cuts out (``decode/step_2/layer_03``: 2, ``step_2`` being part 1),
    0 for a range in no step. The parts above a step are counted in its parent's path, so a name there that
    holds a "/" counts as two parts, as a cut by "/" reads it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    step = trace_steps(trace, step_regex)
    steps = np.flatnonzero(step == np.arange(len(step)))
    parent = trace.columns("ranges", ["parent"])["parent"].to_numpy()[steps]
    nested = np.flatnonzero(parent >= 0)
    above = np.zeros(len(step), dtype=np.int64)  # per step range: the parts above it
    if len(nested):  # only the steps' parents' paths are made strings
        paths = trace.columns("ranges", ["path"])["path"].iloc[parent[nested]]
        slashes = pc.count_substring(pa.array(paths, pa.large_string()), "/")
        above[steps[nested]] = slashes.to_numpy(zero_copy_only=False) + 1
    return np.where(step >= 0, above[np.maximum(step, 0)] + 1, 0)


def roots(parent: np.ndarray) -> np.ndarray:
    """Outermost ancestor of each range (itself for a root)."""
    return climb(parent)[0]
