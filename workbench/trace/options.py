"""How an import may use the machine: one object passed down from the CLI or the API.

Nothing here changes the process unless the caller asks: by default an import uses its own
worker threads and leaves the allocators, the garbage collector and Arrow's memory pool as
it found them. The one concurrency policy of the trace layer is :meth:`ImportOptions.pool`:
every step that works in parallel takes its threads from there, capped by ``threads``.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

MEMORY_POLICIES = ("default", "release")


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class ImportOptions:
    """``threads``: most worker threads one import step uses (None: one per available CPU;
    1: everything on the calling thread where a step allows it). ``memory``: ``"default"``
    leaves memory management alone; ``"release"`` makes large freed columns go back to the
    operating system at once (process-wide and for the rest of the process: glibc's mmap
    threshold and Arrow's system pool), which lowers the peak of big nsys imports; meant for
    a process that does imports, such as the CLI, not for a library call in someone's kernel.
    ``infer``: where almost no kernel is in a range (an engine nobody instrumented), put the
    decode steps and layers found in the kernel stream in the trace as ranges labelled inferred
    (:mod:`.inferred`); ``layers``: the layers a step is expected to hold, a hint to that search.
    """

    threads: int | None = None
    memory: str = "default"
    infer: bool = True
    layers: int | None = None

    def __post_init__(self):
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"ImportOptions.threads: expected a positive integer or None, got {self.threads!r}")
        if self.memory not in MEMORY_POLICIES:
            raise ValueError(f"ImportOptions.memory: expected one of {', '.join(MEMORY_POLICIES)}, got {self.memory!r}")
        if self.layers is not None and (not isinstance(self.layers, int) or self.layers < 1):
            raise ValueError(f"ImportOptions.layers: expected a positive integer or None, got {self.layers!r}")

    def workers(self, wanted: int | None = None) -> int:
        """Threads for a step that could use ``wanted`` (None: as many as allowed)."""
        cap = self.threads or available_cpus()
        return max(1, min(cap, wanted) if wanted is not None else cap)

    def pool(self, wanted: int | None = None, name: str = "workbench") -> Executor:
        """An executor of :meth:`workers` threads for one step, shut down by its ``with``
        block; with ``threads=1``, one that runs each task at once on the calling thread."""
        if self.threads == 1:
            return Inline()
        return ThreadPoolExecutor(self.workers(wanted), thread_name_prefix=name)

    def apply(self) -> None:
        """The process-wide part of the policy, done once per process where asked for."""
        if self.memory == "release":
            _release_freed_memory()


class Inline(Executor):
    """Runs each task as it is submitted, on the submitting thread."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        done: Future = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - held, as a worker thread's would be
            done.set_exception(e)
        return done


@cache
def _release_freed_memory() -> None:
    """glibc serves blocks of 4 MiB and more from their own mappings, unmapped when freed
    (instead of raising its threshold to the largest block freed and keeping them in the
    heap), and Arrow allocates through malloc instead of keeping freed buffers in its pool."""
    import ctypes
    import sys

    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing
        libc.mallopt(-3, 4 << 20)  # M_MMAP_THRESHOLD from malloc.h
    except (OSError, AttributeError):
        pass


DEFAULT = ImportOptions()
