"""One range API seen by both capture backends.

``annotate("kv_write")`` opens an NVTX range (what Nsight Systems records) and, while a
torch.profiler session is active, a ``record_function`` range (what Kineto records), so the
two backends see the same ``step > layer_NN > region`` tree. Use it as a context manager or
a decorator::

    with annotate("layer_03"):
        ...

    @annotate("prefill")
    def prefill(...): ...

Cost is what matters here: a decode step opens ~40 ranges, so the disabled path is one
flag test, and the enabled path skips ``record_function`` unless a
torch profiler is actually recording (checked with one C call). ``benchmarks/annotate_cost.py``
measures both.
"""

from __future__ import annotations

import functools
import os
import sys

DEFAULT_DOMAIN = "workbench"

_state = {
    "enabled": os.environ.get("WORKBENCH_ANNOTATE", "1") not in ("0", "false", "off"),
    "domain": os.environ.get("WORKBENCH_NVTX_DOMAIN", DEFAULT_DOMAIN),
}
# (domain, message) -> (nvtx Domain, EventAttributes); registering attributes once keeps the
# per-range cost to one push and one pop.
_attrs: dict[tuple[str, str], tuple] = {}


def set_enabled(on: bool) -> None:
    """Turn every range on or off, process-wide (also: ``WORKBENCH_ANNOTATE=0``)."""
    _state["enabled"] = bool(on)


def is_enabled() -> bool:
    return _state["enabled"]


def set_domain(domain: str) -> None:
    """NVTX domain of ranges that name none (also: ``WORKBENCH_NVTX_DOMAIN``)."""
    _state["domain"] = domain


def _nvtx(domain: str, message: str):
    import nvtx

    dom = nvtx.get_domain(domain)
    hit = _attrs[(domain, message)] = (dom, dom.get_event_attributes(message=message))
    return hit


# torch's "is a profiler recording?" C function, found once torch has been imported.
_profiling: list = [None]


class annotate:
    """A named range for NVTX and torch.profiler; context manager or decorator."""

    __slots__ = ("name", "domain", "_dom", "_rf")

    def __init__(self, name: str, domain: str | None = None):
        self.name = name
        self.domain = domain

    # Each step costs tens of nanoseconds on a ~40-range decode step, so state is set
    # only on the path taken, and lookups are cached (see benchmarks/annotate_cost.py).
    def __enter__(self):
        self._rf = None
        if not _state["enabled"]:
            self._dom = None
            return self
        key = (self.domain or _state["domain"], self.name)
        hit = _attrs.get(key) or _nvtx(*key)
        dom = self._dom = hit[0]
        dom.push_range(hit[1])
        recording = _profiling[0]
        if recording is None:
            # Only a process that imported torch can be profiling with it; never import it here.
            torch = sys.modules.get("torch")
            if torch is None:
                return self
            recording = _profiling[0] = torch._C._autograd._profiler_enabled
        if recording():
            import torch

            # record_function, not the faster _RecordFunctionFast: only a user-scope range is
            # exported as a ``user_annotation`` that the Kineto importer reads as a range.
            self._rf = torch.autograd.profiler.record_function(self.name)
            self._rf.__enter__()
        return self

    def __exit__(self, *exc):
        if self._rf is not None:
            self._rf.__exit__(*exc)
        if self._dom is not None:
            self._dom.pop_range()
        return False

    def __call__(self, fn):
        name, domain = self.name, self.domain

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            # A fresh range object per call keeps recursive and threaded calls correct.
            with annotate(name, domain):
                return fn(*args, **kwargs)

        return wrapper


from . import _callable as _c  # noqa: E402

_c.install(__name__, "annotate")
