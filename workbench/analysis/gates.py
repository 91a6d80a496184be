"""``--fail-if`` gates of ``workbench diff``: is B worse than A by more than a limit?"""

from __future__ import annotations

import re

from ..errors import WorkbenchError
from .diff import TraceDiff

_GATE = re.compile(r"^\s*(kernels_per_step|gpu_time_per_step|kernels|gpu_time)\s*>\s*\+?(\d+(?:\.\d+)?)\s*(%?)\s*$")


def check_gates(d: TraceDiff, gates: list[str]) -> list[str]:
    """Evaluate ``--fail-if`` gates such as ``kernels_per_step>0`` (B has more kernels per step
    than A) or ``gpu_time_per_step>5%``; returns the violated ones, described."""
    failed = []
    for gate in gates:
        m = _GATE.match(gate)
        if not m:
            raise WorkbenchError(gate, "bad --fail-if gate; use METRIC>N or METRIC>N% with METRIC one of "
                                       "kernels_per_step, gpu_time_per_step, kernels, gpu_time")
        metric, value, pct = m.group(1), float(m.group(2)), bool(m.group(3))
        key = {"kernels_per_step": "kernels_per_step", "gpu_time_per_step": "gpu_time_per_step_ns",
               "kernels": "kernels", "gpu_time": "gpu_time_per_step_ns"}[metric]
        va, vb = d.totals[f"{key}_a"], d.totals[f"{key}_b"]
        if metric == "gpu_time":
            va, vb = va * d.totals["steps_a"], vb * d.totals["steps_b"]
        delta = vb - va
        limit = va * value / 100.0 if pct else value
        if delta > limit:
            failed.append(f"{metric}: {va:g} -> {vb:g} (+{delta:g}, limit +{value:g}{'%' if pct else ''})")
    return failed
