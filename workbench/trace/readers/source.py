"""A capture file's bytes, plain or gzipped: what every reader asks of the file itself."""

from __future__ import annotations

from pathlib import Path

from ...errors import TraceFormatError
from . import compression

GZIP_MAGIC = b"\x1f\x8b"
# What reading a damaged gzip stream raises.
GZIP_ERRORS = compression.ERRORS


def is_gzipped(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_bytes(path: Path):
    """The file's bytes, gunzipped as they are read where it is gzipped."""
    return compression.open_read(path) if is_gzipped(path) else open(path, "rb")


def gzip_error(path: Path, e: BaseException) -> TraceFormatError:
    """The one message for a gzip stream that cannot be read to its end."""
    return TraceFormatError(path, f"truncated or corrupt gzip ({e})")
