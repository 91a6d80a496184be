"""Reading a large uncompressed Kineto file in several threads.

The file is cut into ranges, a few per thread, and each thread reads the next range not yet
taken (see ``pieces.Reader.batches``: a range holds exactly the pieces the one-pass reader
makes there). The C scanner reads a piece without holding the GIL, so the threads scan at the
same time. Their pieces are then added in file order, and a problem a range met is raised
after the pieces before it: every table, row and name order, and the first problem reported,
come out as from one pass.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ...options import ImportOptions
from ..source import is_gzipped
from .pieces import HEAD, Reader
from .tables import Tables

# The least a thread's range is worth its start (the header read again, a window before the
# range, a piece cut short at its end): below two of them, the file is read in one pass.
RANGE_MIN = 64 << 20
# Ranges per thread: a thread that is done early takes the next range, so threads end together
# although some parts of a file read faster than others (CPU ops, then GPU events).
RANGES_PER_THREAD = 4


def plan(path: Path, chunk: int, options: ImportOptions) -> tuple[list[int], int]:
    """``(stops, threads)``: where the ranges end (all but the last) and how many threads read
    them, no more than ranges of ``RANGE_MIN`` bytes allow; no stops for one pass."""
    if is_gzipped(path):
        return [], 1  # a gzip stream cannot be entered in the middle
    threads = options.workers(path.stat().st_size // RANGE_MIN)
    if threads == 1:
        return [], 1
    return range_stops(path, chunk, threads * RANGES_PER_THREAD), threads


def range_stops(path: Path, chunk: int, ranges: int) -> list[int]:
    """Where each of ``ranges`` ranges ends but the last (fewer where the file has fewer
    chunks), or [] for one. Threads take the ranges in the order ``read_ranges`` submits
    them, the file's last range first: that one is n parts long, and the k-th of the others
    n - 1 - k. Taken longest first, the ranges leave every thread about the same work, the
    ranges taken last being the shortest."""
    chunks = (path.stat().st_size - HEAD) // chunk
    ranges = min(ranges, chunks)
    parts = ranges * (ranges + 1) // 2
    done = np.cumsum(np.arange(ranges - 1, 0, -1))  # parts before each stop
    return sorted({HEAD + chunk * int(chunks * d // parts) for d in done} - {HEAD})


def read_ranges(path: Path, chunk: int, stops: list[int], threads: int,
                options: ImportOptions) -> tuple[Tables, dict]:
    """The tables and header of the whole file, the ranges ending at ``stops`` and at its end,
    read by ``threads`` threads; raises ``pieces.OnePass`` when a range cannot be read apart."""
    ranges = list(zip([None, *stops], [*stops, None]))
    gpu = threading.Event()
    readers = [Reader(path, chunk, gpu) for _ in ranges]
    done = threading.Event()  # a problem ends the read: the other threads stop early
    with options.pool(threads, "workbench-kineto") as pool:
        # The last range first: GPU events follow the CPU ops in torch.profiler's files, and
        # once one is seen the CPU ops are only checked (see pieces.Reader.gpu).
        futures = [None] * len(ranges)
        for i in [len(ranges) - 1, *range(len(ranges) - 1)]:
            futures[i] = pool.submit(_parts, readers[i], *ranges[i], done)
        try:
            tables = Tables(path, options)
            for future in futures:
                parts, problem = future.result()
                for part in parts:
                    tables.add(part)
                if problem is not None:
                    raise problem
        finally:
            done.set()
    return tables, readers[-1].header  # the last range's header has the keys after the events too


def _parts(reader: Reader, start: int | None, stop: int | None, done: threading.Event) -> tuple[list, Exception | None]:
    """A range's parts, and the exception that ended it early (raised by the caller in order)."""
    parts = []
    try:
        for part in reader.batches(start, stop):
            if done.is_set():
                break
            parts.append(part)
    except Exception as e:  # noqa: BLE001 - any of them, raised again in file order
        return parts, e
    return parts, None
