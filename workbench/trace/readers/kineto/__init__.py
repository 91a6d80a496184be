"""torch.profiler / Kineto (Chrome trace JSON) reader: ``read(path, options) -> RawTables``.

The file is streamed: the ``traceEvents`` array is cut at event boundaries into pieces
(``pieces``), each read into columns at once by the C scanner or orjson (``decode``, the one
choice of backend; ``events`` and ``columns`` for what the library decoder's events become),
and the pieces are gathered in file order into tables (``tables``); a trace without
annotations gets its nn.Module events, thinned to the layers' children, as its ranges
(``modules``). A large uncompressed file is read by several threads, each a range of pieces,
with the same result (``parallel``).
The plain or gzipped file's bytes come through ``files``; the JSON around the events is
``document``'s.
"""

from __future__ import annotations

from pathlib import Path

from ...options import DEFAULT, ImportOptions
from ...schema import RawTables
from . import parallel
from .pieces import OnePass, Reader
from .tables import Tables

__all__ = ["read"]

_CHUNK = 8 << 20  # bytes read at a time, after the first read


def read(path: str | Path, options: ImportOptions = DEFAULT) -> RawTables:
    """Imports a torch.profiler trace (``.json`` or ``.json.gz``).

    An uncompressed file is read by up to ``options.threads`` threads, in ranges that shrink
    along it (see ``parallel``). The result does not depend on how many.
    """
    path = Path(path)
    stops, threads = parallel.plan(path, _CHUNK, options)
    if stops:
        try:
            tables, header = parallel.read_ranges(path, _CHUNK, stops, threads, options)
        except OnePass:
            pass
        else:
            return tables.raw(header)
    tables = Tables(path, options)
    reader = Reader(path, _CHUNK)
    for part in reader.batches():
        tables.add(part)
    return tables.raw(reader.header)

