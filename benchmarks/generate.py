"""Synthetic decode-step traces, shaped like the H200 reference captures, in both formats.

One decode step is ``step_N > layer_NN > {qkv, kv_write, attention, mlp}`` on one CPU thread,
with the kernels of the reference captures (``shared/reference-captures/h200``):

- qkv: 1 GEMM (nvjet, launched through ``cuLaunchKernelEx``)
- kv_write: 15 small aten kernels (div_floor, remainder, 2 copies, index_put; x3 for K, V and
  index-K) through ``cudaLaunchKernel`` -- or, in the ``fused`` variant, one Triton kernel
  ``fused_write`` through ``cuLaunchKernelEx``
- attention: 2 fills (``cudaLaunchKernel``), cuDNN SDPA and its lean reduction (``cuLaunchKernelEx``)
- mlp: GEMM, Triton ``mul_silu``, GEMM (all ``cuLaunchKernelEx``)

That is 23 kernels per layer (9 fused); with 32 layers, 736 kernels per step (288 fused).

Per kernel, the CPU side has a launching aten op (``cpu_op``) with one nested child op, the
launch API call and, in the nsys export, the helper driver call nsys records next to it
(``cuKernelGetName`` / ``cuKernelGetAttribute``). The GPU runs kernels in order on stream 7
as soon as they are launched and the previous kernel is done.

Formats:

- nsys SQLite: the tables and columns of ``nsys export --type sqlite`` 2025.3 (schema 3.20.3)
  for StringIds, CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME, NVTX_EVENTS
  (push/pop ranges with *registered* strings: ``text`` NULL, ``textId`` into StringIds),
  META_DATA_EXPORT, TARGET_INFO_GPU and TARGET_INFO_SYSTEM_ENV; no indexes, as nsys writes it.
- Kineto JSON: torch.profiler's layout and indentation: header with deviceProperties, then
  all CPU events (``user_annotation`` ranges, ``cpu_op``), then per kernel the ``kernel``,
  its ``ac2g`` flow end, the ``cuda_runtime``/``cuda_driver`` launch and the flow start, then
  ``gpu_user_annotation`` events, process/thread metadata and the trailer.

Everything is computed per block of steps with numpy and written with string formatting, so
a 10M-kernel trace streams out without holding the trace in memory.

    python -m benchmarks.generate --kernels 1000000 --out benchmarks/data
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LAYERS = 32
PID = 464  # the reference's process id
TID = 464
STREAM = 7
GLOBAL_PID = 281493666529280  # nsys globalPid/globalTid of the reference capture
GLOBAL_TID = 281493666530394
BASE_US = 5080807972648  # Kineto clock of the reference (us)
BASE_NS_NSYS = 15_000_000  # nsys session clock (ns)

# name (nsys demangled / short / Kineto spelling), launch API, cpu op, GPU ns, grid, block, regs, shmem
_NSYS_ELEM = (
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::BUnaryFunctor<int, int, int, "
    "at::native::binary_internal::{op}(at::TensorIteratorBase &)::[lambda() (instance 1)]::operator ()() const::"
    "[lambda() (instance 3)]::operator ()() const::[lambda(int, int) (instance 1)]>, std::array<char *, "
    "(unsigned long)2>>(int, T2, T3)"
)
_KIN_ELEM = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<int, int, int, "
    "at::native::{ns}{op}(at::TensorIteratorBase&)::{{lambda()#1}}::operator()() const::{{lambda()#3}}::operator()() const::"
    "{{lambda(int, int)#1}}>, std::array<char*, 2ul> >(int, at::native::BUnaryFunctor<int, int, int, at::native::{ns}{op}"
    "(at::TensorIteratorBase&)::{{lambda()#1}}::operator()() const::{{lambda()#3}}::operator()() const::{{lambda(int, int)#1}}>, "
    "std::array<char*, 2ul>)"
)
_COPY_NSYS = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::"
    "[lambda() (instance 3)]::operator ()() const::[lambda() (instance 4)]::operator ()() const::[lambda(long) "
    "(instance 1)], std::array<char *, (unsigned long)2>, (int)4, TrivialOffsetCalculator<(int)1, unsigned int>, "
    "TrivialOffsetCalculator<(int)1, unsigned int>, at::native::memory::LoadWithCast<(int)1>, "
    "at::native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)"
)
_COPY_KIN = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, std::array<char*, 2ul>, 4, "
    "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
    "at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, "
    "unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
    "at::native::memory::StoreWithCast<1>)"
)
_INDEX_NSYS = (
    "void at::native::index_elementwise_kernel<(int)128, (int)4, void at::native::gpu_index_kernel<void "
    "at::native::index_put_kernel_impl<at::native::OpaqueType<(int)2>>(at::TensorIterator &, c10::ArrayRef<long>, "
    "c10::ArrayRef<long>)::[lambda(char *, const char *, long) (instance 1)]>(at::TensorIteratorBase &, "
    "c10::ArrayRef<long>, c10::ArrayRef<long>, const T1 &, bool)::[lambda(int) (instance 1)]>(long, T3)"
)
_INDEX_KIN = (
    "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<"
    "at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, "
    "long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<"
    "at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, "
    "long)#1} const&, bool)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<"
    "at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, "
    "long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<"
    "at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, "
    "long)#1} const&, bool)::{lambda(int)#1})"
)
_FILL_NSYS = (
    "void at::native::vectorized_elementwise_kernel<(int)8, at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char *, (unsigned long)1>>(int, T2, T3)"
)
_FILL_KIN = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)"
)
_SDPA = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x64_1x4x1_cga1x1x1_kernel0_0"
_LEAN_ARGS = ", ".join(["unsigned int"] * 20)
_LEAN_NSYS = (
    "void cudnn::fusion::lean_reduction_kernel<(bool)0, (bool)0, (bool)0>(void *, float *, float *, float *, float *, "
    f"const float *, float *, float *, float *, float *, float *, {_LEAN_ARGS}, bool)"
)
_LEAN_KIN = (
    "void cudnn::fusion::lean_reduction_kernel<false, false, false>(void*, float*, float*, float*, float*, float const*, "
    f"float*, float*, float*, float*, float*, {_LEAN_ARGS}, bool)"
)
_GEMM = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"
_SILU = "triton_poi_fused_mul_silu_0"


@dataclass(frozen=True)
class K:
    nsys: str
    short: str
    kineto: str
    api: str  # cudaLaunchKernel | cuLaunchKernelEx
    op: str  # the aten op that launches it
    gpu_ns: int
    grid: tuple
    block: tuple
    regs: int
    shmem: int


GEMM = K(_GEMM, _GEMM, _GEMM, "cuLaunchKernelEx", "aten::mm", 3100, (4, 7, 1), (384, 1, 1), 168, 164308)
DIV = K(_NSYS_ELEM.format(op="div_floor_kernel_cuda"), "vectorized_elementwise_kernel",
        _KIN_ELEM.format(ns="binary_internal::", op="div_floor_kernel_cuda"),
        "cudaLaunchKernel", "aten::div", 1200, (1, 1, 1), (128, 1, 1), 32, 0)
REM = K(_NSYS_ELEM.format(op="remainder_kernel_cuda").replace("binary_internal::", ""), "vectorized_elementwise_kernel",
        _KIN_ELEM.format(ns="", op="remainder_kernel_cuda"),
        "cudaLaunchKernel", "aten::remainder", 1250, (1, 1, 1), (128, 1, 1), 29, 0)
COPY = K(_COPY_NSYS, "unrolled_elementwise_kernel", _COPY_KIN, "cudaLaunchKernel", "aten::copy_", 1100,
         (1, 1, 1), (128, 1, 1), 32, 0)
INDEX = K(_INDEX_NSYS, "index_elementwise_kernel", _INDEX_KIN, "cudaLaunchKernel", "aten::_index_put_impl_", 3000,
          (1, 1, 1), (128, 1, 1), 36, 0)
FUSED = K("fused_write", "fused_write", "fused_write", "cuLaunchKernelEx", "fused_write", 1300,
          (1, 1, 1), (128, 1, 1), 22, 0)
FILL = K(_FILL_NSYS, "vectorized_elementwise_kernel", _FILL_KIN, "cudaLaunchKernel", "aten::fill_", 760,
         (11, 1, 1), (128, 1, 1), 16, 0)
SDPA = K(_SDPA, _SDPA, _SDPA, "cuLaunchKernelEx", "aten::_cudnn_attention_forward", 9500, (32, 8, 1), (128, 1, 1), 166, 45376)
LEAN = K(_LEAN_NSYS, "lean_reduction_kernel", _LEAN_KIN, "cuLaunchKernelEx", "aten::_cudnn_attention_forward", 2500,
         (1, 8, 1), (256, 1, 1), 32, 16640)
SILU = K(_SILU, _SILU, _SILU, "cuLaunchKernelEx", _SILU, 1800, (56, 1, 1), (128, 1, 1), 24, 0)


def layer_template(variant: str) -> list[tuple[str, list[K]]]:
    kv = [DIV, REM, COPY, COPY, INDEX] * 3 if variant == "unfused" else [FUSED]
    return [("qkv", [GEMM]), ("kv_write", kv), ("attention", [FILL, FILL, SDPA, LEAN]), ("mlp", [GEMM, SILU, GEMM])]


def kernels_per_step(variant: str, layers: int = LAYERS) -> int:
    return layers * sum(len(ks) for _, ks in layer_template(variant))


# CPU timing of one kernel slot (ns, relative to the slot start)
SLOT = 9000  # one launching op per 9 us
OP_DUR = 7000  # launching aten op [0, 7000)
CHILD = (500, 1500)  # nested child op (aten::empty_strided / aten::view)
HELPER = (2000, 2250)  # nsys helper driver call (cuKernelGetName / cuKernelGetAttribute)
LAUNCH = (2500, 6000)  # the launch API call
RANGE_PAD = 400
GAP = 300


@dataclass
class Template:
    """One decode step, times relative to the step start (ns)."""

    kinds: list  # K per kernel
    kernel_range: np.ndarray  # index of the innermost range of each kernel
    slot: np.ndarray  # CPU slot start per kernel
    gpu_start: np.ndarray
    gpu_dur: np.ndarray
    r_name: list  # range names, in start order (parent before child)
    r_start: np.ndarray
    r_end: np.ndarray
    r_depth: np.ndarray
    r_gpu: np.ndarray  # (start, end) of the range's kernels on the GPU
    length: int  # CPU length of the step incl. gap to the next
    n_kernels: int
    n_ranges: int


def make_template(variant: str, layers: int = LAYERS) -> Template:
    kinds, k_range, slots = [], [], []
    r_name, r_start, r_end, r_depth = ["step"], [0], [0], [0]
    t = RANGE_PAD
    for layer in range(layers):
        li = len(r_name)
        r_name.append(f"layer_{layer:02d}"), r_start.append(t), r_end.append(0), r_depth.append(1)
        t += RANGE_PAD
        for rname, ks in layer_template(variant):
            ri = len(r_name)
            r_name.append(rname), r_start.append(t), r_end.append(0), r_depth.append(2)
            t += RANGE_PAD
            for k in ks:
                kinds.append(k), k_range.append(ri), slots.append(t)
                t += SLOT
            r_end[ri] = t + RANGE_PAD - GAP
            t += RANGE_PAD
        r_end[li] = t + RANGE_PAD - GAP
        t += RANGE_PAD
    r_end[0] = t + RANGE_PAD
    length = t + 2 * RANGE_PAD + 20_000
    slot = np.array(slots, dtype=np.int64)
    dur = np.array([k.gpu_ns for k in kinds], dtype=np.int64)
    ready = slot + LAUNCH[1] + 1500
    # s_i = max(ready_i, s_{i-1} + d_{i-1} + gap), vectorised
    c = np.concatenate([[0], np.cumsum(dur + 500)[:-1]])
    gpu_start = c + np.maximum.accumulate(ready - c)
    assert gpu_start[-1] + dur[-1] < length, "GPU must keep up within a step"
    k_range = np.array(k_range, dtype=np.int64)
    r_start_a, r_end_a = np.array(r_start, np.int64), np.array(r_end, np.int64)
    n_r = len(r_name)
    # GPU extent of each range: its kernels and those of its descendants
    r_gs = np.full(n_r, np.iinfo(np.int64).max)
    r_ge = np.zeros(n_r, np.int64)
    depth = np.array(r_depth)
    parent = np.full(n_r, -1)
    stack = []
    for i in range(n_r):
        while stack and depth[stack[-1]] >= depth[i]:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    for ki, ri in enumerate(k_range):
        r = ri
        while r >= 0:
            r_gs[r] = min(r_gs[r], gpu_start[ki])
            r_ge[r] = max(r_ge[r], gpu_start[ki] + dur[ki])
            r = parent[r]
    return Template(kinds, k_range, slot, gpu_start, dur, r_name, r_start_a, r_end_a, depth,
                    np.stack([r_gs, r_ge], 1), length, len(kinds), n_r)


def steps_for(kernels: int, variant: str, layers: int = LAYERS) -> int:
    return max(1, math.ceil(kernels / kernels_per_step("unfused", layers)))


def _blocks(steps: int, block: int):
    for s0 in range(0, steps, block):
        yield s0, min(steps, s0 + block)


def _step_base(origin: int, s0: int, s1: int, length: int) -> np.ndarray:
    """Start of steps s0..s1-1 (a column): a fixed stride plus a few hundred ns of drift."""
    s = np.arange(s0, s1, dtype=np.int64)
    return (origin + s * length + (s * 7919) % 997)[:, None]


def _jitter(rng: np.random.Generator, dur: np.ndarray, n_steps: int) -> np.ndarray:
    """Per-kernel GPU durations with +-8% noise (never longer than the slot allows)."""
    f = rng.uniform(0.84, 1.0, size=(n_steps, len(dur)))
    return np.maximum((dur[None, :] * f).astype(np.int64), 500)


# ---------------------------------------------------------------------------------- nsys

NSYS_DDL = {
    "StringIds": "CREATE TABLE StringIds (\n    id                          INTEGER   NOT NULL   PRIMARY KEY,\n"
                 "    value                       TEXT      NOT NULL\n)",
    "CUPTI_ACTIVITY_KIND_KERNEL": """CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start                       INTEGER   NOT NULL,
    end                         INTEGER   NOT NULL,
    deviceId                    INTEGER   NOT NULL,
    contextId                   INTEGER   NOT NULL,
    greenContextId              INTEGER,
    streamId                    INTEGER   NOT NULL,
    correlationId               INTEGER,
    globalPid                   INTEGER,
    demangledName               INTEGER   NOT NULL,
    shortName                   INTEGER   NOT NULL,
    mangledName                 INTEGER,
    launchType                  INTEGER,
    cacheConfig                 INTEGER,
    registersPerThread          INTEGER   NOT NULL,
    gridX                       INTEGER   NOT NULL,
    gridY                       INTEGER   NOT NULL,
    gridZ                       INTEGER   NOT NULL,
    blockX                      INTEGER   NOT NULL,
    blockY                      INTEGER   NOT NULL,
    blockZ                      INTEGER   NOT NULL,
    staticSharedMemory          INTEGER   NOT NULL,
    dynamicSharedMemory         INTEGER   NOT NULL,
    localMemoryPerThread        INTEGER   NOT NULL,
    localMemoryTotal            INTEGER   NOT NULL,
    gridId                      INTEGER   NOT NULL,
    sharedMemoryExecuted        INTEGER,
    graphNodeId                 INTEGER,
    sharedMemoryLimitConfig     INTEGER
)""",
    "CUPTI_ACTIVITY_KIND_RUNTIME": """CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start                       INTEGER   NOT NULL,
    end                         INTEGER   NOT NULL,
    eventClass                  INTEGER   NOT NULL,
    globalTid                   INTEGER,
    correlationId               INTEGER,
    nameId                      INTEGER   NOT NULL,
    returnValue                 INTEGER   NOT NULL,
    callchainId                 INTEGER
)""",
    "NVTX_EVENTS": """CREATE TABLE NVTX_EVENTS (
    start                       INTEGER   NOT NULL,
    end                         INTEGER,
    eventType                   INTEGER   NOT NULL,
    rangeId                     INTEGER,
    category                    INTEGER,
    color                       INTEGER,
    text                        TEXT,
    globalTid                   INTEGER,
    endGlobalTid                INTEGER,
    textId                      INTEGER,
    domainId                    INTEGER,
    uint64Value                 INTEGER,
    int64Value                  INTEGER,
    doubleValue                 REAL,
    uint32Value                 INTEGER,
    int32Value                  INTEGER,
    floatValue                  REAL,
    jsonTextId                  INTEGER,
    jsonText                    TEXT,
    binaryData                  TEXT
)""",
    "META_DATA_EXPORT": "CREATE TABLE META_DATA_EXPORT (\n    name                        TEXT      NOT NULL,\n"
                        "    value                       TEXT\n)",
    "TARGET_INFO_SYSTEM_ENV": "CREATE TABLE TARGET_INFO_SYSTEM_ENV (\n    globalVid                   INTEGER,\n"
                              "    devStateName                TEXT      NOT NULL,\n    name                        TEXT      NOT NULL,\n"
                              "    nameEnum                    INTEGER   NOT NULL,\n    value                       TEXT      NOT NULL\n)",
    "TARGET_INFO_GPU": "CREATE TABLE TARGET_INFO_GPU (\n    vmId INTEGER NOT NULL,\n    id INTEGER NOT NULL,\n    name TEXT,\n"
                       "    busLocation TEXT,\n    chipName TEXT,\n    computeMajor INTEGER,\n    computeMinor INTEGER\n)",
}


def write_nsys(path: Path, kernels: int, variant: str = "unfused", layers: int = LAYERS, seed: int = 0) -> dict:
    """Write an nsys-style SQLite export; returns counts."""
    tpl = make_template(variant, layers)
    steps = steps_for(kernels, variant, layers)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    con = sqlite3.connect(tmp)
    con.execute("pragma journal_mode=off")
    con.execute("pragma synchronous=off")
    con.execute("pragma page_size=4096")
    for ddl in NSYS_DDL.values():
        con.execute(ddl)
    # Registered strings: kernel names, API names, NVTX texts.
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings)
        return strings[s]

    for s in ("GpuMetrics", "SocMetrics"):
        sid(s)
    k_dem = np.array([sid(k.nsys) for k in tpl.kinds], np.int64)
    k_short = np.array([sid(k.short) for k in tpl.kinds], np.int64)
    k_mangled = np.array([sid("_Z" + k.short) for k in tpl.kinds], np.int64)
    launch_rt = sid("cudaLaunchKernel_v7000")
    launch_ex = sid("cuLaunchKernelEx")
    helper_rt = sid("cuKernelGetName")
    helper_ex = sid("cuKernelGetAttribute")
    is_ex = np.array([k.api == "cuLaunchKernelEx" for k in tpl.kinds])
    r_text = [sid(n) for n in tpl.r_name[1:]]  # step names registered per step below
    kcols = [(k.grid + k.block + (k.regs, k.shmem)) for k in tpl.kinds]
    kc = np.array(kcols, np.int64)

    rng = np.random.default_rng(seed)
    nk = tpl.n_kernels
    corr_per_step = 2 * nk + 4
    n_kern = n_api = n_nvtx = 0
    block = max(1, 200_000 // nk)
    for s0, s1 in _blocks(steps, block):
        ns = s1 - s0
        base = _step_base(BASE_NS_NSYS, s0, s1, tpl.length)
        corr_base = (1000 + np.arange(s0, s1, dtype=np.int64) * corr_per_step)[:, None]
        kcorr = corr_base + 2 * np.arange(nk)[None, :] + 1
        gs = base + tpl.gpu_start[None, :]
        ge = gs + _jitter(rng, tpl.gpu_dur, ns)
        slot = base + tpl.slot[None, :]
        one = np.ones((ns, 1), np.int64)
        kn = ns * nk
        if s1 == steps:
            keep = kernels - s0 * nk if variant == "unfused" else kn
        else:
            keep = kn
        keep = min(keep, kn)
        cols = [
            gs.ravel(), ge.ravel(), np.zeros(kn, np.int64), np.ones(kn, np.int64), np.zeros(kn, np.int64),
            np.full(kn, STREAM, np.int64), kcorr.ravel(), np.full(kn, GLOBAL_PID, np.int64),
            (one * k_dem).ravel(), (one * k_short).ravel(), (one * k_mangled).ravel(),
            np.ones(kn, np.int64), np.ones(kn, np.int64), (one * kc[:, 6]).ravel(),
            (one * kc[:, 0]).ravel(), (one * kc[:, 1]).ravel(), (one * kc[:, 2]).ravel(),
            (one * kc[:, 3]).ravel(), (one * kc[:, 4]).ravel(), (one * kc[:, 5]).ravel(),
            np.zeros(kn, np.int64), (one * kc[:, 7]).ravel(), np.zeros(kn, np.int64),
            np.full(kn, 250871808, np.int64), (1 + np.arange(s0 * nk, s0 * nk + kn)),
            np.full(kn, 32768, np.int64),
        ]
        rows = list(zip(*[c[:keep].tolist() for c in cols]))
        con.executemany(
            "insert into CUPTI_ACTIVITY_KIND_KERNEL values (" + ",".join("?" * 26) + ",NULL,0)", rows
        )
        n_kern += len(rows)
        # API: helper + launch per kernel, time order
        h_s = slot + HELPER[0]
        l_s = slot + LAUNCH[0]
        exm = one.astype(bool) & is_ex[None, :]
        a_start = np.stack([h_s, l_s], -1).reshape(-1, 2)[:keep].ravel()
        a_end = np.stack([slot + HELPER[1], slot + LAUNCH[1]], -1).reshape(-1, 2)[:keep].ravel()
        a_corr = np.stack([kcorr - 1, kcorr], -1).reshape(-1, 2)[:keep].ravel()
        a_name = np.stack([np.where(exm, helper_ex, helper_rt), np.where(exm, launch_ex, launch_rt)], -1)
        a_name = a_name.reshape(-1, 2)[:keep].ravel()
        a_cls = np.stack([np.ones_like(exm, np.int64), exm.astype(np.int64)], -1).reshape(-1, 2)[:keep].ravel()
        na = len(a_start)
        rows = list(zip(a_start.tolist(), a_end.tolist(), a_cls.tolist(), [GLOBAL_TID] * na,
                        a_corr.tolist(), a_name.tolist()))
        con.executemany("insert into CUPTI_ACTIVITY_KIND_RUNTIME values (?,?,?,?,?,?,0,NULL)", rows)
        n_api += na
        # NVTX push/pop ranges, registered strings
        r_s = (base + tpl.r_start[None, :]).ravel()
        r_e = (base + tpl.r_end[None, :]).ravel()
        text = np.array([[sid(f"step_{s}")] + r_text for s in range(s0, s1)], np.int64).ravel()
        nr = len(r_s)
        if keep < kn:  # last partial step: drop ranges that start after the last kept kernel
            last = (slot.ravel()[keep - 1])
            m = r_s <= last
            r_s, r_e, text = r_s[m], r_e[m], text[m]
            nr = len(r_s)
        rows = list(zip(r_s.tolist(), r_e.tolist(), [GLOBAL_TID] * nr, text.tolist()))
        con.executemany(
            "insert into NVTX_EVENTS (start, end, eventType, color, globalTid, textId, domainId) "
            "values (?,?,59,255,?,?,0)", rows
        )
        n_nvtx += nr
    con.executemany("insert into StringIds values (?,?)", [(i, s) for s, i in strings.items()])
    con.executemany("insert into META_DATA_EXPORT values (?,?)", [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", "2025.3.2.0"),
        ("EXPORT_SCHEMA_VERSION", "3.20.3"), ("EXPORT_PARAM_INPUT_FILE", "synthetic.nsys-rep"),
    ])
    con.execute("insert into TARGET_INFO_SYSTEM_ENV values (0,'', 'CudaDriverVersion', 0, '13000')")
    con.execute("insert into TARGET_INFO_GPU values (281474976710656, 0, 'NVIDIA H200', '0000:00:06.0', 'GH100', 9, 0)")
    con.commit()
    con.close()
    os.replace(tmp, path)
    return {"kernels": n_kern, "api": n_api, "ranges": n_nvtx, "steps": steps, "bytes": path.stat().st_size}


# ---------------------------------------------------------------------------------- Kineto

_HEADER = """
  {
    "schemaVersion": 1,
    "deviceProperties": [
    {
      "id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132
    , "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }
    ],
      "trace_id": "A1D03876E0644BC2888FDDC0C8833238",
      "cuda_driver_version": 13000,
      "cuda_runtime_version": 13000,
      "cupti_version": 130001,
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1790857026000000000,
  "traceEvents": [
"""

_CPU = """  {
    "ph": "X", "cat": "%s", "name": "%s", "pid": 464, "tid": 464,
    "ts": %d.%03d, "dur": %d.%03d,
    "args": {
      "External id": %d,"Record function id": 0, "Ev Idx": %d
    }
  },
"""

_KERNEL = """  {
    "ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7,
    "ts": %%d.%%03d, "dur": %%d.%%03d,
    "args": {
      "External id": %%d,      "queued": 0, "device": 0, "context": 1,      "stream": 7, "correlation": %%d,      "registers per thread": %d,      "shared memory": %d,      "blocks per SM": %s,      "warps per SM": %s,      "grid": [%d, %d, %d],      "block": [%d, %d, %d],      "est. achieved occupancy %%%%": 0
    }
  },
  {
    "ph": "f", "id": %%d, "pid": 0, "tid": 7, "ts": %%d.%%03d,
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  },
  {
    "ph": "X", "cat": "%s", "name": "%s", "pid": 464, "tid": 464,
    "ts": %%d.%%03d, "dur": %%d.%%03d,
    "args": {
      "External id": %%d,      "cbid": %d, "correlation": %%d
    }
  },
  {
    "ph": "s", "id": %%d, "pid": 464, "tid": 464, "ts": %%d.%%03d,
    "cat": "ac2g", "name": "ac2g"
  },
"""

_GPU_ANN = """  {
    "ph": "X", "cat": "gpu_user_annotation", "name": "%s", "pid": 0, "tid": 7,
    "ts": %d.%03d, "dur": %d.%03d,
    "args": {
      "External id": %d
    }
  },
"""

_TRAILER = """  {
    "name": "process_name", "ph": "M", "ts": %(ts)s, "pid": 464, "tid": 0,
    "args": {
      "name": "python3"
    }
  },
  {
    "name": "process_name", "ph": "M", "ts": %(ts)s, "pid": 0, "tid": 0,
    "args": {
      "name": "python3"
    }
  },
  {
    "name": "process_labels", "ph": "M", "ts": %(ts)s, "pid": 0, "tid": 0,
    "args": {
      "labels": "GPU 0"
    }
  },
  {
    "name": "thread_name", "ph": "M", "ts": %(ts)s, "pid": 0, "tid": 7,
    "args": {
      "name": "stream 7 "
    }
  },
  {
    "name": "thread_name", "ph": "M", "ts": %(ts)s, "pid": 464, "tid": 464,
    "args": {
      "name": "thread 464 (python3)"
    }
  },
  {
    "ph": "X", "cat": "Trace", "ts": %(ts)s, "dur": %(dur)s,
    "pid": "Spans", "tid": "PyTorch Profiler",
    "name": "PyTorch Profiler (0)",
    "args": {
      "Op count": 0
    }
  },
  {
    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",
    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": %(ts)s
  },
  {
    "name": "Record Window End", "ph": "i", "s": "g",
    "pid": "", "tid": "", "ts": %(end)s
  }
  ],
  "traceName": "%(name)s"
}
"""

_CHILD_OPS = ("aten::empty_strided", "aten::view")


def _us(ns: np.ndarray):
    return (ns // 1000).tolist(), (ns % 1000).tolist()


def write_kineto(path: Path, kernels: int, variant: str = "unfused", layers: int = LAYERS, seed: int = 0,
                 step_prefix: str = "ProfilerStep#") -> dict:
    """Write a torch.profiler-style Kineto JSON trace (uncompressed); returns counts.

    Steps are named ``ProfilerStep#N`` as torch.profiler's ``schedule``/``prof.step()`` names
    them (Holistic Trace Analysis finds iterations only by that name); the nsys export names
    them ``step_N`` like the reference capture. Ranges below the step are the same.
    """
    tpl = make_template(variant, layers)
    steps = steps_for(kernels, variant, layers)
    nk, nr = tpl.n_kernels, tpl.n_ranges
    tmp = path.with_name(path.name + ".tmp")
    rng = np.random.default_rng(seed)
    # CPU events of one step, in start order: ranges, launching ops and their child ops.
    cpu: list[tuple[int, int, str, str]] = []  # (start, -end, cat, name)
    for i in range(nr):
        cpu.append((int(tpl.r_start[i]), -int(tpl.r_end[i]), "user_annotation", tpl.r_name[i]))
    for i, k in enumerate(tpl.kinds):
        s = int(tpl.slot[i])
        cpu.append((s, -(s + OP_DUR), "cpu_op", k.op))
        cpu.append((s + CHILD[0], -(s + CHILD[1]), "cpu_op", _CHILD_OPS[i % 2]))
    order = sorted(range(len(cpu)), key=lambda j: (cpu[j][0], cpu[j][1]))
    c_start = np.array([cpu[j][0] for j in order], np.int64)
    c_dur = np.array([-cpu[j][1] - cpu[j][0] for j in order], np.int64)
    c_cat = [cpu[j][2] for j in order]
    c_name = [cpu[j][3] for j in order]
    is_step = np.array([cpu[j][3] == "step" for j in order])
    n_cpu = len(order)
    # External id of each kernel = that of its launching op
    op_pos = {}
    for pos, j in enumerate(order):
        if cpu[j][2] == "cpu_op" and j >= nr and (j - nr) % 2 == 0:
            op_pos[(j - nr) // 2] = pos
    k_ext = np.array([op_pos[i] for i in range(nk)], np.int64)
    k_fmt = []
    for k in tpl.kinds:
        blocks = k.grid[0] * k.grid[1] * k.grid[2]
        warps = blocks * (k.block[0] * k.block[1] * k.block[2] // 32)
        cat = "cuda_driver" if k.api == "cuLaunchKernelEx" else "cuda_runtime"
        api = k.api
        cbid = 652 if k.api == "cuLaunchKernelEx" else 211
        k_fmt.append(_KERNEL % ((k.kineto, k.regs, k.shmem, f"{blocks / 132:.6f}", f"{warps / 132:.6f}")
                                + k.grid + k.block + (cat, api, cbid)))

    n_events = 0
    counts = {"kernels": 0, "ranges": 0, "cpu_ops": 0, "api": 0}
    block = max(1, 100_000 // nk)
    t0_us = BASE_US
    base_ns = BASE_US * 1000
    with open(tmp, "w", buffering=16 << 20) as fh:
        fh.write(_HEADER)
        # 1. CPU events
        last_keep = {}
        for s0, s1 in _blocks(steps, block):
            ns = s1 - s0
            base = _step_base(base_ns, s0, s1, tpl.length)
            st = (base + c_start[None, :])
            ext = (1 + np.arange(s0, s1, dtype=np.int64)[:, None] * n_cpu + np.arange(n_cpu)[None, :])
            stw, stf = _us(st.ravel())
            dw, df = _us(np.broadcast_to(c_dur, (ns, n_cpu)).ravel())
            ext_l = ext.ravel().tolist()
            names = []
            for s in range(s0, s1):
                names.extend(f"{step_prefix}{s}" if st_ else n for st_, n in zip(is_step, c_name))
            cats = c_cat * ns
            limit = len(ext_l)
            if s1 == steps and variant == "unfused":
                keep_k = kernels - s0 * nk
                if keep_k < ns * nk:  # partial last step: stop after the last kept kernel's ops
                    last_slot = int((base.ravel()[-1]) + tpl.slot[(keep_k - 1) % nk])
                    limit = int(np.searchsorted(st.ravel(), last_slot + CHILD[0], side="right"))
                    last_keep["k"] = keep_k
            fh.write("".join([_CPU % (c, n, a, b, e, f, x, x - 1) for c, n, a, b, e, f, x in
                              zip(cats[:limit], names[:limit], stw[:limit], stf[:limit], dw[:limit], df[:limit], ext_l[:limit])]))
            n_events += limit
            counts["cpu_ops"] += sum(1 for c in cats[:limit] if c == "cpu_op")
            counts["ranges"] += sum(1 for c in cats[:limit] if c != "cpu_op")
        # 2. GPU activities with their launches and flows
        corr_per_step = 2 * nk + 4
        for s0, s1 in _blocks(steps, block):
            ns = s1 - s0
            base = _step_base(base_ns, s0, s1, tpl.length)
            gs = base + tpl.gpu_start[None, :]
            gd = _jitter(rng, tpl.gpu_dur, ns)
            corr = (1000 + np.arange(s0, s1, dtype=np.int64) * corr_per_step)[:, None] + 2 * np.arange(nk)[None, :] + 1
            ext = (1 + np.arange(s0, s1, dtype=np.int64)[:, None] * n_cpu + k_ext[None, :])
            ls = base + tpl.slot[None, :] + LAUNCH[0]
            keep = ns * nk
            if s1 == steps and "k" in last_keep:
                keep = last_keep["k"]
            gsw, gsf = _us(gs.ravel()[:keep])
            gdw, gdf = _us(gd.ravel()[:keep])
            lsw, lsf = _us(ls.ravel()[:keep])
            ldw, ldf = LAUNCH[1] - LAUNCH[0], 0
            ldw, ldf = ldw // 1000, ldw % 1000
            fm = (k_fmt * ns)[:keep]
            c = corr.ravel()[:keep].tolist()
            x = ext.ravel()[:keep].tolist()
            fh.write("".join([f % (a, b, d, e, xi, ci, ci, a, b, g, h, ldw, ldf, xi, ci, ci, g, h)
                              for f, a, b, d, e, xi, ci, g, h in zip(fm, gsw, gsf, gdw, gdf, x, c, lsw, lsf)]))
            n_events += 4 * keep
            counts["kernels"] += keep
            counts["api"] += keep
        # 3. gpu_user_annotation (the ranges on the GPU timeline)
        for s0, s1 in _blocks(steps, block):
            ns = s1 - s0
            base = _step_base(base_ns, s0, s1, tpl.length)
            gs = (base + tpl.r_gpu[None, :, 0]).ravel()
            gd = np.broadcast_to(tpl.r_gpu[:, 1] - tpl.r_gpu[:, 0], (ns, nr)).ravel()
            names = []
            for s in range(s0, s1):
                names.append(f"{step_prefix}{s}")
                names.extend(tpl.r_name[1:])
            if s1 == steps and "k" in last_keep:
                break  # a partial step has no complete GPU annotations
            a, b = _us(gs)
            d, e = _us(gd)
            x = (1 + np.arange(s0, s1, dtype=np.int64)[:, None] * n_cpu + np.arange(nr)[None, :]).ravel().tolist()
            fh.write("".join([_GPU_ANN % t for t in zip(names, a, b, d, e, x)]))
            n_events += len(names)
        end_ns = base_ns + steps * tpl.length
        fh.write(_TRAILER % {"ts": f"{t0_us}.000", "dur": f"{(end_ns - base_ns) // 1000}.000",
                             "end": f"{end_ns // 1000}.{end_ns % 1000:03d}", "name": str(path)})
        n_events += 8
    os.replace(tmp, path)
    counts.update(events=n_events, steps=steps, bytes=path.stat().st_size)
    return counts


def generate(kernels: int, out: Path, variant: str = "unfused", formats=("nsys", "kineto"), force=False) -> dict:
    """Write ``<out>/<variant>-<kernels>/{trace.sqlite, kineto/trace.json}``; skip existing files."""
    d = out / f"{variant}-{kernels}"
    (d / "kineto").mkdir(parents=True, exist_ok=True)
    info = {}
    if "nsys" in formats:
        p = d / "trace.sqlite"
        if force or not p.exists():
            t = time.perf_counter()
            info["nsys"] = write_nsys(p, kernels, variant)
            info["nsys"]["seconds"] = round(time.perf_counter() - t, 2)
        info["nsys_path"] = str(p)
    if "kineto" in formats:
        # HTA reads a directory of rank traces: the Kineto file sits alone in kineto/
        p = d / "kineto" / "rank-0.pt.trace.json"
        if force or not p.exists():
            t = time.perf_counter()
            info["kineto"] = write_kineto(p, kernels, variant)
            info["kineto"]["seconds"] = round(time.perf_counter() - t, 2)
        info["kineto_path"] = str(p)
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--variant", choices=["unfused", "fused"], default="unfused")
    ap.add_argument("--formats", default="nsys,kineto")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    print(generate(a.kernels, a.out, a.variant, tuple(a.formats.split(",")), a.force))


if __name__ == "__main__":
    main()
