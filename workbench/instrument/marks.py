"""What a capture records: ``window()`` marks the region, ``step()`` each step inside it.

``workbench.window(name)`` is a context manager and a decorator. It always opens a range
(NVTX, and ``record_function`` while torch ranges are on), so a whole-run capture shows where
the window was; when nothing records that is all it costs. When ``workbench capture
--windows`` runs the program, the first window also starts the recording and its close stops
it: both backends record one window per capture (nsys's ``--capture-range-end=stop``), and
the windows opened later are counted in the manifest, not recorded. Windows nest (only the
outermost one counts) and may be opened from any thread.

How the capture reaches the program: the torch backend runs the program in its own process
and hands this module a recorder (:func:`set_recorder`); the nsys backend sets
``WORKBENCH_CAPTURE_WINDOWS=nsys``, and the window then calls ``cudaProfilerStart/Stop``
(nsys runs with ``--capture-range=cudaProfilerApi``). The capture reads :func:`state` when
the program ends, which is how it learns of a window that was opened and never closed.

``workbench.step()`` opens ``step_<i>``, numbered from 0 in each window (or given), so the
analysis counts launches per step of the program's own loop.
"""

from __future__ import annotations

import contextlib
import sys
import threading

from .. import settings
from .ranges import annotate


_lock = threading.Lock()
# depth: open windows (nested or on other threads); opened: outermost windows so far;
# recording: the recorder's window is open; open_names: for the "never closed" message.
_state = {"depth": 0, "opened": 0, "recorded": 0, "recording": False, "steps": 0, "open_names": [],
          "recorder": None}


class ProfilerApi:
    """The nsys backend's recorder: ``cudaProfilerStart/Stop``, the device synchronized first
    so the window holds its own work and nothing queued before it."""

    def _cuda(self):
        torch = sys.modules.get("torch")
        if torch is None:
            import torch
        return torch.cuda

    def start(self) -> None:
        cuda = self._cuda()
        cuda.synchronize()
        cuda.profiler.start()

    def stop(self) -> None:
        cuda = self._cuda()
        cuda.synchronize()
        cuda.profiler.stop()


def set_recorder(recorder) -> None:
    """The object whose ``start()``/``stop()`` the first window calls (None: nothing records)."""
    with _lock:
        _state["recorder"] = recorder


def _recorder():
    if _state["recorder"] is None and settings.read(settings.CAPTURE_WINDOWS) == "nsys":
        _state["recorder"] = ProfilerApi()
    return _state["recorder"]


def state() -> dict:
    """How many windows opened, how many were recorded, and the names of those still open."""
    with _lock:
        return {"opened": _state["opened"], "recorded": _state["recorded"], "unclosed": list(_state["open_names"])}


def _open(name: str) -> None:
    with _lock:
        _state["depth"] += 1
        _state["open_names"].append(name)
        if _state["depth"] > 1:
            return
        _state["opened"] += 1
        _state["steps"] = 0
        recorder = _recorder()
        start = recorder is not None and _state["recorded"] == 0
        if start:
            _state["recording"], _state["recorded"] = True, 1
    if start:
        recorder.start()


def _close(name: str) -> None:
    with _lock:
        _state["depth"] -= 1
        _state["open_names"].remove(name)
        stop = _state["depth"] == 0 and _state["recording"]
        if stop:
            _state["recording"] = False
            recorder = _state["recorder"]
    # A window still open when the interpreter shuts down (a bug the capture reports) is
    # closed by the garbage collector, when nothing can be stopped any more.
    if stop and not sys.is_finalizing():
        recorder.stop()


@contextlib.contextmanager
def _window(name: str):
    _open(name)
    try:
        with annotate(name):
            yield
    finally:
        _close(name)


def window(name=None):
    """Mark the region a ``--windows`` capture records; ``with window("decode"):``,
    ``@window("decode")`` or a bare ``@window``. Returns a fresh context per use, so one
    decorated function may recurse or run on many threads."""
    if callable(name):  # bare @window
        return _window("window")(name)
    return _window(name or "window")


@contextlib.contextmanager
def step(index: int | None = None):
    """One step of the program's loop: the range ``step_<index>``; numbered 0, 1, ... inside
    each window when no index is given."""
    if index is None:
        with _lock:
            index = _state["steps"]
            _state["steps"] += 1
    with annotate(f"step_{int(index)}"):
        yield
