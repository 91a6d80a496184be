"""torch.compile (inductor), one compiled function per region."""

from __future__ import annotations

from .eager import EagerEngine


class CompiledEngine(EagerEngine):
    kind = "compile"

    def __init__(self, instance, key: str):
        import torch
        import torch._dynamo

        super().__init__(instance, key)
        # Every region function is shared by all layers and all engines of this process; each
        # new bound-row count or dtype is one more specialization, and the default limit (8)
        # would silently fall back to eager in a sweep.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 256)
        instance.regions = {name: torch.compile(fn, fullgraph=True, dynamic=False)
                            for name, fn in instance.regions.items()}
