"""Names and limits that the capture side and the views share: which engines exist, and how
closely two runs' outputs must agree to be called equal. Plain data, importable from any
layer (the views must not import the capture code to learn them)."""

from __future__ import annotations

VERSION = "0.1.0"  # the package's version (``workbench.__version__``)

ENGINE_KINDS = ("eager", "compile", "cudagraph", "tensorrt")
CAPTURE_BACKENDS = ("torch", "nsys")

# Largest logit difference still called "equal", relative to the logits' magnitude (>= 1).
OUTPUT_TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}

# Which module paths get a range by default (``annotate_modules``, ``workbench capture --modules``,
# and the ranges made from the compiler's provenance for compiled code): each decoder layer,
# its direct children, the embeddings, the final norm and the head. Matched with re.search.
MODULE_LAYER_PATH = r"(?:layers|layer|h|blocks|block)\.\d+"
_OUTSIDE_LAYERS = r"^(?!(?:.*\.)?\d+\.)"  # no numbered module on the path: not a layer's part
MODULE_RANGES = (
    rf"(?:^|\.){MODULE_LAYER_PATH}$",  # a decoder layer: model.layers.3, transformer.h.3
    rf"(?:^|\.){MODULE_LAYER_PATH}\.[^.]+$",  # its direct children: self_attn, mlp, input_layernorm
    _OUTSIDE_LAYERS + r"(?:.*\.)?(?:embed_tokens|wte|wpe|word_embeddings|position_embeddings|embed_positions"
                      r"|embed_in)$",
    _OUTSIDE_LAYERS + r"(?:.*\.)?(?:norm|ln_f|final_layernorm|final_layer_norm|norm_f)$",  # the final norm
    _OUTSIDE_LAYERS + r"(?:.*\.)?(?:lm_head|embed_out)$",  # the head
)
