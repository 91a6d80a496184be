"""SQL over every member of a trace set at once: DuckDB reads the members' Parquet files
where they are stored; no table is loaded into this process first."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import WorkbenchError
from ..trace.schema import TABLES
from ..trace.sql import check_query, connection, run_query


def set_sql(members: pd.DataFrame, query: str, where: str) -> pd.DataFrame:
    """Run ``query`` over the views ``kernels``, ``ranges``, ``api``, ``memcpy`` and ``memset``,
    each the union of that table over the members (``members``: one row per member with its
    ``path``, ``rank`` and ``member``; its other columns, the roles, are the view
    ``members``), with ``rank`` and ``member`` as their first columns. ``where`` names the set
    in an error. One read-only statement, reading no other file (:mod:`.sql`)."""
    import duckdb

    check_query(query, where)  # before the views are made
    files = {t: [str(Path(p) / f"{t}.parquet") for p in members["path"]] for t in TABLES}
    # The members' own Parquet files are the only files the connection may read.
    with connection([f for listed in files.values() for f in listed]) as con:
        try:
            con.register("members", members.drop(columns=["path"]))
            for t in TABLES:
                con.register(f"_{t}_files", pd.DataFrame({"file": files[t], "rank": members["rank"].to_numpy(),
                                                          "member": members["member"].to_numpy()}))
                listed = ", ".join(_literal(f) for f in files[t])
                # filename=true names each row's file, which the join turns into its member.
                con.execute(f"create view {t} as select f.rank, f.member, x.* exclude (filename) "
                            f"from read_parquet([{listed}], filename=true, union_by_name=true) x "
                            f"join _{t}_files f on x.filename = f.file")
        except duckdb.Error as e:
            raise WorkbenchError(where, f"cannot read the members' tables: {str(e).splitlines()[0]}") from None
        return run_query(con, query, where)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
