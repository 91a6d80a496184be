"""Nsight Systems importer: the SQLite export (plain or gzipped) and ``.nsys-rep`` via
``nsys export``.

Tables read: CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME, NVTX_EVENTS,
CUPTI_ACTIVITY_KIND_MEMCPY/MEMSET (the columns read from each in ``database.COLUMNS``),
StringIds, ENUM_CUDA_MEMCPY_OPER, and the TARGET_INFO_* / META_DATA_* tables for the
environment.

- ``database``: the sqlite3 connection, the tables and columns present, sqlite3's reading
- ``pages``: the one choice of reader per table (the C page reader, else sqlite3)
- ``values``, ``tables``: the trace's raw tables made from the columns read
- ``meta``: the capture's tool, command and machine
- ``rep``: an ``.nsys-rep`` exported to SQLite
"""

from __future__ import annotations

from pathlib import Path

from ...manifest import SOURCE
from ...options import DEFAULT, ImportOptions
from ...schema import RawTables
from . import tables
from .database import opened
from .meta import meta
from .pages import Columns
from .rep import exported


def read(path: str | Path, options: ImportOptions = DEFAULT, *, rep: bool = False) -> RawTables:
    """The raw tables of an Nsight Systems SQLite export (``nsys export --type sqlite``),
    optionally gzipped, or with ``rep`` of an ``.nsys-rep`` (needs nsys on PATH)."""
    path = Path(path)
    if not rep:
        with opened(path) as (db, db_path), Columns(db, db_path, options) as columns:
            return RawTables(tables.make(columns, options), meta(db))
    with exported(path) as sqlite:
        raw = read(sqlite, options)
    raw.meta[SOURCE]["format"] = "nsys-rep"
    return raw

