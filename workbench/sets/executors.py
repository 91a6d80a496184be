"""Where a trace set's per-member tasks run: the one seam that chooses (:class:`Executor`).

A task is a module-level function of small arguments (a member's store path, options): it
opens its member from the store itself and returns small tables, which the caller merges. No
trace passes through the calling process (the driver). The same task runs

- ``local``: in a pool of worker processes on this machine
  (``concurrent.futures.ProcessPoolExecutor``, spawned: forking a process that holds Arrow's
  and DuckDB's threads can deadlock the child); ``workers=1`` runs the tasks one after another
  in this process, as a plain library call would;
- ``ray``: as Ray tasks of one CPU each, on the Ray instance this process is connected to, else
  on ``ray.init(address=...)``: ``address=None`` joins ``$RAY_ADDRESS`` or starts an instance on
  this machine, ``"auto"`` joins the cluster this machine is a node of, ``"ray://head:10001"`` a
  remote one. An instance connected to here is shut down when the tasks are done (a library
  call leaves the process as it found it); one the caller connected to is left alone.

Ray places the tasks; nothing here schedules. A Ray worker needs the workbench installed (the
same version) and the store at the same path as here: readable, and writable for an import.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .. import settings
from ..errors import WorkbenchError

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Executor:
    """``kind``: ``local`` or ``ray``. ``workers``: for ``local`` the worker processes (None:
    one per available CPU, at most one per task; 1: in this process), for ``ray`` the CPUs of
    an instance started on this machine (None: all). ``address``: the Ray cluster to join."""

    kind: str = "local"
    workers: int | None = None
    address: str | None = None

    def __post_init__(self):
        if self.kind not in EXECUTORS:
            raise WorkbenchError(f"executor {self.kind!r}", f"unknown executor; choose one of {', '.join(EXECUTORS)}")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 1):
            raise WorkbenchError(f"workers {self.workers!r}", "expected a positive whole number")

    def processes(self, tasks: int) -> int:
        """Local worker processes for ``tasks`` tasks (1: this process)."""
        from ..trace.options import available_cpus

        return max(1, min(self.workers or available_cpus(), tasks))

    def task_options(self, options, tasks: int):
        """The import options of each of ``tasks`` tasks: the machine's CPUs shared among the
        local workers (at most ``options.threads`` each), one thread for a Ray task (Ray gave
        it one CPU). The memory policy is
        the caller's in this process and in the local workers (they live for this call only),
        the default in a Ray worker, which outlives it and runs other work. ``options``: an
        :class:`~workbench.trace.ImportOptions` (imported here: the command line builds its
        parser from this module without loading the trace layer)."""
        from dataclasses import replace

        from ..trace.options import available_cpus

        if self.kind == "ray":
            return replace(options, threads=1, memory="default")
        share = max(1, available_cpus() // self.processes(tasks))
        return replace(options, threads=min(share, options.threads or share))

    def map(self, fn: Callable, args: Sequence[tuple]) -> list:
        """``fn(*a)`` for each ``a`` of ``args``, results in that order. A task's
        :class:`WorkbenchError` is raised here once no task is running any more (the first in
        ``args`` order), so the caller may clean up what the tasks wrote."""
        args = list(args)
        if not args:
            return []
        if self.kind == "ray":
            outcomes = _on_ray(fn, args, self)
        elif self.processes(len(args)) == 1:
            return [fn(*a) for a in args]
        else:
            outcomes = _on_pool(fn, args, self.processes(len(args)))
        for ok, value in outcomes:
            if not ok:
                raise WorkbenchError(*value)
        return [value for _, value in outcomes]


def executor(value: Executor | str | None) -> Executor:
    """An :class:`Executor` from what a caller passed: one, a kind's name, or None (local)."""
    if isinstance(value, Executor):
        return value
    return Executor(value or "local")


def guarded(fn: Callable, *args) -> tuple[bool, Any]:
    """Runs in the worker: ``(True, result)``, or ``(False, (where, problem))`` for a
    :class:`WorkbenchError`, which then crosses the process boundary as plain values."""
    try:
        return True, fn(*args)
    except WorkbenchError as e:
        return False, (e.where, e.problem)


def _on_pool(fn: Callable, args: list, processes: int) -> list:
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(guarded, fn, *a) for a in args]
        try:
            outcomes = []
            for f in futures:
                outcomes.append(f.result())
                if not outcomes[-1][0]:  # a failed task: the ones not started yet are not run
                    for rest in futures:
                        rest.cancel()
                    break
        except BrokenProcessPool:
            raise WorkbenchError("local executor", "a worker process died (out of memory?)") from None
    return outcomes


def _on_ray(fn: Callable, args: list, ex: Executor) -> list:
    try:
        import ray
    except ImportError:
        raise WorkbenchError("executor 'ray'", "Ray is not installed: pip install 'workbench[ray]'") from None
    started = not ray.is_initialized()
    if started:
        _connect(ray, ex)
    try:
        task = ray.remote(num_cpus=1)(guarded)
        refs = [task.remote(fn, *a) for a in args]
        try:
            return ray.get(refs)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.OutOfMemoryError,
                ray.exceptions.NodeDiedError) as e:
            ray.wait(refs, num_returns=len(refs))  # the others finish before the caller cleans up
            raise WorkbenchError("ray executor", f"a task's worker died: {type(e).__name__}") from None
    finally:
        if started:
            ray.shutdown()


def _connect(ray, ex: Executor) -> None:
    import logging

    address = ex.address or settings.read(settings.RAY_ADDRESS)
    local = {"num_cpus": ex.workers, "include_dashboard": False} if not address else {}
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **local)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise WorkbenchError(f"ray address {address or '(local)'}", f"cannot start or join Ray: {e}") from None
