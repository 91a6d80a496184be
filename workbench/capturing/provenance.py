"""What the compiler said: for each graph inductor compiles while a capture runs, its kernel
call sites in call order and the module each one computes.

``CompilerRecorder`` is installed around the recorded program (the bootstrap does it at the
program's start, so graphs compiled before a window opens are known too; ``wb.record`` and
``profile_call`` around their block). While it is installed:

* inductor's provenance tracking is on (``trace.provenance_tracking_level = 1``): each
  compiled graph's structured-trace artifact ``inductor_provenance_tracking_node_mappings``
  maps each call site (``kernel_name:debug_handle``, the handle counting calls in order) to
  the post-grad FX nodes it computes, and ``..._kernel_stack_traces`` to their source lines;
  a handler on the structured-trace logger (``torch.__trace``) collects both, and each graph's
  frame (``compilation_metrics``);
* a read-only post-grad pass (run last, after any pass the program set, which still runs)
  keeps each post-grad node's ``nn_module_stack``: the modules whose code made it;
* inductor's FX-graph and AOT-autograd caches are off: a cache hit compiles nothing, so it
  would give no module stacks (the custom pass also makes those caches bypass);
* generated C++ kernels record themselves to the profiler (``cpp.enable_kernel_profile``), so
  a CPU capture sees them as it sees aten ops.

Everything is put back as it was on exit. ``rows()`` gives the call sites, one dict each (the
``compiled`` table, :mod:`workbench.trace.compiled`), and ``summary()`` what was recorded.

Module paths. A path in ``nn_module_stack`` names a module from the compiled frame's locals
(``L['self'].model.layers.0.self_attn``). Paths are made relative to the graph's root: the one
module every node of the graph lies in, where there is one (``LlamaForCausalLM`` when a
wrapper's method calls ``self.model``), else the frame's first argument (``self`` of a compiled
``forward``). So they read as ``annotate_modules`` names them (``model.layers.0.self_attn``) and
the root is named by its class, as its range is in an eager capture. A call site computing
nodes of several modules gets their common ancestor (see ``_home`` for the two cases that keep
a layer's work in the layer); one whose nodes lie in two layers or more is flagged
(``crosses_layers``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from ..vocabulary import MODULE_LAYER_PATH

TRACE_LOGGER = "torch.__trace"
MAPPINGS = "inductor_provenance_tracking_node_mappings"
STACKS = "inductor_provenance_tracking_kernel_stack_traces"
# A local or global of the compiled frame that a module path starts from: L['self'], G['model'].
_ROOT_VAR = re.compile(r"^[LG]\['([^']*)'\]")
_INDEX = re.compile(r"\[\s*'?([^'\]]*)'?\s*\]")
_LAYER = re.compile(rf"(?:^|\.)({MODULE_LAYER_PATH})(?=\.|$)")
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclass
class _Graph:
    """What one compile said, as it arrives: node -> module stack, the provenance mappings, the
    kernel stack traces and the frame."""

    modules: dict = field(default_factory=dict)  # node name -> [(relative-to-frame path, class name)]
    mappings: dict | None = None
    stacks: dict | None = None
    frame: dict = field(default_factory=dict)
    owner: str | None = None  # the class of the compiled frame's first argument, an nn.Module
    views: set = field(default_factory=set)  # nodes that only view a tensor (no work of their own)
    # Mutating custom ops reach the module pass wrapped (auto_functionalized): (the wrapper's
    # input nodes, its module stack), in graph order. Inductor calls the op after the pass
    # through a node it makes then, with no module stack: a call site listing such a node gets
    # the stack of the wrapper that read the same inputs (see ``_stack``).
    wrapped: list = field(default_factory=list)


def _frame_owner(modules: dict) -> str | None:
    """The class of the module the compiled graph is a call of (``self`` of a compiled
    ``forward``, or the module a wrapper was handed: transformers compiles
    ``wrapped_func(*args)`` with the model as ``args[0]``), found by following the graph's root
    path from the frame's locals in dynamo's translator, which is still running while inductor
    compiles its graph; None where it is no module or this torch does not say."""
    try:
        import torch
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        tx = getattr(tx.output, "root_tx", tx)
        var, path = _root_var(modules)
        obj = tx.f_locals.get(var) if var else next(iter(tx.f_locals.values()), None)
        for part in path.split(".") if path else []:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        return type(obj).__name__ if isinstance(obj, torch.nn.Module) else None
    except Exception:  # internals of another torch version: the frame's own name is used instead
        return None


class _Collect(logging.Handler):
    def __init__(self, sink: "CompilerRecorder"):
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink._record(getattr(record, "metadata", None) or {}, getattr(record, "payload", None))
        except Exception:  # a record of a form this version does not give: never the program's failure
            pass


def _module_pass_type():
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class ModuleStacks(CustomGraphPass):
        """Reads each post-grad node's ``nn_module_stack``; changes nothing, then runs the pass
        the program had set. ``uuid`` None: a graph compiled with it is not cached."""

        def __init__(self, sink, previous):
            self.sink, self.previous = sink, previous

        def __call__(self, graph):
            self.sink._modules(graph)
            if self.previous is not None:
                self.previous(graph)

        def uuid(self):
            return None

        def __deepcopy__(self, memo):
            # torch.compile copies inductor's config; the copy must still reach this recorder.
            return self

    return ModuleStacks


class CompilerRecorder:
    """Collects inductor's provenance for every graph compiled while it is installed (a context
    manager, or :meth:`install` / :meth:`uninstall`); see the module docstring."""

    def __init__(self):
        self._graphs: dict[str, list[_Graph]] = {}
        self._installed = None

    # --- installing ---------------------------------------------------------------------

    def install(self) -> "CompilerRecorder":
        """Install (once); without torch (a program that never imports it) there is nothing
        to record and the recorder stays empty."""
        if self._installed is not None:
            return self
        try:
            import torch._inductor.config as inductor
        except ImportError:
            return self
        settings = {"trace.provenance_tracking_level": 1, "fx_graph_cache": False,
                    "cpp.enable_kernel_profile": True,
                    "post_grad_custom_post_pass": _module_pass_type()(self, inductor.post_grad_custom_post_pass)}
        patches = [inductor.patch(settings)]
        try:
            import torch._functorch.config as functorch

            if hasattr(functorch, "enable_autograd_cache"):
                patches.append(functorch.patch(enable_autograd_cache=False))
        except ImportError:
            pass
        for p in patches:
            p.__enter__()
        logger = logging.getLogger(TRACE_LOGGER)
        handler = _Collect(self)
        # Debug level makes torch emit the artifacts; not propagating keeps them from the
        # program's own log handlers (they are for this handler alone).
        level, propagate = logger.level, logger.propagate
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(handler)
        self._installed = (patches, logger, handler, level, propagate)
        return self

    def uninstall(self) -> None:
        if self._installed is None:
            return
        patches, logger, handler, level, propagate = self._installed
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        for p in reversed(patches):
            p.__exit__(None, None, None)
        self._installed = None

    def __enter__(self):
        return self.install()

    def __exit__(self, *exc):
        self.uninstall()

    # --- collecting ---------------------------------------------------------------------

    def _current(self, compile_id: str, new_when: str) -> _Graph:
        """The graph of ``compile_id`` still waiting for ``new_when`` (a field), else a new one:
        a frame may compile more than one graph (forward, backward), each in order."""
        graphs = self._graphs.setdefault(compile_id, [])
        for g in graphs:
            if not getattr(g, new_when):
                return g
        graphs.append(_Graph())
        return graphs[-1]

    def _modules(self, graph) -> None:
        import torch

        cid = torch._guards.CompileContext.current_compile_id()
        stacks, wrapped = {}, []
        for node in graph.nodes:
            stack = node.meta.get("nn_module_stack")
            if not stack:
                continue
            stacks[node.name] = [(str(path), getattr(cls, "__name__", str(cls))) for path, cls in stack.values()]
            if str(node.target).startswith("auto_functionalized"):
                wrapped.append((frozenset(n.name for n in node.all_input_nodes), stacks[node.name]))
        g = self._current(str(cid), "modules")
        g.modules = stacks
        g.views = {node.name for node in graph.nodes if getattr(node.target, "is_view", False)}
        g.wrapped = wrapped
        g.owner = _frame_owner(stacks)

    def _record(self, meta: dict, payload) -> None:
        cid = f"{meta['frame_id']}/{meta['frame_compile_id']}" if "frame_id" in meta else None
        artifact = meta.get("artifact") or {}
        if cid is not None and artifact.get("name") == MAPPINGS and payload:
            self._current(cid, "mappings").mappings = json.loads(payload)
        elif cid is not None and artifact.get("name") == STACKS and payload:
            self._current(cid, "stacks").stacks = json.loads(payload)
        elif "compilation_metrics" in meta:
            m = meta["compilation_metrics"]
            cid = cid or m.get("compile_id")
            if cid is not None:
                frame = {k: m.get(k) for k in ("co_name", "co_filename", "co_firstlineno")}
                for g in self._graphs.get(str(cid), []):
                    g.frame = frame

    # --- results ------------------------------------------------------------------------

    def rows(self) -> list[dict]:
        """Every recorded call site, graph by graph in compile order, each in call order."""
        out = []
        for cid, graphs in self._graphs.items():
            for i, g in enumerate(graphs):
                if g.mappings is not None:
                    out += _sites(f"{cid}" if len(graphs) == 1 else f"{cid}#{i}", g)
        return out

    def summary(self) -> dict:
        """How many graphs were compiled, how many gave their call sites, and a note on those
        that did not."""
        graphs = [g for gs in self._graphs.values() for g in gs]
        told = [g for g in graphs if g.mappings is not None]
        out = {"graphs": len(graphs), "with_provenance": len(told), "call_sites": len(self.rows())}
        if len(told) < len(graphs):
            out["note"] = (f"{len(graphs) - len(told)} compiled graph(s) gave no provenance (compiled by "
                           "another backend, or from a cache)")
        return out


def _relative(path: str) -> tuple[str, str]:
    """``(variable, path below it)``: ``L['self'].model.layers[0]`` -> (``self``, ``model.layers.0``)."""
    m = _ROOT_VAR.match(path)
    var, rest = (m.group(1), path[m.end():]) if m else ("", path)
    rest = _INDEX.sub(lambda x: "." + x.group(1), rest)
    return var, rest.strip(".")


def _root_var(modules: dict) -> tuple[str, str]:
    """``(variable, path below it)`` of the graph's root: the module every node's stack starts
    in where there is one (``L['self']``), else the nearest path above all of them (a model
    handed in as ``L['args'][0]`` has no stack entry of its own: its children's do)."""
    firsts = [_relative(path) for path in {stack[0][0] for stack in modules.values() if stack}]
    if len({var for var, _ in firsts}) != 1:
        return "", ""
    var = firsts[0][0]
    if len(firsts) == 1:
        return var, firsts[0][1]
    return var, _common([path for _, path in firsts])


def _root(modules: dict) -> tuple[str, str | None]:
    """The graph's root path (relative to its variable's) and, where one module's stack entry
    holds every node, that module's class (else None: see ``_frame_owner``)."""
    firsts = {tuple(stack[0]) for stack in modules.values() if stack}
    if len(firsts) == 1:
        path, cls = next(iter(firsts))
        return _relative(path)[1], cls
    return _root_var(modules)[1], None


def _common(paths: list[str]) -> str:
    parts = [p.split(".") if p else [] for p in paths]
    out = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        out.append(level[0])
    return ".".join(out)


def _source(stacks: dict | None, key: str) -> str:
    """The innermost frame of a call site's first stack trace: ``file:line (function)``."""
    traces = (stacks or {}).get(key) or []
    found = _FILE_LINE.findall(traces[0]) if traces else []
    if not found:
        return ""
    f, line, fn = found[-1]
    return f"{f}:{line} ({fn})"


def _sites(graph_id: str, g: _Graph) -> list[dict]:
    mapping = g.mappings.get("cppCodeToPost") or {}
    root, root_cls = _root(g.modules)
    run = root_cls or g.owner or str(g.frame.get("co_name") or "compiled")
    keyed = []
    for key, nodes in mapping.items():
        kernel, _, handle = key.rpartition(":")
        if not handle.isdigit():
            kernel, handle = key, "-1"
        keyed.append((int(handle), kernel, key, nodes))
    calls = []
    for call, kernel, key, nodes in sorted(keyed):
        paths = []
        nodes = nodes if isinstance(nodes, list) else []
        # Views a call reads through (an extern call's sliced inputs) do no work: a call is
        # counted where its work's nodes are, the views' only where it has nothing else.
        for n in [n for n in nodes if n not in g.views] or nodes:
            stack = g.modules.get(n) or _stack_of_wrapped(g, nodes)
            if stack:
                rel = _relative(stack[-1][0])[1]
                paths.append(rel[len(root):].lstrip(".") if root and (rel == root or rel.startswith(root + ".")) else rel)
        calls.append((call, kernel, key, paths, {m.group(1) for p in paths for m in _LAYER.finditer(p)}))
    near = _neighbours([layers for *_, layers in calls])
    return [{"graph": graph_id, "call": call, "kernel": kernel,
             "kind": "library" if kernel.startswith("extern_kernels.") or "." in kernel else "generated",
             "module": _home(paths, layers, near[i]), "modules": len(set(paths)),
             "crosses_layers": len(layers) > 1, "root": run, "source": _source(g.stacks, key),
             "function": str(g.frame.get("co_name") or "")}
            for i, (call, kernel, key, paths, layers) in enumerate(calls)]


def _stack_of_wrapped(g: _Graph, nodes: list) -> list | None:
    """The module stack of the wrapped custom op whose inputs are most among a call site's
    nodes (None: none shares any): the stack of a node inductor made after the module pass."""
    listed = set(nodes)
    best = max(g.wrapped, key=lambda w: len(w[0] & listed), default=None)
    return best[1] if best is not None and best[0] & listed else None


def _neighbours(layers: list[set[str]]) -> list[list[str]]:
    """Per call site: the layers of the nearest one-layer call sites after and before it, in
    that order (one pass each way)."""
    after: list[str | None] = [None] * len(layers)
    before: list[str | None] = [None] * len(layers)
    last = None
    for i in range(len(layers) - 1, -1, -1):
        after[i] = last
        if len(layers[i]) == 1:
            last = next(iter(layers[i]))
    last = None
    for i, own in enumerate(layers):
        before[i] = last
        if len(own) == 1:
            last = next(iter(own))
    return [[x for x in pair if x] for pair in zip(after, before)]


def _home(paths: list[str], layers: set[str], neighbours: list[str]) -> str:
    """The module a call site's kernel is counted in: its nodes' common ancestor, with two
    exceptions that keep a layer's work in the layer. Values of the model outside the layers
    recomputed in one layer's kernel (the rotary tables, the embedding feeding the first norm)
    are its fused-in inputs. A kernel of several layers (a layer's norm fused with the residual
    adds of the layers before it, which inductor recomputes rather than store) runs where the
    calls around it do: it is counted in the layer of the next one-layer call, else the one
    before, where that layer is among its own, in that layer's nodes' common ancestor; else
    (a mask every layer reads, run once) at the common ancestor of all."""
    if not paths:
        return ""
    if len(layers) == 1:
        return _common([p for p in paths if _LAYER.search(p)])
    home = next((n for n in neighbours if n in layers), None)
    if home is not None:
        return _common([p for p in paths if home in {m.group(1) for m in _LAYER.finditer(p)}])
    return _common(paths)
