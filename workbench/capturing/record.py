"""``with wb.record("my-trace") as rec:`` records the block with torch.profiler, in this
process (a notebook cell, a script), and stores it with the environment and wall time;
``rec.trace`` is the stored ``Trace``.

Only the torch backend records in-process: nsys cannot profile the process that starts it
(see ``profile_call``, which runs a ``module:function`` reference in a child under nsys). A
block that raises stores nothing, and the exception goes on unchanged.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from ..errors import WorkbenchError


class record:
    """Context manager: record the block and store it as ``name`` when it ends."""

    def __init__(self, name: str, *, backend: str = "torch", root: str | Path | None = None,
                 overwrite: bool = False, keep_raw: bool = False, progress: bool = True):
        from ..trace.store import check_free

        if backend != "torch":
            raise WorkbenchError(f"backend {backend}", "cannot record this process from inside it: use "
                                 "wb.profile_call('module:function', backend='nsys'), which runs it in a child")
        check_free(name, root, overwrite)
        self.name, self.root, self.overwrite, self.keep_raw, self.progress = name, root, overwrite, keep_raw, progress
        self.trace = None
        self.wall_s = None
        self._tmp = self._recorder = None

    def __enter__(self):
        from .provenance import CompilerRecorder
        from .torch_backend import TorchRecorder

        if self._tmp is not None:
            raise WorkbenchError(f"record {self.name}", "is already open (one record object records one block)")
        self._tmp = tempfile.TemporaryDirectory(prefix="workbench-record-")
        self._recorder = TorchRecorder(Path(self._tmp.name) / "kineto.json")
        # Graphs the block compiles say what they compute (compiled before it: see the docs).
        self._compiler = CompilerRecorder().install()
        self._recorder.start()
        self._started = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        from .run import stats
        from .store_capture import store_new

        try:
            self.wall_s = time.perf_counter() - self._started
            self._recorder.stop()
            self._compiler.uninstall()
            if exc_type is not None:
                return False
            torch = sys.modules.get("torch")
            device = "cuda" if torch is not None and torch.cuda.is_initialized() else "cpu"
            meta = {"capture": {"kind": "record", "backend": "torch", "device": device,
                                "command": f"with wb.record({self.name!r}):",
                                "command_line": f"with wb.record({self.name!r}):",
                                "cwd": os.getcwd(), "wall_s": round(self.wall_s, 6),
                                "process_argv": list(sys.orig_argv)},
                    "timing": {"timer": "host", "wall_ms": stats([self.wall_s * 1e3])}, "env": None}
            self.trace = store_new(self._recorder.out, meta, self.name, root=self.root, overwrite=self.overwrite,
                                   keep_raw=self.keep_raw, progress=self.progress, compiled=self._compiler.rows())
        finally:
            self._tmp.cleanup()
            self._tmp = None
        return False
