"""Trace sets, the API: ``open_set(name)`` gives a :class:`TraceSet`, the stored traces of a
job's ranks (or of many runs) with their roles::

    ts = wb.import_set("tp4", ["rank*.json.gz"])      # or: workbench import --set tp4 FILES...
    ts = wb.open_set("tp4")
    ts.summary(by="rank,layer")       # each member's summary(by="layer"), a rank column first
    ts.steps()                        # per rank and step: wall, busy, collective and own time
    ts.stragglers()                   # per step: the rank the others waited for
    ts.collectives()                  # collectives per rank, layer and step, share of the step
    ts.sql("select rank, count(*) from kernels group by rank")
    ts.diff(wb.open_set("tp4-fused")) # rank against rank: analysis.diff of each pair

Each per-member computation is a task (:mod:`workbench.sets.executors`: a local process pool, or
Ray) that opens its member from the store and returns small tables, merged here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..errors import WorkbenchError
from .executors import Executor, executor as as_executor

# The members table's leading columns: who each member is.
_FIRST = ("member", "rank", "local_rank", "host", "run_id", "variant", "source")


class TraceSet:
    """A stored trace set: ``name``, ``path``, ``meta`` (its ``set.json``), ``members`` (one
    row per member: name, roles, source, work units, directory) and the :class:`Executor`
    its per-member work runs on (``executor``, replaceable). It and the tables its methods
    return (DataFrames: :class:`~workbench.trace.display.Table`\ s) show formatted in a notebook."""

    def __init__(self, path: Path, meta: dict, executor: Executor):
        # Absolute: a task may run in another working directory (a Ray worker's).
        path = Path(path).absolute()
        self.path, self.meta, self.executor = path, meta, executor
        self.name = meta.get("name", path.name)
        rows = [{**m, "path": str(path / m["member"])} for m in meta["members"]]
        first = [c for c in _FIRST if rows and c in rows[0]]
        self.members = pd.DataFrame(rows, columns=first + sorted({c for r in rows for c in r} - set(first)))
        self._memo: dict = {}

    def _repr_html_(self) -> str:
        """In a notebook: its headline, where it is stored and its members (:mod:`.set_display`)."""
        from ..trace.display import page_html
        from .set_display import set_page

        return page_html(*set_page(self))

    def __repr__(self) -> str:
        from ..trace.display import page_text
        from .set_display import set_page

        return page_text(*set_page(self))

    def roles(self) -> list[dict]:
        """Per member, the roles that tell it apart in merged tables: its ``rank``, and its
        ``run_id`` and ``variant`` where the set holds several runs or variants."""
        cols = [c for c in ("run_id", "variant") if self.members[c].nunique() > 1] + ["rank"]
        return [{c: m[c] for c in cols} for m in self.members.to_dict(orient="records")]

    def trace(self, rank: int | None = None, *, member: str | None = None):
        """One member as a :class:`~workbench.Trace`, by rank (the set must hold one member of
        that rank) or by member name."""
        from ..trace.store import load

        rows = self.members[self.members["member"] == member] if member is not None \
            else self.members[self.members["rank"] == rank]
        if len(rows) != 1:
            what = f"member {member!r}" if member is not None else f"rank {rank}"
            raise WorkbenchError(self.name, f"{what}: {'no such member' if not len(rows) else 'several members'}")
        return load(rows["path"].iloc[0])

    def _each(self, fn, *args) -> list:
        return self.executor.map(fn, [(p, *args) for p in self.members["path"]])

    def summary(self, by: str = "rank,layer", layer_regex: str | None = None) -> pd.DataFrame:
        """``by="rank,X"`` (or ``"X"``): each member's ``summary(by=X)`` (X: range, layer,
        kernel, path, step, phase), its roles as first columns; ``by="rank"``: one row per
        member, its work units and time, steps, mean step wall, busy and collective time, and in
        how many steps it was the straggler (:func:`analysis.ranks.overview`)."""
        from ..analysis.ranks import overview, per_rank
        from ..analysis.tables import BY
        from .set_display import summary_table

        parts = [p for p in by.split(",") if p]
        if parts[:1] == ["rank"]:
            parts = parts[1:]
        if not parts:
            t = self._tables()
            return summary_table(self, "rank", overview(per_rank(list(zip(self.roles(), t["totals"]))), self.steps()))
        if len(parts) != 1 or parts[0] not in BY:
            raise WorkbenchError(by, "unknown grouping of a trace set; choose rank, or rank,X with X one of "
                                     + ", ".join(BY))
        return summary_table(self, parts[0], per_rank(list(zip(self.roles(), self._each(summary_task, parts[0],
                                                                                           layer_regex)))))

    def _tables(self, collective_regex: str | None = None, layer_regex: str | None = None) -> dict[str, list]:
        """Each member's ``analysis.ranks.rank_tables``, by table, worked out once per regexes."""
        key = (collective_regex, layer_regex)
        if key not in self._memo:
            found = self._each(ranks_task, collective_regex, layer_regex)
            self._memo[key] = {t: [f[t] for f in found] for t in ("steps", "collectives", "totals")}
        return self._memo[key]

    def steps(self, collective_regex: str | None = None) -> pd.DataFrame:
        """Per member and decode step: wall, busy, collective and own time, the collectives'
        share (:func:`analysis.ranks.rank_steps`)."""
        from ..analysis.ranks import per_rank
        from .set_display import titled

        return titled(per_rank(list(zip(self.roles(), self._tables(collective_regex)["steps"]))),
                      f"{self.name}: per rank and decode step, wall, busy, collective and own time")

    def stragglers(self, collective_regex: str | None = None) -> pd.DataFrame:
        """Per step: the rank the others waited for (:func:`analysis.ranks.stragglers`)."""
        from ..analysis.ranks import stragglers
        from .set_display import stragglers_table

        return stragglers_table(self, stragglers(self.steps(collective_regex)))

    def collectives(self, collective_regex: str | None = None, layer_regex: str | None = None) -> pd.DataFrame:
        """Per member, layer and step: collectives, their time, their share of the step."""
        from ..analysis.ranks import per_rank
        from .set_display import titled

        return titled(per_rank(list(zip(self.roles(), self._tables(collective_regex, layer_regex)["collectives"]))),
                      f"{self.name}: collectives per rank, layer and step, their time and share of the step")

    def sql(self, query: str) -> pd.DataFrame:
        """DuckDB SQL over every member at once (:func:`trace.set_sql.set_sql`): the tables
        with ``rank`` and ``member`` columns first, and ``members`` (the roles)."""
        from .sql import set_sql

        return set_sql(self.members, query, self.name)

    def diff(self, other: TraceSet, layer_regex: str | None = None) -> pd.DataFrame:
        """Rank against rank: :func:`analysis.diff` of each pair of members of one rank (one
        task each), one row per rank: ``status`` (``both``, ``only_a``, ``only_b``), kernels
        and GPU time per step on each side, ranges in common and changed, and ``changed``: the
        changed ranges, largest GPU time change first."""
        a, b = self._by_rank(), other._by_rank()
        both = sorted(set(a) & set(b))
        found = dict(zip(both, self.executor.map(diff_task, [(a[r], b[r], layer_regex) for r in both])))
        from .set_display import titled

        rows = [{"rank": r, "status": "both", **found[r]} if r in found else
                {"rank": r, "status": "only_a" if r in a else "only_b"} for r in sorted(set(a) | set(b))]
        return titled(pd.DataFrame(rows), f"{self.name} \u2192 {other.name}: rank against rank (ranks with changed "
                                          "ranges highlighted)")

    def _by_rank(self) -> dict[int, str]:
        if self.members["rank"].duplicated().any():
            raise WorkbenchError(self.name, "holds several members of one rank (several runs or variants): a set diff "
                                 "matches rank to rank")
        return dict(zip(self.members["rank"].astype(int), self.members["path"]))


def open_set(name: str | os.PathLike, root: str | os.PathLike | None = None,
             executor: Executor | str | None = None) -> TraceSet:
    """A stored trace set by name (under ``root``) or directory; ``executor``: where its
    per-member work runs (``local``, ``ray`` or an :class:`Executor`)."""
    from .store import read_set, set_dir

    path = set_dir(os.fspath(name), root)
    return TraceSet(path, read_set(path), as_executor(executor))


def import_set(name: str, files, root: str | os.PathLike | None = None, *, executor: Executor | str | None = None,
               **options) -> TraceSet:
    """:func:`sets.importing.import_set`, then the set opened (on the same executor)."""
    from .importing import import_set as store_set
    from .store import read_set

    ex = as_executor(executor)
    path = store_set(name, files, root, executor=ex, **options)
    return TraceSet(path, read_set(path), ex)


# The tasks: module-level functions of paths and options, run where the executor puts them.

def summary_task(path: str, by: str, layer_regex: str | None) -> pd.DataFrame:
    from ..analysis import summary
    from ..trace.store import load

    return summary(load(path), by=by, layer_regex=layer_regex)


def ranks_task(path: str, collective_regex: str | None, layer_regex: str | None) -> dict:
    from ..analysis.ranks import rank_tables
    from ..trace.store import load

    return rank_tables(load(path), collective_regex, layer_regex)


def diff_task(path_a: str, path_b: str, layer_regex: str | None) -> dict:
    from ..analysis.diff import diff
    from ..trace.store import load

    d = diff(load(path_a), load(path_b), layer_regex=layer_regex)
    t = d.totals
    changed = d.changed(len(d.ranges))
    kept = ("kernels_per_step_a", "kernels_per_step_b", "gpu_time_per_step_ns_a", "gpu_time_per_step_ns_b",
            "common_ranges", "only_a_ranges", "only_b_ranges")
    return {**{k: t[k] for k in kept}, "changed_ranges": len(changed), "changed": tuple(changed["range"])}
