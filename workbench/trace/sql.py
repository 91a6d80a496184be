"""Where a user's SQL runs (``Trace.sql``, ``TraceSet.sql``, ``workbench sql``): one SELECT
over the tables the workbench registers, and nothing else.

A query is parsed first and refused in one line when it is empty (or only whitespace or
comments), not SQL, several statements, or anything but a read (``copy``, ``create``,
``insert``, ``attach``, ``install``, ``set``, ``pragma``, ...). The connection it runs on is
locked besides: DuckDB's ``enable_external_access`` off (no file, URL or database is read or
written, and no extension loaded) except the Parquet files the caller names (a set's
members), extensions never installed or loaded on their own, and the configuration locked so
a query cannot turn any of that back on. Registered pandas frames are not files: they stay
readable.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pandas as pd

from ..errors import WorkbenchError

# Statements that only read: SELECT (with WITH, FROM-first, VALUES, TABLE, DESCRIBE, SUMMARIZE
# and SHOW, which DuckDB parses as SELECT) and EXPLAIN.
_READS = ("SELECT", "EXPLAIN")
_HINT = "give one SELECT statement"


def check_query(query: str, where: str) -> str:
    """``query`` if it is one read-only statement, else one line naming ``where`` (the trace,
    or the argument) and what is wrong with it."""
    import duckdb

    if not isinstance(query, str):
        raise WorkbenchError(where, f"SQL query: expected text, not {type(query).__name__}")
    con = duckdb.connect()
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as e:
        raise WorkbenchError(where, f"SQL error: {_first_line(e)}") from None
    finally:
        con.close()
    if not statements:
        raise WorkbenchError(where, f"empty SQL query (nothing but whitespace or comments): {_HINT}")
    if len(statements) > 1:
        raise WorkbenchError(where, f"{len(statements)} SQL statements: {_HINT}")
    kind = statements[0].type.name
    if kind not in _READS:
        raise WorkbenchError(where, f"{kind} statements are not run: SQL here only reads the trace's tables ({_HINT})")
    return query


@contextmanager
def connection(files: Sequence[str] = ()) -> Iterator:
    """A DuckDB connection that reads registered frames and ``files`` only (see the module
    docstring); closed, with its private spill directory, when the block ends."""
    import duckdb

    # DuckDB may still read and write its temporary directory; a fresh private one holds
    # nothing but what it spills there.
    with tempfile.TemporaryDirectory(prefix="workbench-sql-") as spill:
        con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                                     "allow_community_extensions": False, "temp_directory": spill})
        try:
            if files:  # allowed before external access is turned off, as DuckDB requires
                con.execute("set allowed_paths = $1", [list(files)])
            con.execute("set enable_external_access = false")
            con.execute("set lock_configuration = true")
            yield con
        finally:
            con.close()


def run_query(con, query: str, where: str) -> pd.DataFrame:
    """``query`` checked (:func:`check_query`) and run on ``con``; a DuckDB error is one line
    naming ``where``."""
    import duckdb

    check_query(query, where)
    try:
        return con.execute(query).df()
    except duckdb.Error as e:
        raise WorkbenchError(where, f"SQL error: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]
