"""SQL over every member of a trace set at once: DuckDB reads the members' Parquet files
where they are stored; no table is loaded into this process first."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import WorkbenchError
from .schema import TABLES


def set_sql(members: pd.DataFrame, query: str, where: str) -> pd.DataFrame:
    """Run ``query`` over the views ``kernels``, ``ranges``, ``api``, ``memcpy`` and ``memset``,
    each the union of that table over the members (``members``: one row per member with its
    ``path``, ``rank`` and ``member``; its other columns, the roles, are the view
    ``members``), with ``rank`` and ``member`` as their first columns. ``where`` names the set
    in an error."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register("members", members.drop(columns=["path"]))
        for t in TABLES:
            files = pd.DataFrame({"file": [str(Path(p) / f"{t}.parquet") for p in members["path"]],
                                  "rank": members["rank"].to_numpy(), "member": members["member"].to_numpy()})
            con.register(f"_{t}_files", files)
            listed = ", ".join(_literal(f) for f in files["file"])
            # filename=true names each row's file, which the join turns into its member.
            con.execute(f"create view {t} as select f.rank, f.member, x.* exclude (filename) "
                        f"from read_parquet([{listed}], filename=true, union_by_name=true) x "
                        f"join _{t}_files f on x.filename = f.file")
        return con.execute(query).df()
    except duckdb.Error as e:
        raise WorkbenchError(where, f"SQL error: {str(e).splitlines()[0]}") from None
    finally:
        con.close()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
