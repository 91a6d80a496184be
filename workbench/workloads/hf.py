"""A HuggingFace causal LM built from a transformers config with seeded random weights.

Nothing is downloaded: ``arch`` picks the config class (LlamaConfig, Qwen2Config,
Phi3Config, and the mixture-of-experts MixtralConfig and Qwen2MoeConfig, whose experts,
experts per token and, for Qwen2-MoE, the MoE layers' spacing are variant keys too: with
``sparse_step=2`` every other layer is dense, a model whose layers repeat in pairs), the size
keys fill it in, and the model's own transformers code runs it with
``attn_implementation=attn`` over a ``DynamicCache`` or a ``StaticCache`` (``cache``). Each
module of the model opens a range named by its path (``model.layers.3.self_attn``, see
``instrument.modules.annotate_modules``), so a trace shows where the model's own code spends its time.

The cache is the model's: the prefill (``ctx`` tokens, so ``ctx`` is at least 2) starts a
fresh one, and each decode step appends one token. A static cache writes at the position it
is told (its per-layer length counters are set from ``positions``, inside the step), so a
step run again at the same position, as CUDA-graph warm-up does, overwrites its row instead
of appending; a dynamic cache appends, so decode steps must come in order, as the runner
sends them. Attention binds the whole static allocation (``max_len`` rows, masked past the
position) and the cached prefix of a dynamic cache.

Engines: eager runs anywhere. ``compile`` compiles the one region, the model step, as
transformers recommends for a static cache (a dynamic cache changes shape every step);
module ranges cannot run inside a compiled graph, so they are removed once an engine
replaces the region. ``cudagraph`` replays decode steps over the static cache's fixed
buffers. Both refuse ``cache=dynamic``.

``tp=N`` (N > 1) runs the model as N ranks, one process each, created in an initialized
process group of N (``workbench capture`` starts one): the seeded full model is cut by its
architecture's own transformers tp plan (:func:`_split`), so every layer's attention and MLP
end in an all-reduce inside the layer's module ranges; a static cache holds each rank's
``kv_heads / N`` key/value heads. Tested with the eager engine on gloo CPU ranks.
"""

from __future__ import annotations

from ..errors import WorkbenchError
from .drawing import PairSpec, Presentation
from .spec import Option, Workload, torch_dtype

# arch -> transformers config class; AutoModelForCausalLM picks the model class from it.
ARCHS = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "phi3": "Phi3Config", "mixtral": "MixtralConfig",
         "qwen2_moe": "Qwen2MoeConfig"}
# The mixture-of-experts families: their config keys for the experts (routed experts, experts
# a token is routed to).
MOE = {"mixtral": ("num_local_experts", "num_experts_per_tok"), "qwen2_moe": ("num_experts", "num_experts_per_tok")}

OPTIONS = {
    "arch": Option("llama", tuple(ARCHS), "model family (its transformers config and modeling code)"),
    "attn": Option("sdpa", ("eager", "sdpa"), "transformers attn_implementation"),
    "cache": Option("static", ("dynamic", "static"), "transformers KV cache: DynamicCache or StaticCache "
                                                      "(compile and cudagraph need static)"),
    "layers": Option(4, None, "decoder layers"),
    "hidden": Option(256, None, "hidden size"),
    "heads": Option(8, None, "attention heads"),
    "kv_heads": Option(4, None, "key/value heads (grouped-query attention when fewer than heads)"),
    "intermediate": Option(512, None, "MLP intermediate size"),
    "vocab": Option(1024, None, "vocabulary size"),
    "ctx": Option(32, None, "prompt length (cached rows when decoding starts)"),
    "max_len": Option(128, None, "cache length: rows of the static cache, the most positions decoded"),
    "experts": Option(8, None, "routed experts per MoE layer (mixtral, qwen2_moe)"),
    "experts_per_token": Option(2, None, "experts each token is routed to (mixtral, qwen2_moe)"),
    "sparse_step": Option(1, None, "qwen2_moe: every this many layers is an MoE layer, the others dense"),
    "dtype": Option("auto", ("auto", "bfloat16", "float16", "float32"), "auto: bfloat16 on CUDA, float32 on CPU"),
    "seed": Option(0, None, "seed for weights and prompt"),
    "tp": Option(1, None, "tensor-parallel ranks: the model's own transformers tp plan over this many processes"),
}

_SIZES = ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "ctx", "max_len", "tp", "experts",
          "experts_per_token", "sparse_step")
# What the tp plans of these architectures split (heads, key/value heads, MLP, vocabulary).
_SPLIT = ("heads", "kv_heads", "intermediate", "vocab")


def _transformers():
    try:
        import transformers
    except ImportError:
        raise WorkbenchError("workload hf", "needs transformers: pip install 'workbench[hf]'") from None
    return transformers


def check_variant(v: dict) -> None:
    """One-line error naming the first size key that cannot build a model."""
    for key in _SIZES:
        if v[key] < 1:
            raise WorkbenchError(f"variant {key}", f"must be positive, got {v[key]}")
    if v["hidden"] % v["heads"]:
        raise WorkbenchError("variant heads", f"{v['heads']} heads do not divide hidden {v['hidden']}")
    if v["heads"] % v["kv_heads"]:
        raise WorkbenchError("variant kv_heads", f"{v['kv_heads']} key/value heads do not divide heads {v['heads']}")
    if (v["hidden"] // v["heads"]) % 2:
        raise WorkbenchError("variant heads", f"head size hidden/heads = {v['hidden'] // v['heads']} is odd "
                                              "(rotary embeddings rotate pairs)")
    # forward tells the prefill from a decode step by its token count.
    if v["ctx"] < 2:
        raise WorkbenchError("variant ctx", f"must be at least 2, got {v['ctx']}")
    if v["ctx"] >= v["max_len"]:
        raise WorkbenchError("variant ctx", f"prompt of {v['ctx']} leaves no room to decode in max_len {v['max_len']}")
    if v["experts_per_token"] > v["experts"]:
        raise WorkbenchError("variant experts_per_token", f"{v['experts_per_token']} is more than the "
                                                          f"{v['experts']} experts")
    if v["tp"] > 1 and v["arch"] in MOE:
        raise WorkbenchError("variant tp", f"tp={v['tp']} runs the dense families' tp plans "
                                           f"({', '.join(a for a in ARCHS if a not in MOE)}), not {v['arch']}'s experts")
    for key in _SPLIT:
        if v[key] % v["tp"]:
            raise WorkbenchError("variant tp", f"{v['tp']} ranks do not divide {key} {v[key]}")


def build_config(v: dict):
    """The transformers config of a (checked) variant."""
    tf = _transformers()
    moe = {}
    if v["arch"] in MOE:
        experts, per_token = MOE[v["arch"]]
        moe = {experts: v["experts"], per_token: v["experts_per_token"]}
    if v["arch"] == "qwen2_moe":  # experts as wide as a dense layer's MLP, and one shared
        moe.update(moe_intermediate_size=v["intermediate"], shared_expert_intermediate_size=v["intermediate"],
                   decoder_sparse_step=v["sparse_step"], mlp_only_layers=[])
    return getattr(tf, ARCHS[v["arch"]])(
        vocab_size=v["vocab"], hidden_size=v["hidden"], intermediate_size=v["intermediate"],
        num_hidden_layers=v["layers"], num_attention_heads=v["heads"], num_key_value_heads=v["kv_heads"],
        max_position_embeddings=v["max_len"], attn_implementation=v["attn"],
        # Token ids of the real tokenizers (Phi-3's pad/eos is 32000) lie outside a small vocabulary.
        pad_token_id=None, bos_token_id=None, eos_token_id=None, **moe)


class HFInstance:
    def __init__(self, variant: dict, device):
        import torch

        from ..instrument.modules import annotate_modules

        tf = self._tf = _transformers()
        v = self.variant = variant
        check_variant(v)
        self.device, self.dtype = torch_dtype(v["dtype"], device)
        self.ctx, self.rows = v["ctx"], v["max_len"]
        self.config = build_config(v)
        # Weights drawn on the CPU from `seed` (every device starts from the same draw), in the
        # build dtype as from_config makes them; the global RNG is left as it was.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(v["seed"])
            model = tf.AutoModelForCausalLM.from_config(self.config, dtype=self.dtype)
        self.model = model.eval().requires_grad_(False).to(self.device)
        if v["tp"] > 1:
            self.model = _split(self.model, v["tp"])
        gen = torch.Generator().manual_seed(v["seed"])
        self.prompt = torch.randint(v["vocab"], (self.ctx,), generator=gen).to(self.device)
        self.static = v["cache"] == "static"
        if self.static:
            self.cache = tf.StaticCache(config=self.config, max_cache_len=self.rows)
            # Allocated now, not lazily in the first update: a compiled prefill could not mark
            # the buffers as static addresses, and a CUDA graph needs them fixed.
            self.cache.early_initialization(batch_size=1, num_heads=v["kv_heads"] // v["tp"],
                                            head_dim=v["hidden"] // v["heads"], dtype=self.dtype,
                                            device=self.device)
        else:
            self.cache = None
        self._eager_step = self._step
        self.regions = {"step": self._eager_step}
        self.module_ranges = annotate_modules(self.model)
        self.info = {"dtype": str(self.dtype).removeprefix("torch."), "arch": v["arch"],
                     "attn": self.config._attn_implementation,
                     "cache": "StaticCache" if self.static else "DynamicCache", "transformers": tf.__version__,
                     "parameters": sum(p.numel() for p in self.model.parameters()), "tp": v["tp"]}
        if v["arch"] in MOE:
            self.info.update(experts=v["experts"], experts_per_token=v["experts_per_token"])
            if v["arch"] == "qwen2_moe":
                self.info["sparse_step"] = v["sparse_step"]

    def rows_for(self, cached: int) -> int:
        return self.rows if self.static else min(cached, self.rows)

    def forward(self, tokens, positions, rows: int):
        """Last position's logits, shape (1, vocab); ``rows`` follows from the cache (rows_for)."""
        step = self.regions["step"]
        if step is not self._eager_step:
            self._compiled()
        elif not self.static and self.device.type == "cuda":
            import torch

            if torch.cuda.is_current_stream_capturing():
                # Before any work is captured: a dynamic cache grows, a replayed graph cannot.
                raise WorkbenchError("variant cache", "dynamic cannot be replayed from a CUDA graph "
                                                      "(use --variant cache=static)")
        if tokens.shape[0] > 1:
            self._fresh_cache()
        return step(tokens, positions)

    def _compiled(self) -> None:
        """An engine replaced the step with a compiled one: check it can work, once."""
        if not self.static:
            raise WorkbenchError("variant cache", "dynamic changes shape every step: compiling needs "
                                                  "--variant cache=static")
        if self.module_ranges is not None:
            # A compiled graph opens no ranges (dynamo cannot trace them).
            self.module_ranges.remove()
            self.module_ranges = None

    def _fresh_cache(self) -> None:
        if self.static:
            self.cache.reset()
        else:
            self.cache = self._tf.DynamicCache(config=self.config)

    def _step(self, tokens, positions):
        if self.static:
            # Each layer writes at its own length counter: set them to the step's position, by
            # a device copy (no host sync), so a CUDA graph replays it with the step.
            for layer in self.cache.layers:
                layer.cumulative_length.copy_(positions[0])
        out = self.model(input_ids=tokens[None], position_ids=positions[None].long(), cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        return out.logits[0]


def _split(model, tp: int):
    """``model`` (its full weights, the same on every rank) cut by its architecture's own tp
    plan (``base_model_tp_plan``) over the default process group, as transformers does between
    building a model and loading its checkpoint in ``from_pretrained(distributed_config=...)``:
    column-wise q/k/v and gate/up, row-wise o and down (each ending in an all-reduce), the
    embedding split by vocabulary rows, the head's output gathered."""
    import torch.distributed as dist

    tf = _transformers()
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() != tp:
        raise WorkbenchError("variant tp", f"tp={tp} runs as {tp} processes in a torch.distributed group: "
                             "capture it (workbench capture hf --variant tp=N), which starts them")
    try:
        config, _, mesh = model.prepare_distribute_model(tf.DistributedConfig(tp_size=tp))
        return model.maybe_distribute_model(model, config, mesh)
    except (ValueError, RuntimeError, AttributeError) as e:
        raise WorkbenchError("variant tp", f"transformers {tf.__version__} could not split the model: "
                             f"{type(e).__name__}: {e}") from e


# Module ranges inside a decoder layer, by their last path component, in execution order
# (Phi-3 adds its residual dropouts). Colours: attention and MLP as the decoder workload's;
# variant values before (warm: eager, dynamic) and after (cool: sdpa, static), sdpa listed
# before eager so a label holding the eager engine and attn sdpa takes sdpa's colour.
PRESENTATION = Presentation(
    regions=("input_layernorm", "self_attn", "resid_attn_dropout", "post_attention_layernorm", "mlp",
             "resid_mlp_dropout"),
    colors={"input_layernorm": "#bcbd22", "self_attn": "#1f77b4", "resid_attn_dropout": "#c5b0d5",
            "post_attention_layernorm": "#17becf", "mlp": "#2ca02c", "resid_mlp_dropout": "#98df8a",
            "sdpa": "#2ca02c", "eager": "#ff7f0e", "static": "#1f77b4", "dynamic": "#d62728"},
    # Names must carry the attn key (hf-attn-eager-... / hf-attn-sdpa-...); with the eager
    # engine a name holds "eager" twice, so only explicitly named traces pair there.
    default_pair=PairSpec("eager", "sdpa", tokens=("hf", "attn"), prefer=("nsys",)),
)


# Options and presentation are plain data and HFInstance takes (variant, device): the workload
# needs no class of its own.
HF_WORKLOAD = Workload(OPTIONS, HFInstance, PRESENTATION, check_variant)
