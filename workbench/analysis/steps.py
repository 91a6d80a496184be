"""Steps: which range is the step of each range, the one rule every per-step count uses
(launches per step, the report's launches, the projection's ``step`` column, the per-step
summary and the diff's step-free range keys).

A *step range* is a range whose name matches the step regex (``step_0``, ``ProfilerStep#3``)
and that has no ancestor whose name matches it: the outermost step-named range on its branch,
at any depth. So a program that wraps its steps in a window range (``decode > step_2 >
layer_03``, ``generate > ProfilerStep#3``) has the same steps as one whose steps are the
top-level ranges. Every range at or below a step range belongs to that step, and a kernel to
the step of its innermost range. A trace without step-named ranges has no steps.

Worked out per range, never per kernel (a 10M-kernel trace has far fewer ranges), by the
pointer doubling of :func:`~workbench.trace.build.nesting.climb`: no loop over depths.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace.build.nesting import climb
from ..trace.schema import Trace

STEP_REGEX = r"^(step|ProfilerStep)"


def step_of_ranges(ranges: pd.DataFrame, step_regex: str = STEP_REGEX) -> np.ndarray:
    """The step range of each range (its id; itself for a step range), -1 for a range in no
    step. ``ranges`` needs the columns ``name`` (categorical) and ``parent``."""
    parent = ranges["parent"].to_numpy()
    rx = re.compile(step_regex)
    # The regex runs once per distinct name, not once per range.
    names = ranges["name"]
    by_cat = np.array([bool(rx.search(str(c))) for c in names.cat.categories], dtype=bool)
    codes = names.cat.codes.to_numpy()
    named = np.where(codes >= 0, by_cat[np.maximum(codes, 0)], False) if len(by_cat) else np.zeros(len(codes), bool)
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


def trace_steps(trace: Trace, step_regex: str = STEP_REGEX) -> np.ndarray:
    """:func:`step_of_ranges` of the trace's ranges, computed once per regex (the projection,
    the summaries and the diff of one trace all need it)."""
    key = f"range_steps:{step_regex}"
    if key not in trace.memo:
        trace.memo[key] = step_of_ranges(trace.columns("ranges", ["name", "parent"]), step_regex)
    return trace.memo[key]


def step_groups(trace: Trace) -> np.ndarray:
    """The range each range is counted under per step: its step range, else its root. A
    trace without step ranges is so grouped by its top-level ranges (e.g. the top-level
    ``cpu_op`` work units of a CPU capture), as it always was."""
    step = trace_steps(trace)
    if (step >= 0).all():
        return step
    return np.where(step >= 0, step, roots(trace.columns("ranges", ["parent"])["parent"].to_numpy()))


def step_parts(trace: Trace, step_regex: str = STEP_REGEX) -> np.ndarray:
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
