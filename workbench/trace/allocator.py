"""Freed columns given back to the operating system.

glibc's malloc serves a large allocation from its own mapping, but once it has seen such a
block freed it raises its threshold to that block's size (up to 32 MiB) and serves later
ones from its heap, where freed memory stays with the process. An import allocates and
frees hundreds of column-sized arrays, so at 1M kernels about 90 MB of freed columns stayed
resident: a third of the trace itself. A fixed threshold keeps every array of 1 MiB or more
in its own mapping, unmapped as soon as it is freed (huge pages, which numpy asks for, keep
mapping fresh memory cheap). Set once per process, on glibc only.
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache

_M_MMAP_THRESHOLD = -3  # malloc.h
_THRESHOLD = 1 << 20


@cache
def unmap_freed_arrays() -> bool:
    """Whether the threshold was set (False off glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD))
    except (OSError, AttributeError):
        return False
