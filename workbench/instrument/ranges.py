"""One range API seen by both capture backends.

``annotate("kv_write")`` opens an NVTX range (what Nsight Systems records) and, while torch
ranges are on, a ``torch.profiler.record_function`` range (what Kineto records), so the two
backends see the same ``step > layer_NN > region`` tree. Use it as a context manager or a
decorator::

    with annotate("layer_03"):
        ...

    @annotate("prefill")
    def prefill(...): ...

One ``annotate`` object may be entered any number of times at once: nested in itself, from
many threads, or from tasks that interleave on one thread. Nothing about an entry is kept on
the object: each entry pushes a token on a stack private to its thread (``threading.local``),
and its exit removes the innermost token the object owns there. (An exit out of order closes
its own ``record_function``; NVTX keeps one stack per thread, so its pop closes the innermost
NVTX range whichever exit comes first.)

Torch ranges. torch offers no public call that says whether a profiler is recording (the
checks it has, ``torch.autograd._profiler_enabled`` and
``torch.autograd.profiler._is_profiler_enabled``, are private, and the first answers for the
calling thread only, so it says no on other threads while a profiler records all threads).
Opening ``record_function`` on every range would be correct without a check, but it goes
through the operator dispatcher whether or not anything records, which costs a decode step
far more than the NVTX range. So ``record_function`` is opened only while torch ranges are on:
inside ``torch_ranges()`` (workbench's torch capture opens it around its profiler), after
``set_torch_ranges(True)``, or with ``WORKBENCH_TORCH_RANGES=1`` in the environment::

    with torch.profiler.profile() as prof, torch_ranges():
        model(x)

torch is never imported here: a range opens ``record_function`` only if the program already
imported torch (none of its profilers can run otherwise).

``set_enabled(False)`` (or ``WORKBENCH_ANNOTATE=0``) turns every range into a push and a pop
of a token; ranges open when the setting changes still close what they opened.
``benchmarks/annotate_cost.py`` measures each path.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading

from .. import settings


DEFAULT_DOMAIN = "workbench"


# What _state["torch"] is derived from: the persistent setting and the number of open
# torch_ranges() blocks. Changed only under _torch_lock, so blocks opened and closed by
# different threads keep an exact count.
_torch = {"set": settings.flag(settings.TORCH_RANGES), "open": 0}
_torch_lock = threading.Lock()

_state = {
    "enabled": settings.flag(settings.ANNOTATE),
    "domain": settings.read(settings.NVTX_DOMAIN) or DEFAULT_DOMAIN,
    # Whether ranges open record_function; one dict lookup on the hot path.
    "torch": _torch["set"],
}

# (domain, message) -> (nvtx Domain, EventAttributes); registering attributes once keeps the
# per-range cost to one push and one pop. Two threads filling the same key build equal values,
# so the cache needs no lock.
_attrs: dict[tuple[str, str], tuple] = {}


class _Tokens(threading.local):
    """Per thread: the tokens of the ranges this thread has open, innermost last."""

    def __init__(self):
        self.stack: list[tuple] = []


_tokens = _Tokens()


def set_enabled(on: bool) -> None:
    """Turn every range on or off, process-wide (also: ``WORKBENCH_ANNOTATE=0``)."""
    _state["enabled"] = bool(on)


def _torch_change(set_to: bool | None = None, opened: int = 0) -> None:
    with _torch_lock:
        if set_to is not None:
            _torch["set"] = set_to
        _torch["open"] += opened
        _state["torch"] = bool(_torch["set"] or _torch["open"])


def set_torch_ranges(on: bool) -> None:
    """Whether every range also opens a torch.profiler ``record_function``, process-wide, from
    now on (also: ``WORKBENCH_TORCH_RANGES=1``); ``torch_ranges()`` turns it on for a block."""
    _torch_change(set_to=bool(on))


def torch_ranges_on() -> bool:
    return _state["torch"]


@contextlib.contextmanager
def torch_ranges():
    """Ranges opened, on any thread, while this block runs also open a ``record_function``.

    Open it around a torch.profiler session. Blocks may overlap (nested, or one per thread):
    torch ranges stay on until the last one closes.
    """
    _torch_change(opened=1)
    try:
        yield
    finally:
        _torch_change(opened=-1)


def _nvtx(domain: str, message: str):
    import nvtx

    dom = nvtx.get_domain(domain)
    hit = _attrs[(domain, message)] = (dom, dom.get_event_attributes(message=message))
    return hit


def _record_function(name: str):
    """An open ``record_function`` range, or None when the program never imported torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    # record_function, not the faster private _RecordFunctionFast: only a user-scope range is
    # exported as a ``user_annotation`` that the Kineto importer reads as a range.
    rf = torch.profiler.record_function(name)
    rf.__enter__()
    return rf


def _owner(token):
    return token[0] if token.__class__ is tuple else token


def _take(stack: list, popped, owner):
    """Remove and return the innermost token of ``owner``, once the top one (``popped``, put
    back) was not: the exit of an entry that did not close last on its thread (a task or a
    generator suspended inside a range)."""
    if popped is not None:
        stack.append(popped)
    for i in range(len(stack) - 1, -1, -1):
        if _owner(stack[i]) is owner:
            return stack.pop(i)
    raise RuntimeError(f"annotate({owner.name!r}) closed on a thread where it is not open")


class annotate:
    """A named range for NVTX and torch.profiler; context manager or decorator.

    The object holds only its name and domain, so it can be shared, entered recursively and
    entered from several threads at once.
    """

    __slots__ = ("name", "domain")

    def __init__(self, name: str, domain: str | None = None):
        self.name = name
        self.domain = domain

    # Tokens: a disabled entry pushes the object itself, an enabled one (object, nvtx domain,
    # record_function or None). The exit pops its own entry's token, so it closes exactly
    # what that entry opened even if set_enabled or the torch setting changed in between.
    def __enter__(self):
        if not _state["enabled"]:
            _tokens.stack.append(self)
            return self
        rf = _record_function(self.name) if _state["torch"] else None
        key = (self.domain or _state["domain"], self.name)
        dom, attrs = _attrs.get(key) or _nvtx(*key)
        dom.push_range(attrs)
        _tokens.stack.append((self, dom, rf))
        return self

    def __exit__(self, exc_type, exc, tb):
        stack = _tokens.stack
        try:
            token = stack.pop()
        except IndexError:
            token = None
        if token is self:
            return False
        if token.__class__ is not tuple or token[0] is not self:  # _owner(token), inlined
            token = _take(stack, token, self)
            if token is self:
                return False
        token[1].pop_range()
        if token[2] is not None:
            token[2].__exit__(exc_type, exc, tb)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper
