"""Reading a large uncompressed Kineto file in several threads.

The file is cut into ranges, a few per thread, and each thread reads the next range not yet
taken (see ``kineto._Reader.batches``: a range holds exactly the pieces the one-pass reader
makes there). The C scanner reads a piece without holding the GIL, so the threads scan at the
same time. Their pieces are then added in file order, and a problem a range met is raised
after the pieces before it: every table, row and name order, and the first problem reported,
come out as from one pass.
"""

from __future__ import annotations

import threading
from pathlib import Path

from . import _Reader, _Tables
from ...options import ImportOptions


def read_parallel(path: Path, chunk: int, stops: list[int], threads: int, options: ImportOptions) -> tuple[_Tables, dict]:
    """The tables and header of the whole file, the ranges ending at ``stops`` and at its end,
    read by ``threads`` threads (one per range by default); raises ``kineto._OnePass`` when a
    range cannot be read apart."""
    ranges = list(zip([None, *stops], [*stops, None]))
    gpu = threading.Event()
    readers = [_Reader(path, chunk, gpu) for _ in ranges]
    done = threading.Event()  # a problem ends the read: the other threads stop early
    with options.pool(threads, "workbench-kineto") as pool:
        # The last range first: GPU events follow the CPU ops in torch.profiler's files, and
        # once one is seen the CPU ops are only checked (see kineto._Reader.gpu).
        futures = [None] * len(ranges)
        for i in [len(ranges) - 1, *range(len(ranges) - 1)]:
            futures[i] = pool.submit(_parts, readers[i], *ranges[i], done)
        try:
            tables = _Tables(path)
            for future in futures:
                parts, problem = future.result()
                for part in parts:
                    tables.add(part)
                if problem is not None:
                    raise problem
        finally:
            done.set()
    return tables, readers[-1].header  # the last range's header has the keys after the events too


def _parts(reader: _Reader, start: int | None, stop: int | None, done: threading.Event) -> tuple[list, Exception]:
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
