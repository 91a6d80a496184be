"""A small decoder-only transformer with a paged KV cache: the two cases of DESIGN.md.

Per layer the forward pass opens ``layer_NN > {qkv, kv_write, attention, mlp}`` ranges.

* ``kv_write=unfused`` writes K, V and index-K each with aten ops (page = slot // page_size,
  offset = slot % page_size, two index casts, ``index_put_``): 5 kernels per tensor, 15 per
  layer. ``kv_write=fused`` calls one Triton kernel per layer (``kv_fused.py``).
* ``cache_rows=full`` attends over the whole allocation (``rows``, masked beyond the cached
  prefix); ``cache_rows=bucketed`` binds only the cached prefix rounded up to ``bucket`` rows,
  so shapes change only when the bucket does.

* ``tp=N`` (N > 1) splits heads and MLP over N ranks, one process each (``decoder_tp.py``):
  each rank holds its heads' share of the KV cache, and attention and the MLP each end in an
  all-reduce in a ``layer_NN > attention|mlp > allreduce`` range. The instance must be created
  in an initialized process group of N ranks; ``workbench capture`` starts one.

One sequence owns the allocation with its pages in order, so attention reads the cache as a
contiguous row view while the write path is still the paged (page, offset) one. Weights and
the prompt come from ``seed`` on the CPU, so every device and variant starts identical.

Instance contract used by engines and the runner: ``forward(tokens, positions, rows)`` runs
the model over ``tokens`` at ``positions`` (int32, also the cache slots) attending over the
first ``rows`` cache rows and returns the last position's logits; ``rows_for(n)`` is the row
count to bind once ``n`` rows are cached; ``regions`` maps region names to the pure functions
``forward`` calls (an engine may replace them, e.g. with compiled versions); ``prompt``,
``rows``, ``info``.
"""

from __future__ import annotations

import math

from ..instrument.ranges import annotate
from .drawing import PairSpec, Presentation
from .spec import Option

OPTIONS = {
    "kv_write": Option("unfused", ("unfused", "fused"), "how K, V and index-K reach the cache"),
    "cache_rows": Option("full", ("full", "bucketed"), "rows bound for attention"),
    "layers": Option(8, None, "decoder layers"),
    "heads": Option(8, None, "attention heads"),
    "head_dim": Option(64, None, "size of one head"),
    "index_dim": Option(64, None, "size of the index-K row written next to K and V"),
    "mlp_dim": Option(2048, None, "MLP hidden size"),
    "vocab": Option(2048, None, "vocabulary size"),
    "page_size": Option(16, None, "rows per KV-cache page"),
    "rows": Option(10368, None, "rows in the KV allocation"),
    "bucket": Option(256, None, "bucket size for cache_rows=bucketed"),
    "ctx": Option(128, None, "prompt length (cached rows when decoding starts)"),
    "dtype": Option("auto", ("auto", "bfloat16", "float16", "float32"), "auto: bfloat16 on CUDA, float32 on CPU"),
    "seed": Option(0, None, "seed for weights and prompt"),
    "tp": Option(1, None, "tensor-parallel ranks: heads and MLP split over this many processes, one per GPU "
                          "(decoder_tp.py)"),
}


def bucket_rows(cached: int, bucket: int, rows: int) -> int:
    """Rows to bind for ``cached`` rows: rounded up to ``bucket``, at least one, at most ``rows``.

    An empty cache still binds one (masked) row so attention keeps a valid shape.
    """
    return min(rows, max(1, -(-cached // bucket) * bucket))


# --- regions: pure functions of tensors, so one compiled version serves every layer -------

def _norm(x):
    import torch.nn.functional as F

    # Pre-norm keeps activations O(1) over the layers, so bf16 rounding stays far below the
    # gap between the top logits and greedy tokens agree across variants.
    return F.rms_norm(x, (x.shape[-1],), eps=1e-6)


def qkv(x, w_qkv, heads: int, head_dim: int):
    n, kv = x.shape[0], heads * head_dim
    out = _norm(x) @ w_qkv
    q = out[:, :kv]
    k = out[:, kv:2 * kv].view(n, heads, head_dim)
    v = out[:, 2 * kv:3 * kv].view(n, heads, head_dim)
    return q, k, v, out[:, 3 * kv:]


def kv_write_unfused(slots, k, v, ik, k_cache, v_cache, ik_cache):
    page_size = k_cache.shape[1]
    for new, cache in ((k, k_cache), (v, v_cache), (ik, ik_cache)):
        page = slots // page_size
        offset = slots % page_size
        cache.index_put_((page.long(), offset.long()), new)


def kv_write_fused(slots, k, v, ik, k_cache, v_cache, ik_cache):
    import torch

    torch.ops.workbench.kv_write_fused(slots, k, v, ik, k_cache, v_cache, ik_cache)


def attend(q, k_cache, v_cache, positions, row_ids):
    """Attention of ``q`` over the first ``row_ids`` cache rows: [n, heads * head_dim]."""
    import torch
    import torch.nn.functional as F

    n, rows = q.shape[0], row_ids.shape[0]
    heads, dim = k_cache.shape[-2:]
    keys = k_cache.view(-1, heads, dim)[:rows].transpose(0, 1)
    values = v_cache.view(-1, heads, dim)[:rows].transpose(0, 1)
    # Causal over cache rows: query at position p sees rows 0..p; rows past it are masked.
    mask = torch.full((n, rows), float("-inf"), dtype=q.dtype, device=q.device)
    mask.masked_fill_(row_ids[None, :] <= positions[:, None], 0.0)
    out = F.scaled_dot_product_attention(
        q.view(n, heads, dim).transpose(0, 1)[None], keys[None], values[None], attn_mask=mask[None, None])
    return out[0].transpose(0, 1).reshape(n, heads * dim)


def attention(x, q, k_cache, v_cache, positions, row_ids, w_o):
    return x + attend(q, k_cache, v_cache, positions, row_ids) @ w_o


def attention_partial(x, q, k_cache, v_cache, positions, row_ids, w_o):
    """Attention through ``w_o`` without the residual: a tensor-parallel rank's partial sum
    (``x``, the residual, is added to the all-reduced sum outside the region)."""
    return attend(q, k_cache, v_cache, positions, row_ids) @ w_o


def mlp_branch(x, w_up, w_down):
    """The MLP's output, before the residual add."""
    import torch.nn.functional as F

    return F.gelu(_norm(x) @ w_up) @ w_down


def mlp(x, w_up, w_down):
    return x + mlp_branch(x, w_up, w_down)


def lm_head(x, w_out):
    return _norm(x[-1:]) @ w_out


def check_variant(v: dict) -> None:
    """One line naming the first setting of a (resolved) variant that cannot build a decoder."""
    from ..errors import WorkbenchError

    for key in ("layers", "heads", "head_dim", "index_dim", "mlp_dim", "vocab", "page_size", "rows", "bucket", "ctx",
                "tp"):
        if v[key] < 1:
            raise WorkbenchError(f"variant {key}", f"must be positive, got {v[key]}")
    if v["rows"] % v["page_size"]:
        raise WorkbenchError("variant rows", f"{v['rows']} is not a multiple of page_size {v['page_size']}")
    if v["ctx"] >= v["rows"]:
        raise WorkbenchError("variant ctx", f"prompt of {v['ctx']} leaves no room to decode in {v['rows']} rows")
    for key in ("heads", "mlp_dim"):  # what tensor parallelism splits
        if v[key] % v["tp"]:
            raise WorkbenchError("variant tp", f"{v['tp']} ranks do not divide {key} {v[key]}")


def full_weights(v: dict) -> dict:
    """Every weight (float32) and the prompt, drawn on the CPU from ``seed`` in one fixed order,
    so every device, variant and tensor-parallel rank starts from the same draw."""
    import torch

    hidden = v["heads"] * v["head_dim"]
    gen = torch.Generator().manual_seed(v["seed"])

    def weight(*shape):
        return torch.randn(*shape, generator=gen) / math.sqrt(shape[0])

    embed = torch.randn(v["vocab"], hidden, generator=gen)
    layers = [{"w_qkv": weight(hidden, 3 * hidden + v["index_dim"]), "w_o": weight(hidden, hidden),
               "w_up": weight(hidden, v["mlp_dim"]), "w_down": weight(v["mlp_dim"], hidden)}
              for _ in range(v["layers"])]
    w_out = weight(hidden, v["vocab"])
    return {"embed": embed, "layers": layers, "w_out": w_out,
            "prompt": torch.randint(v["vocab"], (v["ctx"],), generator=gen)}


def _residual_in_region(x, out):
    return out


class DecoderInstance:
    """The decoder on one device, or one rank's share of it: with ``split`` (a
    ``decoder_tp.TensorSplit``) the instance holds ``heads / tp`` heads and their KV cache, its
    shard of each layer's weights, and attention and the MLP return partial sums that
    ``split.combine`` all-reduces and adds to the residual."""

    def __init__(self, variant: dict, device, split=None):
        from .spec import torch_dtype

        v = self.variant = variant
        check_variant(v)
        self.device, self.dtype = torch_dtype(v["dtype"], device)
        self.split = split
        self.rows = v["rows"]
        self.ctx = v["ctx"]
        self.heads = v["heads"] // v["tp"]
        self._build_weights()
        self.regions = {"qkv": qkv, "attention": attention, "mlp": mlp, "lm_head": lm_head}
        if v["kv_write"] == "fused":
            from . import kv_fused

            self.regions["kv_write"] = kv_write_fused
            impl = kv_fused.implementation(self.device)
        else:
            self.regions["kv_write"] = kv_write_unfused
            impl = "aten"
        self.info = {"kv_write_impl": impl, "dtype": str(self.dtype).removeprefix("torch.")}
        self.combine = _residual_in_region
        if split is not None:
            self.regions.update(attention=attention_partial, mlp=mlp_branch)
            self.combine = split.combine
            self.info.update(split.info)

    def _build_weights(self) -> None:
        import torch

        v = self.variant
        full = full_weights(v)

        def place(w):
            return w.to(self.device, self.dtype)

        self.embed = place(full["embed"])
        shard = self.split.shard if self.split is not None else dict
        self.layers = [{k: place(w) for k, w in shard(layer).items()} for layer in full["layers"]]
        self.w_out = place(full["w_out"])
        self.prompt = full["prompt"].to(self.device)
        pages = self.rows // v["page_size"]
        kv_shape = (pages, v["page_size"], self.heads, v["head_dim"])
        self.caches = [
            (torch.zeros(kv_shape, device=self.device, dtype=self.dtype),
             torch.zeros(kv_shape, device=self.device, dtype=self.dtype),
             torch.zeros(pages, v["page_size"], v["index_dim"], device=self.device, dtype=self.dtype))
            for _ in range(v["layers"])
        ]
        self.row_ids = torch.arange(self.rows, device=self.device, dtype=torch.int32)

    def rows_for(self, cached: int) -> int:
        if self.variant["cache_rows"] == "full":
            return self.rows
        return bucket_rows(cached, self.variant["bucket"], self.rows)

    def forward(self, tokens, positions, rows: int):
        r, heads, dim = self.regions, self.heads, self.variant["head_dim"]
        x = self.embed[tokens]
        row_ids = self.row_ids[:rows]
        for i, (w, (k_cache, v_cache, ik_cache)) in enumerate(zip(self.layers, self.caches)):
            with annotate(f"layer_{i:02d}"):
                with annotate("qkv"):
                    q, k, v, ik = r["qkv"](x, w["w_qkv"], heads, dim)
                with annotate("kv_write"):
                    r["kv_write"](positions, k, v, ik, k_cache, v_cache, ik_cache)
                with annotate("attention"):
                    x = self.combine(x, r["attention"](x, q, k_cache, v_cache, positions, row_ids, w["w_o"]))
                with annotate("mlp"):
                    x = self.combine(x, r["mlp"](x, w["w_up"], w["w_down"]))
        with annotate("lm_head"):
            return r["lm_head"](x, self.w_out)


    def decode_module(self):
        """The model as an ``nn.Module`` tree (``layer.N.{qkv, kv_write, attention, mlp}``,
        ``lm_head``) whose forward is :meth:`forward` without ranges (code inside torch.compile
        opens none): what the compile engine compiles whole, so the compiler names each kernel's
        module (``layer.3.kv_write``: layer 3, ``kv_write``) as the eager ranges name its region
        (``layer_03 > kv_write``). Weights and caches are the instance's own tensors, registered as buffers."""
        return _module(self)


def _module(inst: DecoderInstance):
    import torch

    class Region(torch.nn.Module):
        def __init__(self, fn, **buffers):
            super().__init__()
            self.fn = fn
            for name, tensor in buffers.items():
                self.register_buffer(name, tensor, persistent=False)

        def forward(self, *args):
            return self.fn(*args)

    class Layer(torch.nn.Module):
        def __init__(self, w, caches):
            super().__init__()
            r = inst.regions
            self.qkv = Region(r["qkv"], w_qkv=w["w_qkv"])
            self.kv_write = Region(r["kv_write"], k_cache=caches[0], v_cache=caches[1], ik_cache=caches[2])
            self.attention = Region(r["attention"], w_o=w["w_o"])
            self.mlp = Region(r["mlp"], w_up=w["w_up"], w_down=w["w_down"])

        def forward(self, x, positions, row_ids):
            heads, dim = inst.heads, inst.variant["head_dim"]
            q, k, v, ik = self.qkv(x, self.qkv.w_qkv, heads, dim)
            kv = self.kv_write
            kv(positions, k, v, ik, kv.k_cache, kv.v_cache, kv.ik_cache)
            x = inst.combine(x, self.attention(x, q, kv.k_cache, kv.v_cache, positions, row_ids, self.attention.w_o))
            return inst.combine(x, self.mlp(x, self.mlp.w_up, self.mlp.w_down))

    class DecoderModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("embed", inst.embed, persistent=False)
            self.register_buffer("row_ids", inst.row_ids, persistent=False)
            self.layer = torch.nn.ModuleList(Layer(w, c) for w, c in zip(inst.layers, inst.caches))
            self.lm_head = Region(inst.regions["lm_head"], w_out=inst.w_out)

        def forward(self, tokens, positions, rows: int):
            x = self.embed[tokens]
            row_ids = self.row_ids[:rows]
            for layer in self.layer:
                x = layer(x, positions, row_ids)
            return self.lm_head(x, self.lm_head.w_out)

    return DecoderModel()


# Regions in the order ``forward`` opens them. Colours: each region its own, so every figure
# reads alike; variants before (warm: unfused, full) and after (cool: fused, bucketed). A label
# naming several values takes the first listed.
PRESENTATION = Presentation(
    regions=("qkv", "kv_write", "attention", "mlp", "lm_head"),
    colors={"qkv": "#9467bd", "kv_write": "#d62728", "attention": "#1f77b4", "mlp": "#2ca02c",
            "lm_head": "#8c564b",
            "unfused": "#ff7f0e", "bucketed": "#1f77b4", "fused": "#2ca02c", "full": "#d62728"},
    # The fusion case, eager engine: a torch.profiler capture under CUDA graphs keeps replayed
    # kernels under the step alone, torch.compile re-fuses the aten ops, and bucketed captures
    # differ in attention.
    default_pair=PairSpec("unfused", "fused", tokens=("kvwrite",), exclude=("bucketed", "cudagraph", "compile"),
                          prefer=("nsys", "eager")),
)


class Decoder:
    name = "decoder"
    options = OPTIONS
    presentation = PRESENTATION

    def check(self, variant: dict) -> None:
        check_variant(variant)

    def create(self, variant: dict, device) -> DecoderInstance:
        split = None
        if variant["tp"] > 1:
            from .decoder_tp import TensorSplit

            split = TensorSplit(variant)
        return DecoderInstance(variant, device, split)


DECODER = Decoder()
