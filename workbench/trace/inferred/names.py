"""Kernel names as the structure finder compares them: one token per kernel.

A token is the kernel's short name (template and call arguments already cut by the reader or
``trace.names.short_kernel_name``) with trailing numeric suffixes removed: the compiler numbers
the kernels it generates (``triton_red_fused_add_mean_mul_6`` in one layer, ``..._8`` in the
first), so the same work in two layers can carry two numbers. Computed once per distinct name.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..names import short_kernel_name

_SUFFIX = re.compile(r"(?:_\d+)+$")
# Inductor's generated kernels: ``triton_<kind>_fused_<the ops it fused>_<n>``. The ops listed
# follow what the fusion swallowed, which differs between layers of one model (the first
# layer's norm fuses the embedding, a residual add joins the next layer's norm): the same
# work in two layers carries two names. Only the kind (pointwise, reduction, persistent
# reduction, template) says what such a kernel is, wherever it sits.
_GENERATED = re.compile(r"^(triton_(?:poi|red|per|tem|for))_fused_")
# The framework's elementwise and reduction kernels are a handful of templates
# (``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, ...>``) that every pointwise op
# instantiates: the template's name alone makes a residual add, a tanh and a scale one token,
# and a layer that does one op more reads as the same block. The op is the functor or the
# function whose lambda it runs (``tanh_kernel_cuda(...)::[lambda]``,
# ``launch_clamp_scalar(...)``), in both demanglers' spellings; the wrappers around it, the
# random generator, the dtypes and lambda numbers are not part of it.
_OP = re.compile(r"(?:^|[<:,\s])([A-Za-z_]\w*?(?:Functor|functor|Ops|_kernel|Kernel|_impl|Impl|_out)\w*"
                 r"|[A-Za-z_]\w*(?=\())")
_NOT_OPS = frozenset({"gpu_kernel_impl", "gpu_kernel_impl_nocast", "gpu_index_kernel", "CUDAGeneratorImpl",
                      "operator", "lambda"})


def normalized(name: str) -> str:
    """``triton_red_fused_add_mean_mul_6`` -> ``triton_red``; ``void f<4, F>(int)`` -> ``f``;
    ``gemm_64x8_4`` -> ``gemm_64x8``; ``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>,
    ...>`` -> ``vectorized_elementwise_kernel/CUDAFunctor_add``."""
    short = short_kernel_name(name)
    generated = _GENERATED.match(short)
    if generated:
        return generated.group(1)
    if "elementwise" in short or short == "reduce_kernel":
        return "/".join([short, *_ops(name, short)])
    return _SUFFIX.sub("", short) or short


def _ops(name: str, short: str) -> list[str]:
    """The ops a framework template kernel instantiates, outermost first, at most two
    (``AUnaryFunctor/MulFunctor``)."""
    found = []
    for op in _OP.findall(name):
        if op != short and op not in _NOT_OPS and op not in found:
            found.append(op)
    return found[:2]


def tokens(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel of a categorical name column: its token (int64 code) and the tokens' texts."""
    cats = [normalized(str(c)) for c in names.cat.categories]
    codes, uniq = pd.factorize(np.asarray(cats + [""], dtype=object))
    per_cat = codes.astype(np.int64)
    raw = names.cat.codes.to_numpy().astype(np.int64)
    return per_cat[raw], np.asarray(uniq, dtype=object)


# Per token, its kind (:func:`kinds`).
OTHER, POINTWISE, FUSED_NORM = 0, 1, 2


def kinds(texts: np.ndarray) -> np.ndarray:
    """Per token text: ``POINTWISE`` for an elementwise kernel of the framework's (a copy
    aside) or a generated pointwise one (the kind of a residual add), ``FUSED_NORM`` for a
    generated reduction (a norm a compiler fused with the residual add before it), else
    ``OTHER``. A framework copy is a cast, which starts a norm (its upcast) as often as it
    ends anything."""
    out = np.full(len(texts), OTHER, np.int8)
    for i, t in enumerate(str(t) for t in texts):
        if "elementwise" in t.lower() and "copy" not in t.lower() or t.startswith("triton_poi"):
            out[i] = POINTWISE
        elif t.startswith(("triton_red", "triton_per")):
            out[i] = FUSED_NORM
    return out


# Per kernel, its role at a decode step's end (:func:`roles`): a matrix multiply (the LM head),
# a reduction or a sampler's pick over its logits, an embedding's gather. A generated kernel
# whose fused ops include a matmul is one: inductor computes a decode step's one-row matmuls
# as reductions (``triton_red_fused_..._mm_...``).
NO_ROLE, GEMM, PICK, GATHER = 0, 1, 2, 3
_GEMM = re.compile(r"gemm|gemv|nvjet|cublas|^triton_\w+?_fused_(?:\w*_)?(?:mm|addmm|bmm)(?:_|$)", re.I)
# A sampler's selections first (``gatherTopK`` is a top-k, not an embedding's gather), then
# any reduction.
_SELECT = re.compile(r"arg_?max|arg_?min|topk|sort|sampl|multinomial|softmax", re.I)
_PICK = re.compile(r"reduce_kernel|reduction|^triton_(?:red|per)_", re.I)
_GATHER = re.compile(r"indexSelect|gather|embedding|index_kernel_impl", re.I)
_SCATTER = re.compile(r"index_put|index_copy|scatter", re.I)


def roles(names: pd.Series) -> np.ndarray:
    """Per kernel of the categorical ``names``, its role where a decode step ends: ``GEMM``,
    ``PICK`` (a reduction, a top-k, a sort or a sampler: argmax over the logits), ``GATHER``
    (an embedding's lookup; a KV-cache scatter is none), else ``NO_ROLE``. From each kernel's
    full name, not its token: a generated kernel's token is its kind alone, which a norm and
    a sampler's argmax share."""
    per_cat = np.zeros(len(names.cat.categories) + 1, np.int8)  # the last: no name (code -1)
    for i, name in enumerate(str(c) for c in names.cat.categories):
        per_cat[i] = (GEMM if _GEMM.search(name) else PICK if _SELECT.search(name)
                      else GATHER if _GATHER.search(name) and not _SCATTER.search(name)
                      else PICK if _PICK.search(name) else NO_ROLE)
    return per_cat[names.cat.codes.to_numpy()]
