"""Progress of a capture, one phase at a time (run, export, import, store), on stderr.

The run phase prints one line before the program starts (the program's own output follows,
undisturbed); the other phases show a bar with the elapsed time, ticking while they work.
Quiet (``progress=False``, ``--quiet``) prints nothing.
"""

from __future__ import annotations

import contextlib
import sys
import threading


class Phases:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    @contextlib.contextmanager
    def phase(self, name: str, detail: str = ""):
        if not self.enabled:
            yield
            return
        if name == "run":
            print(f"workbench capture: running {detail}".rstrip(), file=sys.stderr, flush=True)
            yield
            return
        from tqdm.auto import tqdm

        bar = tqdm(total=None, desc=f"workbench capture: {name}", bar_format="{desc} {elapsed}", leave=False,
                   file=sys.stderr, disable=None)  # None: no bar where stderr is not a terminal
        done = threading.Event()

        def tick():
            while not done.wait(0.5):
                bar.refresh()

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
            bar.close()
