"""The fused KV write: one Triton kernel per layer writes K, V and index-K into the paged cache.

It is exposed as the operator ``workbench::kv_write_fused`` so that (1) torch.compile treats
it as one opaque, in-place op instead of breaking the graph, and (2) torch.profiler records it
as one ``cpu_op`` on CPU, where the interpreted Triton kernel (``TRITON_INTERPRET=1``) launches
nothing a profiler could see. On a GPU the same op launches exactly one kernel,
``_kv_write_fused``, which is what Nsight Systems and Kineto attribute to ``kv_write``.

Where Triton cannot run (no Triton, or CPU without the interpreter) the op writes with one
``index_copy_`` per cache instead; ``implementation(device)`` says which path runs and the
capture manifest records it. The interpreter copies tensors through the host, so it must not
be set on a GPU machine (it cannot run inside CUDA graph capture).
"""

from __future__ import annotations

import functools

import torch

from .. import settings

OP_NAME = "workbench::kv_write_fused"


def implementation(device: torch.device) -> str:
    """Which path writes on ``device``: "triton" (compiled kernel), "triton-interpreter"
    (``TRITON_INTERPRET=1``: numpy on the host, right for CPU tests, useless for timing) or
    "torch" (the fallback where Triton cannot run)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "torch"
    if settings.read(settings.TRITON_INTERPRET) == "1":
        return "triton-interpreter"
    return "triton" if device.type == "cuda" else "torch"


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _kv_write_fused(slots, k, v, ik, k_cache, v_cache, ik_cache,
                        k_tok_stride, v_tok_stride, ik_tok_stride,
                        page_stride, row_stride, ik_page_stride, ik_row_stride,
                        PAGE: tl.constexpr, KV: tl.constexpr, IDX: tl.constexpr,
                        BLOCK_KV: tl.constexpr, BLOCK_IDX: tl.constexpr):
        t = tl.program_id(0)
        slot = tl.load(slots + t).to(tl.int64)
        # The unfused path spends four kernels per tensor on exactly these two lines.
        page = slot // PAGE
        offset = slot % PAGE
        cols = tl.arange(0, BLOCK_KV)
        live = cols < KV
        dst = page * page_stride + offset * row_stride + cols
        tl.store(k_cache + dst, tl.load(k + t * k_tok_stride + cols, mask=live), mask=live)
        tl.store(v_cache + dst, tl.load(v + t * v_tok_stride + cols, mask=live), mask=live)
        icols = tl.arange(0, BLOCK_IDX)
        ilive = icols < IDX
        idst = page * ik_page_stride + offset * ik_row_stride + icols
        tl.store(ik_cache + idst, tl.load(ik + t * ik_tok_stride + icols, mask=ilive), mask=ilive)

    return _kv_write_fused, triton.next_power_of_2


def _write(slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ik: torch.Tensor,
           k_cache: torch.Tensor, v_cache: torch.Tensor, ik_cache: torch.Tensor) -> None:
    """Write token rows ``k``, ``v`` [n, H, D] and ``ik`` [n, I] at cache ``slots`` [n]."""
    n = slots.shape[0]
    page, heads, dim = k_cache.shape[1:]
    kv, idx = heads * dim, ik_cache.shape[-1]
    if implementation(slots.device) == "torch":
        rows = slots.long()
        k_cache.view(-1, kv).index_copy_(0, rows, k.reshape(n, kv))
        v_cache.view(-1, kv).index_copy_(0, rows, v.reshape(n, kv))
        ik_cache.view(-1, idx).index_copy_(0, rows, ik.reshape(n, idx))
        return
    kernel, pow2 = _kernel()
    kernel[(n,)](slots, k, v, ik, k_cache, v_cache, ik_cache,
                 k.stride(0), v.stride(0), ik.stride(0),
                 k_cache.stride(0), k_cache.stride(1), ik_cache.stride(0), ik_cache.stride(1),
                 PAGE=page, KV=kv, IDX=idx, BLOCK_KV=pow2(kv), BLOCK_IDX=pow2(idx))


# Registered with the low-level Library API rather than torch.library.custom_op: a mutating
# custom_op spends ~200 us of Python per call on CPU (measured), more than the 15 aten launches
# it replaces; a schema-declared op costs about what an aten op does. The (a!) annotations
# tell torch.compile the op writes the caches in place.
_lib = torch.library.Library("workbench", "FRAGMENT")
_lib.define("kv_write_fused(Tensor slots, Tensor k, Tensor v, Tensor ik, "
            "Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor(c!) ik_cache) -> ()")
_lib.impl("kv_write_fused", _write, "CompositeExplicitAutograd")


@torch.library.register_fake(OP_NAME, lib=_lib)
def _(slots, k, v, ik, k_cache, v_cache, ik_cache) -> None:
    return None
