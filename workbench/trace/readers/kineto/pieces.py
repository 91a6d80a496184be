"""The ``traceEvents`` array cut at event boundaries into pieces, each read into a part at
once (see ``decode``), so that memory holds columns, not millions of events.

A cut is only ever made at ``}`` ``,`` ``{`` between events; a cut that falls inside a
string or a nested object makes that piece fail to parse, and the reader then simply takes
more input before cutting again.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from ..source import open_bytes
from . import decode
from .document import PREFIX, WS, events_start
from .events import holds_gpu
from .files import read, unread

HEAD = 1 << 20  # the first read, which holds the header of most files
WINDOW = 1 << 20  # bytes before a range's start searched for the cut the one-pass reader makes
_WS_RUN = re.compile(rb"[ \t\r\n]*")


class OnePass(Exception):
    """Ranges read apart would not give the one-pass result (a piece crosses a range's end, a
    worker failed): read the file in one pass instead."""


def cut(buf, lo: int, hi: int) -> int:
    """Index just past the last ``}`` in ``buf[lo:hi]`` that is followed by ``,`` and then ``{``."""
    end = hi
    while True:
        c = buf.rfind(b"}", lo, end)
        if c < 0:
            return -1
        rest = buf[c + 1 : min(c + 64, hi)].lstrip(WS)
        if rest[:1] == b"," and rest[1:].lstrip(WS)[:1] == b"{":
            return c + 1
        end = c


class Reader:
    """Yields the file's pieces as parts (see ``events``); ``header`` holds the other
    top-level keys afterwards.

    The pieces are cut where the bytes read so far end after each read of ``chunk`` bytes, and
    all reads but the first (``HEAD``) are of ``chunk`` bytes, so where a piece ends depends
    only on the bytes just before ``HEAD + k * chunk``. That lets ``batches(start, stop)``
    yield exactly the one-pass reader's pieces between two such offsets.
    """

    def __init__(self, path: Path, chunk: int, gpu: threading.Event | None = None):
        self.path = path
        self.chunk = chunk
        self.header: dict[str, Any] = {}
        # Set once a piece of the file held GPU events (shared by the readers of its ranges):
        # from then on cpu_op rows would be dropped by Tables.add, so they are not made.
        self.gpu = gpu or threading.Event()

    def batches(self, start: int | None = None, stop: int | None = None):
        """The pieces of the whole file, or of those that begin after ``start`` and end by
        ``stop`` (offsets ``HEAD + k * chunk``; raises ``OnePass`` if that cannot be)."""
        with open_bytes(self.path) as fh:
            self.header, bare_array, buf = events_start(self.path, fh, HEAD, self.chunk)
            pos = fh.tell()
            if start is not None:
                # The one-pass reader's cut before `start`, from the bytes just before it.
                if start - WINDOW < pos - len(buf):
                    raise OnePass
                fh.seek(start - WINDOW)
                window = read(self.path, fh, WINDOW)
                at = cut(window, 0, len(window))
                if at < 0:
                    raise OnePass
                buf, pos = window[at:].lstrip(WS)[1:], start
            with unread(self.path, fh, buf, pos) as src:
                yield from self._pieces(src, bare_array, pos, stop)

    def _pieces(self, src, bare_array: bool, pos: int, stop: int | None):
        """The pieces of the unread events of ``src`` (see ``files``), ``pos`` being how far
        the file is read."""
        want = self.chunk
        while True:
            if src.end - src.at < want:
                if stop is not None and pos >= stop:
                    raise OnePass
                n = src.read(self.chunk)
                if n:
                    pos += n
                    continue
                head = b"[" if bare_array else PREFIX
                part, extra = decode.tail(memoryview(head + src.data[src.at : src.end]), bare_array, self.path)
                self.header.update(extra)
                yield part
                return
            at = cut(src.data, src.at, src.end)
            if at > 0:
                part = decode.piece(src.data, src.at, at, not self.gpu.is_set(), self.path)
                if part is not None:
                    if holds_gpu(part[0]):
                        self.gpu.set()
                    src.consume(_WS_RUN.match(src.data, at).end() + 1)  # past the separating comma
                    want = self.chunk
                    yield part
                    if stop is not None and pos == stop:
                        return
                    continue
            want = (src.end - src.at) * 2  # no clean cut yet: read on
