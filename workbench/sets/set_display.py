"""How a trace set and its tables show themselves (:class:`.trace_set.TraceSet` in a notebook and
on a terminal): the set's headline (its members, ranks and work), its members table with only
the columns that tell them apart, and a headline for each table its methods return, the
straggler view's worked out from its rows. Read from ``set.json`` and the returned tables only:
showing a set runs no task."""

from __future__ import annotations

import pandas as pd

from .. import textfmt as fmt
from ..trace.display import Table
from ..trace.words import joined, unit_words

# Member columns never shown: where it is stored (the stored line says), and empty values.
_HIDDEN = ("path",)
_EMPTY = ("", None, -1)


def _words(ts):
    return joined(unit_words(str(u)) for u in ts.members.get("work_units", pd.Series(["kernel"])).fillna("kernel"))


def set_page(ts) -> tuple[str, list[str], list]:
    """The set's display as :func:`~workbench.trace.display.page_html` takes it."""
    from ..trace.display import Part

    m = ts.members
    w = _words(ts)
    ranks = sorted({int(r) for r in m["rank"]}) if len(m) else []
    work = f", {fmt.num(m['kernels'].sum())} {w.units}" if "kernels" in m else ""
    head = f"trace set {ts.name}: {len(m)} member{'s' if len(m) != 1 else ''}, ranks {fmt.layer_span(ranks)}{work}"
    shown = m[[c for c in m.columns if c not in _HIDDEN and not m[c].isin(_EMPTY).all() and m[c].notna().any()]]
    lines = [f"stored: {ts.path}; per-member work on the {ts.executor.kind} executor",
             "ts.summary(by='rank'), ts.stragglers(), ts.steps(), ts.collectives(), ts.sql(...), ts.diff(other)"]
    return head, lines, [Part(shown.reset_index(drop=True), "members")]


def summary_table(ts, by: str, df: pd.DataFrame) -> Table:
    w = _words(ts)
    what = "per rank, its work, steps, busy and collective time" if by == "rank" else f"each member's summary by {by}"
    notes = () if w.unit == "kernel" else (f"the kernels and gpu_time_ns columns count {w.units} and their {w.time}",)
    # Per rank, the ranks that were a step's straggler stand out.
    changed = df["straggler_steps"] > 0 if by == "rank" and "straggler_steps" in df else None
    return Table(df, headline=f"{ts.name}: {what}", notes=notes, changed=changed)


def stragglers_table(ts, df: pd.DataFrame) -> Table:
    """Headlined by the rank that was the straggler most often: ``rank 2 was the straggler of 3 of
    3 steps (median lag 120.8 ms behind the other ranks)``."""
    if not len(df):
        return Table(df, headline=f"{ts.name}: no decode steps to compare across ranks")
    counts = df["straggler"].value_counts(sort=True)
    rank, n = int(counts.index[0]), int(counts.iloc[0])
    lag = df.loc[df["straggler"] == rank, "lag_ns"].median()
    return Table(df, headline=f"{ts.name}: rank {rank} was the straggler of {n} of {len(df)} steps (median lag "
                              f"{fmt.duration(lag)} behind the other ranks)")


def titled(df: pd.DataFrame, headline: str) -> Table:
    return Table(df, headline=headline)
