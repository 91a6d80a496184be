"""gzip through the fastest library installed, chosen here once for every reader and the store.

Reading: ISA-L (``isal.igzip``, about 1.7x the standard library's speed on a Kineto trace),
else zlib-ng (``zlib_ng.gzip_ng``, about 1.4x), else ``gzip``. Writing: zlib-ng where it is
installed (zlib's levels, several times faster at level 6), else ``gzip``; ISA-L is not used to
write, as its levels (0-3) are not zlib's and the store asks for zlib's level 6 for its size.
Every one reads every gzip stream (all members, any writer's), and each library writes the
same bytes for the same input, level and mtime; libraries may differ from each other in the
bytes they write, never in the bytes they read back.

The optional ones install with ``pip install workbench[fast]``; without them nothing changes
but speed.
"""

from __future__ import annotations

import gzip
import zlib
from typing import BinaryIO

try:
    from isal import igzip as _reader
    from isal.isal_zlib import error as _reader_error
except ImportError:
    try:
        from zlib_ng import gzip_ng as _reader
        from zlib_ng.zlib_ng import error as _reader_error
    except ImportError:
        _reader, _reader_error = gzip, zlib.error

try:
    from zlib_ng import gzip_ng as _writer
except ImportError:
    _writer = gzip

# Which library reads and which writes, by name (the benchmarks record it).
LIBRARY = {"read": _reader.__name__, "write": _writer.__name__}

# What reading a damaged gzip stream raises, whichever library reads it.
ERRORS = tuple({OSError, EOFError, zlib.error, _reader_error})


def open_read(path) -> BinaryIO:
    """The gunzipped bytes of the file at ``path`` (a ``gzip.GzipFile`` whatever the library)."""
    return _reader.open(path, "rb")


def readinto(fh: BinaryIO, view: memoryview) -> int:
    """Reads the next bytes of ``fh`` (from :func:`open_read`) into ``view``, saying how many.
    ``GzipFile`` has no readinto of its own: the one it inherits makes a bytes object of the
    size asked for and copies it, so the stream is read through its buffered reader instead
    (``_buffer``, in the standard library, ISA-L and zlib-ng alike), which inflates straight
    into ``view``. The copy's object was fresh memory each time once glibc serves large blocks
    from their own mappings (``ImportOptions(memory="release")``, the CLI's): what it cost is in
    benchmarks/RESULTS.md (issue 39)."""
    return getattr(fh, "_buffer", fh).readinto(view)


def writer(fileobj: BinaryIO, level: int, name: str = "") -> BinaryIO:
    """A gzip stream written onto ``fileobj`` at zlib's ``level``, with mtime 0 (the same
    input is written as the same bytes by the same library)."""
    return _writer.GzipFile(name, "wb", level, fileobj, mtime=0)
