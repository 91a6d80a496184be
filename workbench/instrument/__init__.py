"""What a program opens so that a trace shows its structure: ranges, module hooks, windows.

``ranges.annotate`` is one range seen by both capture backends (NVTX, and ``record_function``
while torch ranges are on); ``modules.annotate_modules`` opens one around each call of a model's
submodules without editing the model; ``marks.window`` and ``marks.step`` mark what a capture
records and each step inside it. Imports nothing above ``errors`` and ``patterns``: engines,
workloads and any user program may use it.
"""

from .modules import annotate_modules
from .ranges import annotate
from .marks import step, window

__all__ = ["annotate", "annotate_modules", "step", "window"]
