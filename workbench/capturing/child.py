"""How a capture's child process ends (the bootstrap running a user's program, a call or a
workload session under nsys, a rank of a multi-rank job): with its main function's exit status,
or on Ctrl-C with 130 and nothing printed.

Ctrl-C reaches the whole foreground process group, the ``workbench`` process and its children
alike. The workbench says so in one line (``workbench: interrupted``, exit 130) and stores
nothing; a child's traceback of where the interrupt found it (the user's ``time.sleep``, a
torch import) would only bury that line.
"""

from __future__ import annotations

import signal
import sys
from typing import Callable, NoReturn

INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a program Ctrl-C ended


def run_child(main: Callable[..., int], *args) -> NoReturn:
    """``sys.exit(main(*args))``, but 130 without a traceback when interrupted."""
    try:
        code = main(*args)
    except KeyboardInterrupt:
        # The process is ending: a second Ctrl-C while the interpreter shuts down (torch's
        # exit handlers) must not print a traceback either.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        code = INTERRUPTED
    sys.exit(code)
