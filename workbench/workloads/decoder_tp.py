"""The reference decoder split over ``tp`` ranks (Megatron-style tensor parallelism): a
:class:`TensorSplit` given to ``decoder.DecoderInstance`` makes it one rank's share.

Each rank is one process (one GPU; on a CPU, gloo ranks) in an initialized
``torch.distributed`` group of ``tp`` ranks, and holds:

* column-parallel ``w_qkv``: the Q, K and V columns of its ``heads / tp`` heads, and the whole
  index-K block (one row per token, not per head: every rank writes it, as a replicated
  indexer would);
* its heads' share of the KV cache, so ``kv_write`` writes K and V of its heads and index-K,
  with the same 15 aten kernels (unfused) or one Triton kernel (fused) per layer;
* row-parallel ``w_o`` and ``w_down``, column-parallel ``w_up``: attention and the MLP each end
  in a partial sum that one ``all_reduce`` completes before the residual add;
* the embedding and ``lm_head`` whole: every rank computes the same logits.

The weights are the tp=1 decoder's (``decoder.full_weights``, drawn on the CPU from ``seed``)
cut into shards, so the logits equal tp=1's up to the order of the all-reduce's sums.

Ranges: ``layer_NN > attention > allreduce`` and ``layer_NN > mlp > allreduce`` hold each
collective (the c10d op and, on a GPU, its NCCL kernel), so the communication is attributed to
the layer and region that issue it, and ``attention`` / ``mlp`` still span their whole block.
"""

from __future__ import annotations

from ..errors import WorkbenchError

class TensorSplit:
    """This process's share of the decoder as rank ``rank`` of the default process group of
    ``tp`` ranks (see the module docstring): ``shard`` cuts a layer's full weights,
    ``combine`` completes a partial sum; ``info`` goes to the manifest."""

    def __init__(self, variant: dict):
        import torch.distributed as dist

        tp = variant["tp"]
        if not (dist.is_available() and dist.is_initialized()):
            raise WorkbenchError("variant tp", f"tp={tp} runs as {tp} processes in a torch.distributed group: "
                                 "capture it (workbench capture decoder --variant tp=N), which starts them")
        if dist.get_world_size() != tp:
            raise WorkbenchError("variant tp", f"tp={tp} in a process group of {dist.get_world_size()} ranks")
        self.variant, self.rank, self.world, self._dist = variant, dist.get_rank(), tp, dist
        self.info = {"tp": tp, "rank": self.rank, "comm_backend": str(dist.get_backend())}

    def shard(self, layer: dict) -> dict:
        import torch

        v, r = self.variant, self.rank
        hidden = v["heads"] * v["head_dim"]
        mine = hidden // self.world
        cols = slice(r * mine, (r + 1) * mine)
        ff = v["mlp_dim"] // self.world
        up = slice(r * ff, (r + 1) * ff)
        w_qkv = layer["w_qkv"]
        shard = {"w_qkv": torch.cat([w_qkv[:, cols], w_qkv[:, hidden:2 * hidden][:, cols],
                                     w_qkv[:, 2 * hidden:3 * hidden][:, cols], w_qkv[:, 3 * hidden:]], dim=1),
                 "w_o": layer["w_o"][cols], "w_up": layer["w_up"][:, up], "w_down": layer["w_down"][up]}
        return {k: w.contiguous() for k, w in shard.items()}

    def combine(self, x, partial):
        """Every rank's partial sums added up (in place), then the residual."""
        from ..instrument.ranges import annotate

        with annotate("allreduce"):
            self._dist.all_reduce(partial)
        return x + partial
