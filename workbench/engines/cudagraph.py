"""Decode steps replayed from CUDA graphs.

One graph per bound-row count (the full variant needs one; bucketed one per bucket), captured
on first use. The ranges inside ``forward`` fire only while a graph is captured, so a replayed
kernel's launch sits under the step range alone. ``rebuild`` captures the graphs again inside a
recording (under ``graph_capture``), which is what lets an nsys trace give each replayed kernel
the ranges that were open when its node was captured (``trace/assemble/graph_ranges.py``).
"""

from __future__ import annotations

from ..instrument.ranges import annotate
from ..errors import WorkbenchError
from .eager import EagerEngine


class CudaGraphEngine(EagerEngine):
    kind = "cudagraph"

    @staticmethod
    def check(device: str) -> None:
        if not device.startswith("cuda"):
            raise WorkbenchError("engine cudagraph", "CUDA graphs need --device cuda")
        EagerEngine.check(device)

    def __init__(self, instance, key: str):
        import torch

        super().__init__(instance, key)
        self.token = torch.zeros(1, device=instance.device, dtype=torch.long)
        self.graphs: dict[int, tuple] = {}

    def _decode(self, token, rows: int):
        self.token.copy_(token)
        if rows not in self.graphs:
            self.graphs[rows] = self._capture(rows)
        graph, logits = self.graphs[rows]
        graph.replay()
        return logits

    def rebuild(self, positions) -> None:
        # Each graph is captured again without a warm-up (its first capture ran one), so the
        # recording holds no eager kernels; the old graph goes first, freeing its memory pool.
        with annotate("graph_capture"):
            for rows in sorted({self.instance.rows_for(p + 1) for p in positions}):
                warm = rows not in self.graphs
                self.graphs.pop(rows, None)
                self.graphs[rows] = self._capture(rows, warm=warm)

    def _capture(self, rows: int, warm: bool = True):
        import torch

        inst = self.instance
        if warm:
            # Warm-up on a side stream first, as torch.cuda.graphs advises (lazy init, autotuning).
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    inst.forward(self.token, self.positions, rows)
            torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = inst.forward(self.token, self.positions, rows)
        return graph, logits
