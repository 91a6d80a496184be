"""Every environment variable the workbench reads, named, documented and read here alone.

Library code asks :func:`read` (or :func:`flag`) for a :class:`Variable` of this module; the
capture sets two of them for the program it runs (``CAPTURE_WINDOWS``, ``CAPTURE_MODULES``) by
their ``name``. docs/architecture.md lists the same table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None
    doc: str


TRACES = Variable("WORKBENCH_TRACES", None, "the trace store directory (default ./traces)")
CACHE = Variable("WORKBENCH_CACHE", None, "where built TensorRT engines are cached (default ~/.cache/workbench)")
ANNOTATE = Variable("WORKBENCH_ANNOTATE", "1", "0 turns every workbench range into a no-op push and pop")
TORCH_RANGES = Variable("WORKBENCH_TORCH_RANGES", "0",
                        "1 makes every range also a torch.profiler record_function range")
NVTX_DOMAIN = Variable("WORKBENCH_NVTX_DOMAIN", None, "the NVTX domain of ranges that name none")
PREFER_LIVE = Variable("WORKBENCH_PREFER_LIVE", "1",
                       "0: notebooks use the committed reference traces, not the project's own captures")
GIT_REVISION = Variable("WORKBENCH_GIT_REVISION", None,
                        "the workbench's git revision, where its checkout has no .git (a copied tree)")
CAPTURE_WINDOWS = Variable("WORKBENCH_CAPTURE_WINDOWS", None,
                           "set by `workbench capture --backend nsys --windows`: windows call cudaProfilerStart/Stop")
CAPTURE_MODULES = Variable("WORKBENCH_CAPTURE_MODULES", None,
                           "set by `workbench capture --modules`: the regex of the modules given ranges")

CAPTURE_PROVENANCE = Variable("WORKBENCH_CAPTURE_PROVENANCE", "1",
                              "set to 0 by `workbench capture --no-provenance`: the program's compiled graphs are not "
                              "recorded (see capturing/provenance.py)")

VARIABLES = (TRACES, CACHE, ANNOTATE, TORCH_RANGES, NVTX_DOMAIN, PREFER_LIVE, GIT_REVISION, CAPTURE_WINDOWS,
             CAPTURE_MODULES, CAPTURE_PROVENANCE)

# Other tools' variables the workbench reads (set by them or for them, never by the user for us).
RANK = Variable("RANK", None, "torchrun's: this process's rank (a rank of `workbench capture --nproc`)")
LOCAL_RANK = Variable("LOCAL_RANK", None, "torchrun's: the rank on this host (default RANK)")
WORLD_SIZE = Variable("WORLD_SIZE", None, "torchrun's: the number of ranks")
TRITON_INTERPRET = Variable("TRITON_INTERPRET", None, "Triton's: 1 runs Triton kernels under its interpreter "
                            "(a CPU run of the fused kv_write), which reports say")
RAY_ADDRESS = Variable("RAY_ADDRESS", None, "Ray's: the cluster a Ray executor joins (default: a local one)")
FOREIGN = (RANK, LOCAL_RANK, WORLD_SIZE, TRITON_INTERPRET, RAY_ADDRESS)


def read(var: Variable, environ=None) -> str | None:
    """The variable's value, else its default."""
    return (os.environ if environ is None else environ).get(var.name, var.default)


def flag(var: Variable) -> bool:
    """Whether the variable is on (anything but 0, false, off)."""
    return str(read(var)).lower() not in ("0", "false", "off")


def take(var: Variable) -> str | None:
    """The variable's value, removed from this process's environment (so the program a capture
    runs does not hand it on to its own children)."""
    return os.environ.pop(var.name, None)
