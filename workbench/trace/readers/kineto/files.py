"""The bytes of the events still to read, ``data[at:end]``, and how more are taken: an
uncompressed file is mapped in memory and read where it lies; a gzip stream is read into a
buffer that is reused. Both give ``read(n)`` (take up to ``n`` more bytes, saying how many)
and ``consume(at)`` (drop the events before ``at``)."""

from __future__ import annotations

import gzip
import mmap
from contextlib import contextmanager
from pathlib import Path

from .. import compression
from ..source import GZIP_ERRORS, gzip_error


def read(path: Path, fh, n: int) -> bytes:
    """Up to ``n`` bytes of the open file (all the rest for -1); a damaged gzip stream is
    reported as the readers report it."""
    try:
        return fh.read(n)
    except GZIP_ERRORS as e:
        raise gzip_error(path, e) from None


@contextmanager
def unread(path: Path, fh, head: bytes, pos: int):
    """The events from ``head`` on, ``head`` being the bytes of the file just before ``pos``
    (``fh`` is read up to there): a ``Mapped`` or ``Buffered``."""
    if isinstance(fh, gzip.GzipFile):  # whichever library reads it (compression.py): each subclasses it
        yield Buffered(path, fh, head)
        return
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield Mapped(data, pos - len(head), pos)


class Mapped:
    """An uncompressed file mapped in memory: pieces are read where they lie, not copied out."""

    def __init__(self, data: mmap.mmap, at: int, end: int):
        self.data, self.at, self.end = data, at, end
        self.released = at - at % mmap.PAGESIZE

    def read(self, n: int) -> int:
        got = min(n, len(self.data) - self.end)
        self.end += got
        return got

    def consume(self, at: int):
        """Read pages leave the process (the file stays cached), so its resident memory
        holds the pieces being read, not the whole file."""
        self.at = at
        done = at - at % mmap.PAGESIZE
        if done > self.released:
            self.data.madvise(mmap.MADV_DONTNEED, self.released, done - self.released)
            self.released = done


class Buffered:
    """A gzip stream read into one buffer, reused from piece to piece: a fresh buffer per
    piece would be fresh memory to fault in each time."""

    def __init__(self, path: Path, fh, head: bytes):
        self.path, self.fh = path, fh
        self.data, self.at, self.end = bytearray(head), 0, len(head)

    def read(self, n: int) -> int:
        buf, end = self.data, self.end
        if len(buf) < end + n:
            buf.extend(bytes(end + n - len(buf)))
        got = 0
        try:
            while got < n:
                k = compression.readinto(self.fh, memoryview(buf)[end + got : end + n])
                if not k:
                    break
                got += k
        except GZIP_ERRORS as e:
            raise gzip_error(self.path, e) from None
        self.end += got
        return got

    def consume(self, at: int):
        """The rest moves to the front of the buffer."""
        rest = self.data[at : self.end]
        self.data[: len(rest)] = rest
        self.at, self.end = 0, len(rest)
