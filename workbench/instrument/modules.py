"""Per-module ranges on a model nobody here wrote, without editing it.

``annotate_modules(model)`` registers forward pre/post hooks on the selected submodules of
``model``; each call of one opens and closes an :class:`~workbench.instrument.ranges.annotate` range
named by the module's path in ``model.named_modules()`` (``model.layers.3.self_attn``; the root
module, if selected, by its class name, ``LlamaForCausalLM``), so both capture backends see a
``model.layers.3 > model.layers.3.mlp`` tree::

    with wb.annotate_modules(model), wb.record("llama-generate"):
        model.generate(ids, max_new_tokens=3)

Selection. The regexes are matched with ``re.search`` against those names. By default
(:data:`DEFAULT_INCLUDE`): each decoder layer (a path ending in ``layers.N``, ``layer.N``,
``h.N``, ``blocks.N`` or ``block.N``) and its direct children (attention, MLP, norms, ...),
the embeddings, the final norm and the head, and the root model itself when any of those is
in it (one range per model call: how the analysis tells the steps of a ``generate`` loop apart). ``include`` replaces that default, ``exclude``
removes from what is selected. A selection that matches no module warns and annotates nothing.

:func:`annotate_called_modules` is the same for every module the process calls, models it
never sees (``workbench capture --modules``): torch's global module hooks name a module the
first time it is called, as a root, together with its submodules (paths relative to it; a
root called later that contains it renames them), then apply the same selection.

The post hook is registered with ``always_call=True``, so a forward that raises still closes
its range. Ranges are paired per thread and per module object, so a module that calls itself,
or a hook of someone else's that raises before ours runs, leaves no range open or closed twice.

torch.compile. Dynamo traces module hooks into the compiled graph, and an NVTX push or pop
there is an unsupported call: a graph break, and with ``fullgraph=True`` an error. So the
hooks open nothing while ``torch.compiler.is_compiling()``: modules called inside compiled
code (``torch.compile(model)``, ``model.compile()``, or the children of a compiled
``forward``) get no range, and their kernels fall in the enclosing eager range (the range of a
module whose hooks ran eagerly around the compiled call, or the caller's own). What dynamo
keeps of the hook is a store to a module flag (no guard, so no recompile), replayed after each
compiled call; the next eager hook or ``remove()`` warns once that ranges inside compiled code
were not opened (a warning raised while tracing would itself break the graph). A capture that
records the compiler's provenance (``capturing/provenance.py``) gives those kernels their
modules' ranges at import instead (``trace/assemble/compiled_runs.py``). Under
``workbench capture --modules``, torch also warns that ``torch.compile(model)`` makes its global
hooks fire once more, for the wrapper: harmless here, the wrapper is named by its class name
and not selected by default.

CUDA graphs. Hooks are Python: they run when a graph is captured, not when it is replayed. The
ranges exist around the capture (where nsys ties each graph node to the ranges open when it
was created); a replay runs no hook and opens no range.
"""

from __future__ import annotations

import threading
import warnings
import weakref

from .ranges import annotate
from ..errors import WorkbenchError
from ..patterns import compile_regex
from ..vocabulary import MODULE_RANGES as DEFAULT_INCLUDE

class _Compiled:
    """``seen`` is set by a hook dynamo traces and read by eager code, which warns once. An
    attribute store is a side effect dynamo replays after the graph, guarding nothing; a store
    into a dict would guard every value in it, and the warning's flip would recompile."""

    seen = False
    warned = False


_compiled = _Compiled()


class _Open(threading.local):
    """Per thread: (module, annotate) of the ranges the hooks opened, innermost last."""

    def __init__(self):
        self.stack: list[tuple] = []


_open = _Open()


class Selection:
    """Which range names get a range: any ``include`` regex and no ``exclude`` regex."""

    def __init__(self, include=None, exclude=None):
        self.default = include is None
        self.include = _patterns("include", DEFAULT_INCLUDE if include is None else include)
        self.exclude = _patterns("exclude", () if exclude is None else exclude)

    def __call__(self, name: str) -> bool:
        return any(p.search(name) for p in self.include) and not any(p.search(name) for p in self.exclude)

    def pick(self, tree: list[tuple[str, object]]) -> list[tuple[str, object]]:
        """The selected (name, module) of a model's :func:`tree_names`. The default also takes
        the root when it selects anything under it: a range per call of the whole model is
        what tells one step of a ``generate`` loop from the next (``analysis.steps``)."""
        chosen = [(name, m) for name, m in tree if self(name)]
        if self.default and chosen and chosen[0][1] is not tree[0][1] and not any(
                p.search(tree[0][0]) for p in self.exclude):
            chosen.insert(0, tree[0])
        return chosen

    def describe(self) -> str:
        inc = "the default selection" if self.default else \
            "include " + " | ".join(repr(p.pattern) for p in self.include)
        return inc + "".join(f", exclude {p.pattern!r}" for p in self.exclude)


def _patterns(what: str, value) -> list:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(p, str) for p in items):
        raise WorkbenchError(f"annotate_modules {what}", f"a regex or a list of regexes, not {value!r}")
    if what == "include" and not items:
        raise WorkbenchError("annotate_modules include", "an empty list selects nothing (None: the default)")
    return [compile_regex(p, f"annotate_modules {what}") for p in items]


def tree_names(root) -> list[tuple[str, object]]:
    """(range name, module) for ``root`` and its submodules: paths relative to ``root``, the
    root itself by its class name. ``torch.compile(model)`` holds ``model`` as ``_orig_mod``:
    its modules are named as if unwrapped, the wrapper by its class name."""
    inner = getattr(root, "_orig_mod", None)
    if inner is not None and callable(getattr(inner, "named_modules", None)):
        return [(type(root).__name__, root), *tree_names(inner)]
    return [(path or type(root).__name__, m) for path, m in root.named_modules()]


def _warn_compiled() -> None:
    _compiled.warned = True
    warnings.warn("workbench.annotate_modules: modules called inside torch.compile'd code open no range; "
                  "a capture that records the compiler's provenance (wb.record, profile_call, workbench "
                  "capture) puts their kernels in their modules' ranges at import, otherwise they fall in "
                  "the enclosing range", stacklevel=3)


def _hooks(annotation_of):
    """The pre and post hook pair; ``annotation_of(module)`` is its ``annotate`` or None."""
    import torch

    is_compiling = torch.compiler.is_compiling

    def pre(module, args):
        if is_compiling():
            _compiled.seen = True
            return
        if _compiled.seen and not _compiled.warned:
            _warn_compiled()
        ann = annotation_of(module)
        if ann is not None:
            ann.__enter__()
            _open.stack.append((module, ann))

    def post(module, args, output):
        if is_compiling():
            return
        stack = _open.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] is module:
                stack.pop(i)[1].__exit__(None, None, None)
                return

    return pre, post


class ModuleRanges:
    """The hooks :func:`annotate_modules` registered: ``remove()`` them (or leave a ``with``
    block); ``names`` are the annotated module paths."""

    def __init__(self, handles: list, names):
        self._handles = handles
        self._names = names

    @property
    def names(self) -> list[str]:
        return list(self._names)

    def remove(self, *, attributed: bool = False) -> None:
        """Remove every hook; calling it again does nothing. Ranges open now still close.
        ``attributed``: the caller records the compiler's provenance, which gives compiled
        modules their ranges, so there is nothing to warn of."""
        handles, self._handles = self._handles, []
        for h in handles:
            h.remove()
        if _compiled.seen and not _compiled.warned and not attributed:
            _warn_compiled()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def __repr__(self) -> str:
        return f"ModuleRanges({len(self._names)} modules{', removed' if not self._handles else ''})"


def annotate_modules(model, include=None, exclude=None, *, domain: str | None = None) -> ModuleRanges:
    """One range per call of each selected submodule of ``model``, named by its path.

    ``include`` / ``exclude``: a regex or a list of regexes, ``re.search``-ed against the
    paths (the root: its class name); ``include`` replaces :data:`DEFAULT_INCLUDE`. ``domain``:
    the NVTX domain (default: ``annotate``'s). Returns the :class:`ModuleRanges` handle.
    """
    if not callable(getattr(model, "named_modules", None)):
        raise WorkbenchError("annotate_modules", f"{type(model).__name__} is not a torch.nn.Module "
                                                 "(it has no named_modules)")
    select = Selection(include, exclude)
    chosen = select.pick(tree_names(model))
    if not chosen:
        warnings.warn(f"workbench.annotate_modules: {select.describe()} matched no module of "
                      f"{type(model).__name__}", stacklevel=2)
        return ModuleRanges([], [])
    handles = []
    for name, m in chosen:
        pre, post = _hooks(lambda _, ann=annotate(name, domain): ann)
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post, always_call=True))
    return ModuleRanges(handles, [name for name, _ in chosen])


def annotate_called_modules(include=None, exclude=None, *, domain: str | None = None) -> ModuleRanges:
    """:func:`annotate_modules` for every module this process calls, through torch's global
    module hooks (the hooks of ``workbench capture --modules``). A module is named when it is
    first called (see the module docstring); ``names`` grows as selected modules are called
    (still empty at the end: the selection matched no module the process called)."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    select = Selection(include, exclude)
    # module -> its annotate, or None when not selected; absent until named.
    ranges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    names: dict[str, None] = {}  # the selected names so far, in the order first seen
    lock = threading.Lock()

    def annotation_of(module):
        try:
            ann = ranges.get(module, ranges)
        except TypeError:  # a module class that made itself unhashable cannot be a key: no range
            return None
        if ann is not ranges:
            return ann
        with lock:
            tree = tree_names(module)
            picked = {id(m) for _, m in select.pick(tree)}
            for name, m in tree:
                chosen = id(m) in picked
                try:
                    ranges[m] = annotate(name, domain) if chosen else None
                except TypeError:  # unhashable, as above
                    continue
                if chosen:
                    names[name] = None
        return ranges.get(module)

    pre, post = _hooks(annotation_of)
    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
    return ModuleRanges(handles, names)
