"""A report of two trace sets: the member pair of one rank is reported in full, as any two
traces are, and a table sets every rank beside it: work units and their time per step, base
-> fix (the sets' rank-against-rank diff), time outside collectives and the collectives' share
of the step (median over steps), and how many steps each rank was the straggler in.
"""

from __future__ import annotations

import os

from ..errors import WorkbenchError
from .. import textfmt as fmt
from .model import Code, Table
from ..trace.words import Words


def find_sets(names, root) -> list:
    """The trace set each of ``names`` is (None where it is a trace or file)."""
    from pathlib import Path

    from ..sets.store import find_set

    return [find_set(n, root) if isinstance(n, (str, os.PathLike)) and not Path(n).is_file() else None
            for n in names]


def open_pair(base, fix, more, root):
    """The two sets of a set report, and the rank whose members stand for them (the lowest
    rank both hold); refused in one line unless exactly two sets and nothing else are given."""
    from ..sets.executors import Executor
    from ..sets.trace_set import open_set

    if more:
        raise WorkbenchError("report", "a report of trace sets compares two sets and nothing else")
    # In this process: a report's few diffs and step tables are not worth worker start-up.
    sets = [open_set(n, root, executor=Executor("local", 1)) for n in (base, fix)]
    common = sorted(set(sets[0].members["rank"].astype(int)) & set(sets[1].members["rank"].astype(int)))
    if not common:
        raise WorkbenchError("report", f"trace sets {sets[0].name} and {sets[1].name} have no rank in common")
    return sets, common[0]


def ranks_table(base, fix, words: Words) -> Table:
    """One row per rank of either set (see the module docstring)."""
    d = base.diff(fix)
    # Per side: each rank's medians over its steps, and its straggler steps.
    medians = {side: s.steps().groupby("rank")[["own_ns", "collective_share"]].median()
               for side, s in (("a", base), ("b", fix))}
    lagging = {side: s.stragglers()["straggler"].value_counts() for side, s in (("a", base), ("b", fix))}

    def step_median(side: str, rank: int, col: str):
        m = medians[side]
        return float(m.at[rank, col]) if rank in m.index else None

    def pair(a, b, show) -> str:
        return f"{show(a) if a is not None else '–'} → {show(b) if b is not None else '–'}"

    rows = []
    for r in d.itertuples():
        ka = getattr(r, "kernels_per_step_a", None) if r.status == "both" else None
        kb = getattr(r, "kernels_per_step_b", None) if r.status == "both" else None
        ga = r.gpu_time_per_step_ns_a if r.status == "both" else None
        gb = r.gpu_time_per_step_ns_b if r.status == "both" else None
        rows.append([
            str(r.rank), pair(ka, kb, fmt.num), pair(ga, gb, fmt.us_from_ns),
            pair(step_median("a", r.rank, "own_ns"), step_median("b", r.rank, "own_ns"), lambda ns: fmt.ms(ns / 1e6)),
            pair(step_median("a", r.rank, "collective_share"), step_median("b", r.rank, "collective_share"),
                 lambda x: f"{x:.0%}"),
            f"{int(lagging['a'].get(r.rank, 0))} → {int(lagging['b'].get(r.rank, 0))}",
        ])
    headers = ["Rank", f"{words.Units} per step", f"{words.time} per step ({fmt.MICRO})",
               "Time outside collectives per step (ms)", "Collectives' share of the step", "Straggler in steps"]
    note = (f"Base set {base.name} → fix set {fix.name}, rank against rank. {words.Units} and their time: mean per "
            "decode step, from each rank's diff. Time outside collectives (the step's wall time less its "
            "collectives) and the collectives' share: median over steps. The straggler of a step is the rank "
            "with the most time outside collectives: the one the others waited for.")
    return Table(headers, rows, note=note, numeric=(1, 2, 3, 4, 5))


def ranks_subtitle(sets, rank: int) -> list:
    return [f" (rank {rank} of trace sets ", Code(sets[0].name), " → ", Code(sets[1].name), ")"]
