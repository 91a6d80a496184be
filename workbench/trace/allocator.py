"""Freed columns given back to the operating system.

An import allocates and frees hundreds of column-sized arrays; two allocators would keep the
freed ones resident. glibc's malloc serves a large allocation from its own mapping, but once
it has seen such a block freed it raises its threshold to that block's size (up to 32 MiB)
and serves later ones from its heap, where freed memory stays with the process. Arrow's
default pool (mimalloc) keeps freed buffers for reuse. At 1M kernels the two held ~90 MB and
~50 MB: a half of the trace itself. So every array of 4 MiB or more (a column of half a
million rows) gets its own mapping, unmapped as soon as it is freed, and Arrow allocates
through malloc. Smaller ones (masks, codes, the range tables' temporaries) are reused from
the heap: fresh memory is zeroed by the kernel, at 0.7-5 GB/s on this project's VM, and with
every array of 1 MiB or more mapped afresh a 1M-kernel import + projection + summary took
1.09 s against 0.88 s, for 33 MB less peak (405 against 439 MiB: 2.8x the export; medians of
5 interleaved runs; 3M: 3.23 against 2.84 s). Set once per process, when an nsys export is
imported (its trace is 2-3x the export, so memory binds there); the mmap threshold on glibc
only. Not for Kineto JSON, whose trace is a fraction of the file (mapping fresh memory for
every column made a 1M-kernel import ~15% slower), nor when a stored trace is opened
(reading Parquet reuses Arrow's freed buffers; mapping every one afresh made a 10M-kernel
summary 40% slower).
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache

_M_MMAP_THRESHOLD = -3  # malloc.h
_THRESHOLD = 4 << 20


@cache
def return_freed_memory() -> None:
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing
        libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD)
    except (OSError, AttributeError):
        pass
