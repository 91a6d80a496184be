"""The one place that chooses how a piece of events is read.

A piece is read by the C scanner (``_kineto_scan.c``) straight into a part's columns,
without the GIL and without a Python object per event, where the extension is built and
the scanner vouches for the piece. It declines anything else (a field of an unusual type,
bad JSON, a piece cut in the wrong place); such a piece is decoded by orjson, the one
library decoder (it reads the header too, so JSON problems are worded alike wherever they
lie), and its events go through ``events.part``, which makes the part the scanner would
have made and does every value check: the tables and the problems reported do not depend
on which of the two read a piece.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import orjson

from . import events
from .document import PREFIX, after_events, bad_json

# Columns ``events.part`` makes narrower than the scanner's int64.
_NARROW = {("api", "kind"): np.int8}


@cache
def scanner():
    """The C scanner (``scan``, its ``TABLES``: name, name column, columns, and the kinds
    of ``OTHER_GPU`` it counts); None where the extension is not built, and orjson reads
    every piece."""
    try:
        from . import _kineto_scan
    except ImportError:
        return None
    return _kineto_scan


def scan(data, *bounds: int, cpu_ops: bool = True) -> tuple[int, tuple] | None:
    """``(end, part)`` for the JSON array of events that ``data`` begins with, read by the C
    scanner, ``end`` being the offset just past the array; None where the scanner declines it.
    With ``start, stop``: the events ``data[start:stop]`` holds, the inside of such an array;
    there ``cpu_ops`` false has cpu_op events checked as ever but make no rows (``Tables.add``
    would drop them)."""
    c = scanner()
    if c is None:
        return None
    out = c.scan(data, *bounds, cpu_ops) if bounds else c.scan(data)
    if out is None:
        return None
    end, count, other_gpu, tables, begin_end = out
    rows, strings = {}, {}
    for (table, named, columns), (names, values) in zip(c.TABLES, tables):
        if values:
            values = np.frombuffer(values, np.int64).reshape(len(columns), -1)
            # Each column as events.part makes it, in the same order.
            rows[table] = {k: v.astype(_NARROW[table, k]) if (table, k) in _NARROW else v for k, v in zip(columns, values)}
            if named:
                strings[table] = names
    return end, (rows, begin_end, strings, {"events": count, **dict(zip(c.OTHER_GPU, other_gpu))})


def piece(data, start: int, stop: int, cpu_ops: bool, where: Path) -> tuple | None:
    """The part of the events ``data[start:stop]`` holds; None where they are not valid JSON
    (a cut inside an event: the caller reads on)."""
    scanned = scan(data, start, stop, cpu_ops=cpu_ops)
    if scanned is not None:
        return scanned[1]
    try:
        decoded = orjson.loads(b"[" + data[start:stop] + b"]")
    except orjson.JSONDecodeError:
        return None
    return events.part(decoded, where)


def tail(data: memoryview, bare_array: bool, where: Path) -> tuple[tuple, dict]:
    """The part of the last piece and the top-level keys after the events: ``data`` is the
    events up to the end of the file (``[`` first), or the rest of the document (``PREFIX``
    first)."""
    start = 0 if bare_array else len(PREFIX) - 1
    scanned = scan(data[start:])
    if scanned is not None:
        end, part = scanned
        extra = after_events(data[start + end :], bare_array)
        if extra is not None:
            return part, extra
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise bad_json(where, e, "not valid JSON, or truncated") from None
    if bare_array:
        return events.part(doc, where), {}
    decoded = doc.pop("traceEvents")
    return events.part(decoded, where), doc
