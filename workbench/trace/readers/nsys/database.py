"""The export as a SQLite database: opened read-only through ``sqlite3``, the tables and
columns it holds, the columns read from each, StringIds, and the sqlite3 way of reading a
table's columns (the reference every other way must match, and the one that words errors
about bad input)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np

from ....errors import TraceFormatError
from ..source import GZIP_ERRORS, gzip_error, is_gzipped, open_bytes

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"  # runtime *and* driver calls (Triton's cuLaunchKernelEx)
NVTX = "NVTX_EVENTS"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
# With --cuda-graph-trace=node: each node made by stream capture, on the capturing thread at
# capture time, and each node of an instantiated graph, pointing back at the one it copies.
GRAPH_NODES = "CUDA_GRAPH_NODE_EVENTS"

# The event tables and the columns read from each, declared up front as nsys recipes do: a
# missing required column is an error, a missing optional one is left out. globalPid is
# optional: trimmed exports and other tools' fixtures leave it out of the GPU tables (their
# runtime rows carry only globalTid), and such an export is read as one process.
COLUMNS = {
    KERNEL: {"required": ("start", "end", "correlationId", "deviceId", "streamId"),
             "optional": ("globalPid", "demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                          "graphNodeId")},
    RUNTIME: {"required": ("start", "end", "globalTid", "correlationId", "nameId"), "optional": ()},
    NVTX: {"required": ("start", "end", "eventType", "globalTid"), "optional": ("text", "textId", "domainId", "endGlobalTid")},
    MEMCPY: {"required": ("start", "end"), "optional": ("globalPid", "deviceId", "streamId", "correlationId", "bytes", "copyKind")},
    MEMSET: {"required": ("start", "end"), "optional": ("globalPid", "deviceId", "streamId", "correlationId", "bytes")},
    GRAPH_NODES: {"required": ("start", "globalTid", "graphNodeId"), "optional": ("originalGraphNodeId",)},
}

# NVTX event types: push/pop and start/end ranges (plain and NVTX-text variants), domain create.
PUSHPOP = (59, 70)
STARTEND = (60, 71)
DOMAIN_CREATE = 75

# The rows read of each table (every row of a table not named), and the columns holding TEXT
# (every other column read holds integers).
WHERE_TYPES = {NVTX: PUSHPOP + STARTEND + (DOMAIN_CREATE,)}
TEXT = {NVTX: ("text",)}

# Every table is read in its own order (rowid order for a rowid table, the order of its pages),
# never through an index someone added for their own queries: a covering index would change
# the order of the rows (and the page reader reads the table's pages). A view ignores it.
_SCAN = "NOT INDEXED"

# Rows fetched from sqlite3 at a time: the Python objects of a large table's rows never all
# exist at once. At least as many as the values ``_is_text`` looks at.
_CHUNK_ROWS = 1 << 18


def _uri(db_path: Path) -> str:
    # Percent-encoded: a '?' or '#' in a file name would otherwise end the path, and SQLite
    # would open (even create) some other file, without the ?mode=ro that follows.
    return f"file:{quote(os.path.abspath(db_path))}?mode=ro"


@contextmanager
def _sqlite_file(path: Path) -> Iterator[Path]:
    """A path SQLite can open: a gzipped export is unpacked to a private temp file, removed
    when the block ends."""
    if not is_gzipped(path):
        yield path
        return
    fd, tmp = tempfile.mkstemp(suffix=".sqlite", prefix="workbench-")
    try:
        with os.fdopen(fd, "wb") as out, open_bytes(path) as src:
            try:
                shutil.copyfileobj(src, out, 1 << 20)
            except GZIP_ERRORS as e:
                raise gzip_error(path, e) from None
        yield Path(tmp)
    finally:
        os.unlink(tmp)


@contextmanager
def opened(path: Path) -> Iterator[tuple[Database, Path]]:
    """The export at ``path`` open read-only, and the path of the file SQLite reads (a
    temp file for a gzipped export, there until the block ends). Any SQLite error the block
    lets through is reported as damage to ``path``."""
    with _sqlite_file(path) as db_path:
        try:
            con = sqlite3.connect(_uri(db_path), uri=True)
        except sqlite3.Error as e:
            raise TraceFormatError(path, f"cannot open SQLite file ({e})") from None
        # TEXT that is not valid UTF-8 (a damaged page, another writer) decodes with U+FFFD.
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        try:
            yield Database(con, path), db_path
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(path, f"damaged SQLite file ({e})") from None
        except UnicodeDecodeError:  # SQLite's own error message quoted damaged bytes
            raise TraceFormatError(path, "damaged SQLite file (malformed schema or page)") from None
        finally:
            con.close()


class Database:
    """The connection, used only on the thread that opened it, and what it knows of the
    file's tables. ``where`` is the path errors name."""

    def __init__(self, con: sqlite3.Connection, where: Path):
        self.con, self.where = con, where
        # Filled as tables are asked about; once a table's columns are here, reading them
        # needs no sqlite3, so another thread may ask.
        self._columns: dict[str, set[str]] = {}
        try:
            self.tables = {r[0] for r in con.execute("select name from sqlite_master where type in ('table','view')")}
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(where, f"not a readable SQLite database ({e})") from None

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {r[1] for r in self.con.execute(f'pragma table_info("{table}")')}
        return self._columns[table]

    def wanted(self, table: str) -> list[str]:
        """The columns of ``table`` to read; raises if a required one is missing."""
        have = self.columns(table)
        spec = COLUMNS[table]
        missing = [c for c in spec["required"] if c not in have]
        if missing:
            raise TraceFormatError(self.where, f"table {table} lacks column(s) {', '.join(missing)}")
        return [c for c in spec["required"] + spec["optional"] if c in have]

    def strings(self) -> dict[int, str]:
        if "StringIds" not in self.tables:
            return {}
        try:
            return dict(self.con.execute("select id, value from StringIds"))
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(self.where, f"cannot read StringIds ({e})") from None

    def rows(self, table: str, columns: str) -> list[tuple]:
        """``columns`` of every row of a table read only to describe the capture: none where
        the table is absent or cannot be read."""
        if table not in self.tables:
            return []
        try:
            return self.con.execute(f'select {columns} from "{table}" {_SCAN}').fetchall()
        except sqlite3.DatabaseError:
            return []

    def labels(self, table: str) -> dict[int, str]:
        """An ENUM_* table's label per id. Labels are only shown (a value without one shows
        its number): a damaged row is left out."""
        return {i: str(label) for i, label in self.rows(table, "id, label") if isinstance(i, int)}

    def select(self, table: str, cols: list[str]) -> list[np.ndarray]:
        """``cols`` of the rows of ``table`` read (see ``WHERE_TYPES``), each as numpy makes
        the column's values whole: TEXT (decided on its first values) as objects, every
        other column as ``np.array`` types it. No arrays for a table without rows."""
        names = ", ".join(f'"{c}"' for c in cols)
        sql = f'select {names} from "{table}" {_SCAN}'
        if table in WHERE_TYPES:
            sql += f" where eventType in ({', '.join(map(str, WHERE_TYPES[table]))})"
        parts: list[list[np.ndarray]] = [[] for _ in cols]
        text: list[bool] | None = None
        try:
            cur = self.con.execute(sql)
            while rows := cur.fetchmany(_CHUNK_ROWS):
                values = list(zip(*rows))
                del rows
                if text is None:
                    text = [_is_text(v) for v in values]
                for part, is_text, v in zip(parts, text, values):
                    part.append(_chunk(v, is_text))
        except sqlite3.DatabaseError as e:
            raise TraceFormatError(self.where, f"cannot read {table} ({e})") from None
        return [] if text is None else [_joined(p, is_text) for p, is_text in zip(parts, text)]


def _is_text(values) -> bool:
    return any(isinstance(v, (str, bytes)) for v in values[:1000])


def _chunk(values: tuple, text: bool) -> np.ndarray:
    """A chunk of a column: int64 where every value is an integer that fits, else the values
    themselves as objects, so that the whole column can still be typed as one."""
    if not text:
        a = np.array(values)
        if a.dtype == np.int64:
            return a
    return np.array(values, dtype=object)


def _joined(parts: list[np.ndarray], text: bool) -> np.ndarray:
    """A column from its chunks, as ``np.array`` (``dtype=object`` for text) types the whole
    column's values: int64 chunks join as they are; any other, every value is typed anew."""
    if text or all(p.dtype == np.int64 for p in parts):
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return np.array(np.concatenate([p.astype(object) for p in parts]).tolist())
