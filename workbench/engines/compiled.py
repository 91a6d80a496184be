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
            graphs = instance.device.type == "cuda"
            self.step = torch.compile(instance.decode_module(), fullgraph=True, dynamic=False,
                                      mode="reduce-overhead" if graphs else None)
            self.info["compiled"] = "decode step" + (" (CUDA graphs)" if graphs else "")
        else:
            instance.regions = {name: torch.compile(fn, fullgraph=True, dynamic=False)
                                for name, fn in instance.regions.items()}
            self.info["compiled"] = "each region"

    def rebuild(self, positions) -> None:
        # Under CUDA graphs the compiled step's graphs were recorded in the warm-up, before the
        # recording opened, and nsys traces a graph's kernels one by one only where it saw the
        # graph made. So the graphs are dropped and made again here, under ``graph_capture``:
        # per bound-row count, a warm-up run, the run that records the graph and one replay, at
        # the first position that needs it (the step there writes its cache row again).
        if self.step is None or self.instance.device.type != "cuda":
            return
        import torch
        from torch._inductor import cudagraph_trees

        torch.cuda.synchronize()
        cudagraph_trees.reset_cudagraph_trees()
        token = torch.zeros(1, dtype=torch.long, device=self.instance.device)
        first: dict[int, int] = {}
        for pos in positions:
            first.setdefault(self.instance.rows_for(pos + 1), pos)
        with annotate("graph_capture"):
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
