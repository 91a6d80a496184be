"""What the instance a workload's ``create(variant, device)`` returns must have, per engine kind.

``CONTRACT[kind]`` maps each attribute the engine of that kind (``engines/``) and the runner
(``run.py``) use to one line saying what they do with it; a key written as a call
(``rows_for(n)``) is a method and must be callable. ``engines.build`` checks a new instance
against it with :func:`check_instance`, so a user's workload that lacks a piece fails with a
line naming it instead of an ``AttributeError`` from inside an engine. The table is the one
place the contract is written: the check reads it and so can documentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..errors import WorkbenchError

_FORWARD = "forward(tokens, positions, rows)"

# The eager engine's needs, which the compile and CUDA-graph engines extend (both subclass it).
_EAGER = {
    "device": "torch.device the instance's tensors live on (not the string `create` receives): the engine "
              "allocates its position tensors there and the runner reads `device.type`",
    "ctx": "int, the prompt length: prefill covers positions 0..ctx-1 and decoding starts at position ctx",
    "prompt": "1-D tensor of ctx token ids on `device`, the `tokens` prefill passes to forward",
    "rows": "int, the rows in the KV allocation: decoding refuses a position at or past it",
    "rows_for(n)": "int, the cache rows forward attends over once n rows are cached (at most `rows`)",
    _FORWARD: "runs `tokens` (int64, on device) at `positions` (int32 tensor, also the cache slots written) "
              "over the first `rows` cache rows; returns the last position's logits, shape (1, vocab)",
    "info": "mapping of facts about the build (e.g. dtype), merged into the engine's info and the manifest",
}

CONTRACT: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "eager": MappingProxyType(_EAGER),
    "compile": MappingProxyType({
        **_EAGER,
        "regions": "dict name -> pure tensor function that forward calls through `self.regions` at each call; "
                   "the engine assigns a new dict of torch.compile(fn, fullgraph=True) versions, unless the instance "
                   "has decode_module() (an nn.Module taking forward's arguments), which it compiles whole for decoding",
    }),
    "cudagraph": MappingProxyType({
        **_EAGER,
        _FORWARD: _EAGER[_FORWARD] + "; must be capturable in a CUDA graph (no host synchronisation, the same "
                                     "shapes for a given rows): decode steps replay one graph per rows value",
    }),
    "tensorrt": MappingProxyType({
        "device": "torch.device the instance's tensors live on: the exported step's example inputs go there",
        "ctx": "int, the position of the decode step exported as the example input",
        "prompt": "tensor of token ids on `device`; its last one is the exported decode step's example token",
        "rows_for(n)": "int, the cache rows bound in the exported decode step, rows_for(ctx + 1)",
        _FORWARD: "one decode step, traced by torch.onnx.export into the plan trtexec builds and runs",
        "variant": "mapping, the resolved variant (the engine refuses kv_write=fused: ONNX has no Triton op)",
        "info": "mapping with a `dtype` key (bfloat16 or float16 build the plan in that precision), "
                "merged into the engine's info and the manifest",
    }),
})


def check_instance(ref: str, instance, kind: str) -> None:
    """Raise a one-line error naming the first piece of ``CONTRACT[kind]`` that ``instance``
    (made by workload ``ref``) lacks, and any others after it."""
    lacking = []
    for key, what in CONTRACT[kind].items():
        name, call, _ = key.partition("(")
        if not hasattr(instance, name):
            lacking.append((name, f"its instance ({type(instance).__name__}) has no `{name}` "
                                  f"(the {kind} engine needs it: {what})"))
        elif call and not callable(getattr(instance, name)):
            lacking.append((name, f"its instance's `{name}` is not callable (the {kind} engine calls {key}: {what})"))
    if lacking:
        more = f"; also lacking: {', '.join(f'`{name}`' for name, _ in lacking[1:])}" if len(lacking) > 1 else ""
        raise WorkbenchError(f"workload {ref}", lacking[0][1] + more)
