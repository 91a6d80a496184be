"""torch.compile (inductor).

An instance with ``decode_module()`` (the reference decoder) has its decode step compiled whole,
as production engines and transformers do: one graph per bound-row count, under CUDA graphs on
a GPU (``mode="reduce-overhead"``: each decode step is one graph replay); the prefill runs eager,
in its ranges. The compiler's provenance, recorded by the capture, names each kernel's module.
Otherwise each region of ``regions`` is compiled on its own, so its kernels run inside the
region's range.
"""

from __future__ import annotations

from ..instrument.ranges import annotate
from .eager import EagerEngine


class CompiledEngine(EagerEngine):
    kind = "compile"

    def __init__(self, instance, key: str):
        import torch
        import torch._dynamo

        super().__init__(instance, key)
        # Every compiled function is shared by all engines of this process; each new bound-row
        # count or dtype is one more specialization, and the default limit (8) would silently
        # fall back to eager in a sweep.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 256)
        self.step = None
        if hasattr(instance, "decode_module"):
            self.module = instance.decode_module()
            self.step = self._compile(self.module)
            self.info["compiled"] = "decode step" + (" (CUDA graphs)" if instance.device.type == "cuda" else "")
        else:
            instance.regions = {name: torch.compile(fn, fullgraph=True, dynamic=False)
                                for name, fn in instance.regions.items()}
            self.info["compiled"] = "each region"

    def _compile(self, module):
        import torch

        graphs = self.instance.device.type == "cuda"
        return torch.compile(module, fullgraph=True, dynamic=False, mode="reduce-overhead" if graphs else None)

    def rebuild(self, positions) -> None:
        # Under CUDA graphs the compiled step's graphs were recorded in the warm-up, before the
        # recording opened, and nsys traces a graph's kernels one by one only where it saw the
        # graph made. So the step is compiled again here, under ``graph_capture``, and per
        # bound-row count run three times (warm-up, the run that records the graph, a replay)
        # at the first position that needs it (the step there writes its cache row again).
        # Dynamo's caches and cudagraph trees go first: a graph of the old trees cannot run
        # after they are reset.
        if self.step is None or self.instance.device.type != "cuda":
            return
        import torch
        import torch._dynamo
        from torch._inductor import cudagraph_trees

        torch.cuda.synchronize()
        torch._dynamo.reset()
        cudagraph_trees.reset_cudagraph_trees()
        token = torch.zeros(1, dtype=torch.long, device=self.instance.device)
        first: dict[int, int] = {}
        for pos in positions:
            first.setdefault(self.instance.rows_for(pos + 1), pos)
        with annotate("graph_capture"):
            self.step = self._compile(self.module)
            for rows, pos in sorted(first.items()):
                self.positions.fill_(pos)
                for _ in range(3):
                    self.step(token, self.positions, rows).clone()
        torch.cuda.synchronize()

    def _decode(self, token, rows: int):
        if self.step is None:
            return super()._decode(token, rows)
        # A replayed graph's output buffer is overwritten by the next replay: the caller gets
        # its own copy, as from an eager step.
        return self.step(token, self.positions, rows).clone()
