"""The JSON document around the events: an object whose ``traceEvents`` array holds them,
the other keys (the header) before and after it, or a bare array of events.

The header is decoded by orjson, as are the events wherever the C scanner does not read them
(see ``decode``), so that the problems of a file that is not valid JSON are worded alike.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from ....errors import TraceFormatError
from .files import read

KEY = b'"traceEvents"'
# What the events of a document follow, as the last piece is decoded with the rest of it.
PREFIX = b'{"traceEvents":['
WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


def events_start(path: Path, fh, head: int, chunk: int) -> tuple[dict, bool, bytes]:
    """``(header, bare_array, rest)``: the keys before the events, whether the document is a
    bare array, and the bytes read past the array's ``[``. Reads ``head`` bytes, then
    ``chunk`` bytes at a time until the array begins (the header may be large)."""
    text = read(path, fh, head).lstrip(WS + _BOM)  # orjson refuses a BOM
    if text[:1] == b"[":
        return {}, True, text[1:]
    buf = text
    while (k := buf.find(KEY)) < 0:
        more = read(path, fh, chunk)
        if not more:
            _no_events(path, buf)
        buf += more
    j = k + len(KEY)
    while True:
        rest = buf[j:].lstrip(WS)
        if len(rest) >= 2 or not (more := read(path, fh, chunk)):
            break
        buf += more
    if rest[:1] != b":" or rest[1:].lstrip(WS)[:1] != b"[":
        _no_events(path, buf + read(path, fh, -1))
    try:
        header = orjson.loads(buf[:k].rstrip(WS).rstrip(b",") + b"}")
    except orjson.JSONDecodeError as e:
        raise bad_json(path, e) from None
    if not isinstance(header, dict):
        raise TraceFormatError(path, "top-level JSON is not an object")
    return header, False, rest[1:].lstrip(WS)[1:]


def after_events(rest: memoryview, bare_array: bool) -> dict | None:
    """The top-level keys after the events (``rest`` follows their array), or None to leave the
    whole document to the library decoder, which also words any problem."""
    rest = bytes(rest).lstrip(WS)
    if bare_array:
        return None if rest else {}
    if rest[:1] == b",":
        rest = rest[1:].lstrip(WS)
        if rest[:1] != b'"':
            return None
    elif rest[:1] != b"}":
        return None
    try:
        extra = orjson.loads(b"{" + rest)
    except orjson.JSONDecodeError:
        return None
    return None if "traceEvents" in extra else extra  # a second array: the library decoder's case


def bad_json(path: Path, e: Exception, what: str = "not valid JSON") -> TraceFormatError:
    return TraceFormatError(path, f"{what} ({e})")


def _no_events(path: Path, text: bytes):
    """Raises what the document is, having no array of events."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise bad_json(path, e) from None
    if isinstance(doc, dict):
        raise TraceFormatError(path, "JSON has no traceEvents array: not a torch.profiler/Chrome trace")
    raise TraceFormatError(path, "JSON is neither an object with traceEvents nor an array of events")
