"""Capture a workload variant into ``traces/<name>/``.

``capture("decoder", {"kv_write": "fused"}, engine="eager", backend="torch")`` builds the
engine, times it (warm-up, repetitions, CUDA events on a GPU), records ``steps`` decode
steps with the chosen backend, imports the result, and stores it with a manifest:

* ``capture``: backend, engine, workload, variant, steps, the command (the CLI argv, or the
  equivalent CLI line for an API call, plus the process's own argv and the nsys command);
* ``env``: GPU, driver, CUDA, torch, Triton, nsys, Python, git revision, host;
* ``timing``: prefill and decode-step times (median, min-max, samples);
* ``outputs``: greedy tokens and logits, for equality checks between variants.

Everything is checked before any work starts, and the trace is built in a temporary
directory outside the store and published atomically, so a failure leaves nothing behind.
"""

from .workload_capture import CaptureSpec, capture, capture_spec

__all__ = ["CaptureSpec", "capture", "capture_spec"]
