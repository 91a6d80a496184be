"""The result of a trace diff (:func:`.diff.diff`): its tables, its totals and timed phases,
the views every consumer reads (the per-decode-step rows, their groups across layers, the
changed ranges) and its display in a notebook or on a terminal (:mod:`.diff_display`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..trace.display import Table
from .alignment import Alignment
from .per_step import by_label, labels, time_moved
from .projection import NO_LAUNCH, NO_RANGE
from .stats import Comparison

# The keys of kernels launched directly in a step range or a prefill model call, which no
# named range holds: any two traces with steps have them (see :func:`.diff.step_free`).
STEP_KEY, PREFILL_KEY = "(step)", "prefill"
# Keys any two traces can share without sharing a range: they alone are nothing in common
# where either trace has named ranges.
PLACEHOLDERS = (STEP_KEY, PREFILL_KEY, NO_RANGE, NO_LAUNCH)


@dataclass
class TraceDiff:
    """The result of :func:`.diff.diff`. All tables are pandas DataFrames (``ranges``, ``layers``,
    ``groups()`` and ``changed()`` are :class:`~workbench.trace.display.Table`\ s: in a notebook
    they show formatted, changed rows highlighted); the diff itself shows its headline, totals,
    timed phases and changes grouped across layers (:mod:`.diff_display`)."""

    a: str
    b: str
    ranges: pd.DataFrame  # per matched range key
    layers: pd.DataFrame  # per (layer, innermost range name)
    steps: dict[str, int]  # number of steps in A and B
    alignments: dict[str, Alignment] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    # The timed phases both captures recorded, B against A with a confidence interval and a
    # verdict (:mod:`.stats`).
    timing: list[Comparison] = field(default_factory=list)
    # What each side's kernel table holds (``kernel`` or ``cpu_op``: trace.manifest.work_units),
    # so views of the diff word CPU ops as such.
    work_units: tuple[str, str] = ("kernel", "kernel")
    # Per side, each range that launched kernels (index: its id) -> its key in ``ranges``.
    range_keys: tuple[pd.Series, pd.Series] = field(default_factory=lambda: (pd.Series(dtype=object),) * 2)

    def __post_init__(self):
        r, lay = self.ranges, self.layers
        self.ranges = Table(r, headline=f"{self.a} \u2192 {self.b}: per range (per decode step; prefill per prefill)")
        moved = (lay["delta_kernels"] != 0) | time_moved(lay["gpu_time_ns_a"], lay["gpu_time_ns_b"]) if len(lay) else ()
        self.layers = Table(lay, headline=f"{self.a} \u2192 {self.b}: per layer and range, per decode step", changed=moved)

    def _repr_html_(self) -> str:
        from .diff_display import diff_page
        from ..trace.display import page_html

        return page_html(*diff_page(self))

    def __repr__(self) -> str:
        from .diff_display import diff_page
        from ..trace.display import page_text

        return page_text(*diff_page(self), rows=8)

    @property
    def common(self) -> int:
        return int((self.ranges["status"] == "both").sum()) if len(self.ranges) else 0

    def nothing_in_common(self, sides: tuple[str, str] = ("A", "B")) -> str | None:
        """Why the two traces have nothing to compare range by range, in a line that diffs and
        reports alike print (``sides``: what they call the two traces); None where they share a
        named range, or where neither has one (two traces of flat steps compare step to step).
        A shared placeholder (``(step)``, ``(no range)``, ...) alone is nothing in common."""
        r = self.ranges
        if not len(r):
            return None
        named = ~r["range"].isin(PLACEHOLDERS)
        both = r["status"] == "both"
        if (both & named).any() or (both.any() and not named.any()):
            return None
        a, b = sides
        shared = ", ".join(r.loc[both, "range"].astype(str))
        return (f"no range in common between {a} and {b}: their range paths differ entirely "
                f"({int((r['status'] == 'only_a').sum())} only in {a}, {int((r['status'] == 'only_b').sum())} only in "
                f"{b}" + (f"; only the placeholder {shared} in both" if shared else "") + ")")

    def per_step(self) -> pd.DataFrame:
        """The ranges whose numbers are per decode step (:mod:`.per_step`): every per-step view
        (report tables, widget, figures, the text diff) reads these rows only."""
        return self.ranges[self.ranges["per_step"]]

    def groups(self) -> Table:
        """The per-decode-step ranges grouped by label across layers (:func:`.per_step.by_label`)."""
        return Table(by_label(self.per_step()), headline=f"{self.a} \u2192 {self.b}: per decode step, by range "
                                                          "across layers, largest time change first")

    def aligned(self, label: str, rows: pd.DataFrame | None = None) -> Alignment | None:
        """The aligned kernels of the first range labelled ``label`` (of ``rows``, default the
        per-step ranges) whose kernels changed; None where none did."""
        rows = self.per_step() if rows is None else rows
        keys = rows.loc[labels(rows) == label, "range"]
        return next((self.alignments[k] for k in keys
                     if k in self.alignments and (self.alignments[k].removed or self.alignments[k].added)), None)

    def changed(self, n: int = 10, per_step: bool | None = None) -> Table:
        """The changed ranges (``ranges.changed``: see :func:`diff`), largest GPU time change
        first; ``per_step`` True: of decode steps only, False: the others (prefill, outside steps)."""
        r = self.ranges
        if per_step is not None:
            r = r[r["per_step"] == per_step]
        r = r[r["changed"] != ""]
        order = (r["delta_gpu_time_ns"].abs() + 0).sort_values(ascending=False, kind="stable").index
        return Table(r.loc[order].head(n).reset_index(drop=True), headline=f"{self.a} \u2192 {self.b}: changed ranges, "
                                                                            "largest time change first")

    def to_rows(self) -> list[dict]:
        rows = self.ranges.copy()
        rows["alignment"] = rows["range"].map(lambda k: self.alignments[k].describe() if k in self.alignments else "")
        return rows.to_dict(orient="records")
