"""torch.profiler capture: a recorder that runs in the recorded process, Kineto JSON out.

:class:`TorchRecorder` is what every torch capture uses (a workload variant, a user's
program, a ``record`` block, a profiled call): CPU activities, plus CUDA where the process
has a GPU, and the workbench's ranges open ``record_function`` only while it records, so
what runs before it pays for NVTX ranges alone, as an unprofiled program would.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from ..instrument.ranges import torch_ranges
from .session import execute

# The profiler's own chatter on stderr (its start/stop probes, the toggling warning): lines
# that look like errors to a reader and say nothing about the program.
_NOISE = re.compile(rb"USDT:|profiler_kineto\.cpp:\d+\] Toggling")


@contextlib.contextmanager
def quiet_profiler_stderr():
    """Hold back the profiler's own lines written to file descriptor 2 (C++ writes there, past
    ``sys.stderr``) while the block runs; every other line is passed on when it ends."""
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (a daemon): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = b"".join(line for line in held if not _NOISE.search(line))
            if kept:
                os.write(2, kept)


class TorchRecorder:
    """``start()`` / ``stop()`` a torch.profiler session; ``stop`` writes ``out``."""

    def __init__(self, out: Path, cuda: bool | None = None):
        self.out = Path(out)
        self.cuda = cuda
        self._prof = self._ranges = None

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        if self.cuda is None:
            self.cuda = torch.cuda.is_available()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        # One start/stop cycle per recorder: keeping its events (acc_events) is the same data
        # without torch's warning that a cycle's events are cleared. Ranges on every thread, as
        # nsys records them: a serving loop or a graph capture on a worker thread keeps its own.
        self._prof = profile(activities=activities, acc_events=True, **_all_threads())
        self._ranges = torch_ranges()
        self._ranges.__enter__()
        with quiet_profiler_stderr():
            self._prof.start()

    def stop(self) -> None:
        import torch

        if self._prof is None:
            return
        prof, self._prof = self._prof, None
        try:
            if self.cuda and torch.cuda.is_initialized():
                torch.cuda.synchronize()  # the window's kernels finish inside it
            with quiet_profiler_stderr():
                prof.stop()
        finally:
            self._ranges.__exit__(None, None, None)
        prof.export_chrome_trace(str(self.out))


def _all_threads() -> dict:
    """The profiler option that records ops and ranges on every thread, where this torch has it
    (``profile_all_threads``; without it only the thread that starts the profiler is seen)."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return {"experimental_config": _ExperimentalConfig(profile_all_threads=True)}
    except (ImportError, TypeError):
        return {}


def capture(spec: dict, workdir: Path) -> tuple[Path, dict, list[str] | None]:
    """A workload variant's decode steps (``session.execute``) recorded in this process."""
    recorder = TorchRecorder(workdir / "kineto.json", cuda=spec["device"].startswith("cuda"))

    @contextlib.contextmanager
    def window():
        recorder.start()
        try:
            yield
        finally:
            recorder.stop()

    result = execute(spec, window())
    return recorder.out, result, None
