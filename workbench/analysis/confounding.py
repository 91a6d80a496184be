"""Whether a wall-time comparison of two captures measures the change, or something else too.

A wall-time verdict (decode step, prefill) is **confounded** when either holds:

- **host-bound**: base or fix keeps its device busy for less than :data:`HOST_BOUND` of a decode
  step (:mod:`.busy`): the step waits on launches, Python or synchronization, so its wall time
  measures the host more than the work the change made;
- **untouched ranges moved on the host**: ranges whose kernels the change left as they were
  (the same kernels per decode step, in the same order, and the same GPU time: the diff's
  ``changed`` is empty) took longer or shorter on the host beyond their own noise. Their instances' host
  durations (every layer's, every decode step's) are compared by :func:`.stats.compare_samples`,
  and a label moved when the verdict is faster or slower: the interval excludes 1 and the change
  is at least the threshold. Only ranges with no range inside them count (a layer holds the
  changed range), and only ranges that launched their kernels themselves (a CUDA graph's
  kernels run on the device after the host range that launched the graph: its duration is no
  host work of theirs), so what moved is the machine, the process or the capture, not the change.

- **interpreted**: base or fix ran its Triton kernels under Triton's interpreter (a CPU
  capture: ``trace.manifest.interpreter_note``): their time is the interpreter's, not the
  kernels', and only the counts compare.

For CPU work (CPU ops, timed on the host) a range whose time moved is no less untouched: its
kernels are the same, and host time is all a CPU op has. Then a report leads with what the change does move, kernels and GPU time per decode step, and
gives the wall time without a verdict, with this evidence beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..trace.manifest import interpreter_note
from .per_step import labels
from .projection import project
from .stats import FASTER, SLOWER, Comparison, compare_samples
from .steps import DECODE, trace_steps_info

HOST_BOUND = 0.5


@dataclass(frozen=True)
class Confounding:
    """``busy``: each side's median busy fraction per decode step (None: not device work);
    ``moved``: untouched range labels whose host time moved beyond noise, largest first."""

    busy: tuple[float | None, float | None]
    moved: list[Comparison] = field(default_factory=list)
    interpreted: tuple[bool, bool] = (False, False)

    @property
    def host_bound(self) -> tuple[bool, bool]:
        return tuple(b is not None and b < HOST_BOUND for b in self.busy)  # type: ignore[return-value]

    @property
    def confounded(self) -> bool:
        return any(self.host_bound) or bool(self.moved) or any(self.interpreted)

    def reasons(self, shown: int = 4, arrow: str = "→") -> list[str]:
        """The evidence, one phrase each: ``base and fix host/launch-bound (GPU busy 7.6% → 4.0% of
        a decode step)``, ``ranges the change did not touch moved on the host: qkv +51%, ...``."""
        out = []
        if any(self.interpreted):
            who = "base and fix" if all(self.interpreted) else "base" if self.interpreted[0] else "fix"
            out.append(f"{who} ran Triton kernels under the Triton interpreter (numpy on the host), whose times "
                       "measure the interpreter, not the kernels")
        bound = self.host_bound
        if any(bound):
            who = "base and fix" if all(bound) else "base" if bound[0] else "fix"
            a, b = (f"{100 * x:.1f}%" if x is not None else "n/a" for x in self.busy)
            out.append(f"{who} host/launch-bound (GPU busy {a} {arrow} {b} of a decode step)")
        if self.moved:
            parts = [f"{c.metric} {100 * (c.ratio - 1):+.0f}%" for c in self.moved[:shown]]
            more = f", {len(self.moved) - shown} more" if len(self.moved) > shown else ""
            out.append("ranges the change did not touch moved on the host: " + ", ".join(parts) + more)
        return out


def untouched_host_moves(a, b, d) -> list[Comparison]:
    """Per label of the per-step ranges the change left untouched (no range inside them), base
    against fix host durations over all their decode-step instances; those that moved beyond
    noise (faster or slower), largest move first."""
    r = d.per_step()
    device = "kernel" in d.work_units
    untouched = r[(r["status"] == "both") & ((r["changed"] == "") | (~device & (r["changed"] == "time")))]
    if not len(untouched):
        return []
    label_of = dict(zip(untouched["range"], labels(untouched)))
    samples = []
    for trace, keys in ((a, d.range_keys[0]), (b, d.range_keys[1])):
        rr = trace.columns("ranges", ["start", "end", "parent"])
        parent = rr["parent"].to_numpy()
        inner = np.bincount(parent[parent >= 0], minlength=len(rr)) > 0
        p = project(trace)
        graphed = np.zeros(len(rr), dtype=bool)
        rid = p["range_id"].to_numpy()[p["graph"].to_numpy(dtype=bool)]
        graphed[rid[rid >= 0]] = True
        inner |= graphed
        phase = trace_steps_info(trace).phase
        ids = keys.index.to_numpy()
        keep = keys.isin(label_of).to_numpy() & ~inner[ids] & (phase[ids] == DECODE)
        ids = ids[keep]
        dur = (rr["end"].to_numpy() - rr["start"].to_numpy())[ids]
        by: dict[str, list] = {}
        for k, x in zip(keys.to_numpy()[keep].tolist(), dur.tolist()):
            by.setdefault(label_of[k], []).append(x)
        samples.append(by)
    out = []
    for label in sorted(set(samples[0]) & set(samples[1])):
        c = compare_samples(label, samples[0][label], samples[1][label])
        if c.verdict in (FASTER, SLOWER):
            out.append(c)
    return sorted(out, key=lambda c: (-abs(np.log(c.ratio)), c.metric))


def assess(a, b, d, busy: tuple[float | None, float | None]) -> Confounding:
    """The :class:`Confounding` of traces ``a`` and ``b`` with diff ``d`` and each side's median
    busy fraction per decode step (None where it is not device work)."""
    return Confounding(busy, untouched_host_moves(a, b, d),
                       (interpreter_note(a.meta) is not None, interpreter_note(b.meta) is not None))
