"""Peak memory of the measuring process, shared by the workbench and the HTA task (which runs
under another venv as a plain script, so this module imports nothing but the stdlib)."""

from __future__ import annotations

import resource


def hwm() -> int:
    """This process's RSS high-water mark. ``VmHWM`` belongs to the process image, so it starts
    afresh at exec; ``ru_maxrss`` would also count what the parent held when it forked us."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
