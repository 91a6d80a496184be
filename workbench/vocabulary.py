"""Names and limits that the capture side and the views share: which engines exist, and how
closely two runs' outputs must agree to be called equal. Plain data, importable from any
layer (the views must not import the capture code to learn them)."""

from __future__ import annotations

VERSION = "0.1.0"  # the package's version (``workbench.__version__``)

ENGINE_KINDS = ("eager", "compile", "cudagraph", "tensorrt")
CAPTURE_BACKENDS = ("torch", "nsys")

# Largest logit difference still called "equal", relative to the logits' magnitude (>= 1).
OUTPUT_TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}
