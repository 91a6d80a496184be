"""Analysis: pure functions over normalized traces (projection, steps, tables, diff)."""

from .projection import NO_LAUNCH, NO_RANGE, project, range_layers
from .steps import STEP_REGEX, step_of_ranges
from .tables import BY, launches_per_step, summary

__all__ = ["NO_LAUNCH", "NO_RANGE", "project", "range_layers", "STEP_REGEX", "step_of_ranges", "BY",
           "launches_per_step", "summary"]

from .diff import Alignment, TraceDiff, align, diff  # noqa: E402
from .gates import check_gates  # noqa: E402

__all__ += ["Alignment", "TraceDiff", "align", "check_gates", "diff"]
