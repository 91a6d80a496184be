"""Decode steps and layers inferred from a kernel stream, for traces with no ranges to say them.

Per GPU (each ``(pid, device)``, kernels in start order, one token per kernel: :mod:`.names`):

1. **Steps.** Where one CUDA graph of one size is replayed again and again (holding most of
   the replayed kernels), each replay is a step (:func:`.replays.replay_steps`): a program
   that captured its decode step replays it once a step. Else the stream's step period ``P``
   (:func:`.periods.step_period`); where that period is one layer (a step of identical
   layers and nothing else, or steps whose kernels vary more than their layers do), the
   step is the multiple of it, or the spacing of a token recurring once a step, whose gaps
   stand out (:func:`.boundaries.widen`). A step starts
   where the evidence of a boundary is strongest at the same place of every period: a CUDA-graph
   launch's first kernel, else the GPU's idle gap before the kernel plus the host's gap before
   its launch (the host waits for the token between steps), the median over the periods;
   where the kernels between one step's layers and the next one's hold the step's pick of its
   token (a reduction after the LM head's matmul, before the next embedding), right after it
   (:func:`.boundaries.starts`): what follows prepares the next step's inputs. From
   that start, each next step starts at the same two-kernel anchor nearest one period later
   (within a quarter period; exactly one period later where the anchor is missing), so steps
   of varying length stay aligned. A last step shorter than three quarters of a period (the
   window cut it) and the kernels before the first step are in no step; a first step that
   runs kernels no later step does is the prefill (:func:`.boundaries.take_prefill`). Where
   this reading is unsure (steps whose lengths vary: a mixture of experts' loop over the hit
   experts), the steps are placed by the kernels that run once a step (:mod:`.anchored`), and
   the surer reading is kept.
2. **Layers.** Steps with the same kernels (tokens, in order) share one analysis: the
   repeating block of :func:`.periods.layer_block`, its blocks numbered 0, 1, ... in order; the
   kernels before the first block and after the last are the step's prologue and epilogue (in
   the step, in no layer). A hint of ``layers`` blocks prefers the block that repeats that many
   times, or splits each block in two where half as many repeat (a hybrid whose period is two
   layers). With no hint, a block splits in two where a long run of its first kernels recurs
   inside it (``periods.PAIRED``: Qwen2-MoE's dense and MoE layers share their norms and attention).
   It splits where that run recurs, else where the block's first kernel recurs nearest its
   middle. Where no block
   repeats exactly, or each exact block holds several layers' anchors (compiled code whose
   first of every few layers does one launch more), the layers are found by their anchors
   (:func:`.periods.anchored_layers`). A run after the last layer that repeats once per layer
   is the layers' own work deferred (a compiler's writes to a static cache at the graph's
   end): its ``j``-th repeat is layer ``j``'s (:func:`_deferred`).

Nothing here reads a range: real ranges always win where a trace has them (:mod:`.ranges`
puts the inferred ones only around kernels no real range holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..schema import Trace
from .names import FUSED_NORM, POINTWISE, kinds, roles, tokens
from .boundaries import (boundary, replay_starts, room as layer_room, roomy_widens, starts as step_starts,
                         take_prefill, widen)
from .anchored import anchored_steps, holds_once
from .replays import replay_steps
from .periods import WINDOW, anchored_layers, common_prefix, layer_block, mismatch, pair_cut, step_period

# Exactly repeating blocks that cover less of a step than this are no layers (a few layers
# alike among others that differ): the anchors then say where the layers are.
COVERED = 0.7
# Deferred per-layer runs after the last layer (:func:`_deferred`): at least this many layers,
# blocks of at most this many kernels.
DEFERRED_LAYERS, DEFERRED_BLOCK = 4, 3
# The boundary strengths a step's layers are placed by: the median over this many alike steps.
MEDIAN_STEPS = 64
# Layers found by their anchors inside exactly repeating blocks of several: the longest inner
# one at most this many times the shortest (compiled layers differ by a launch or three in
# 10-14 (inner layers: 8% at most); a short op repeated inside a layer, three KV-cache writes
# then the attention, by 60% and more).
ALIKE = 1.3
# A reading by the stream's period less confident than this (the share of step kernels in the
# commonest sequence times the share in layers), or whose steps are mostly unlike, is checked
# against the reading by the kernels that run once a step, and the surer one kept.
UNSURE = 0.5
COLUMNS = ["name", "start", "end", "device", "pid", "graph", "correlation", "launch_start", "launch_end"]


@dataclass
class Structure:
    """Per kernel (row of the kernels table): ``step`` (inferred step, numbered per GPU from 0;
    -1: in none; ``boundaries.PREFILL_STEP``: the prefill's) and ``layer`` (-1: in none).
    ``period`` kernels per step and ``block`` per layer (the commonest), ``layers`` per step,
    ``steps`` (on the GPU with most), ``confidence`` (the share of step kernels whose step has as
    many layers as the commonest sequence, times the share of their kernels in layers) and
    ``rests_on``, the evidence in words."""

    step: np.ndarray
    layer: np.ndarray
    steps: int = 0
    period: int = 0
    block: int = 0
    layers: int = 0
    confidence: float = 0.0
    rests_on: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"steps": self.steps, "kernels_per_step": self.period, "layers": self.layers,
                "kernels_per_layer": self.block, "confidence": round(self.confidence, 4),
                "rests_on": "; ".join(self.rests_on)}


def infer(trace: Trace, layers: int | None = None) -> Structure:
    """The inferred steps and layers of a trace's kernels (see the module docstring)."""
    return infer_kernels(trace.columns("kernels", COLUMNS), layers)


def infer_kernels(k: pd.DataFrame, layers: int | None = None) -> Structure:
    """:func:`infer` on a kernels table (rows as in the trace; the columns of ``COLUMNS``)."""
    n = len(k)
    out = Structure(np.full(n, -1, np.int64), np.full(n, -1, np.int64))
    if not n:
        return out
    tok, texts = tokens(k["name"])
    kind = kinds(texts)
    role = roles(k["name"])
    group = gpus(k)
    order = np.lexsort((k["start"].to_numpy(), group))
    bounds = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1], True])
    best = None
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        found = _one_gpu(tok[rows], role[rows], _cols(k, rows), layers, kind)
        if found is None:
            continue
        step, layer, info = found
        out.step[rows], out.layer[rows] = step, layer
        if best is None or info["steps"] > best["steps"]:
            best = info
    if best is not None:
        out.steps, out.period, out.block, out.layers = best["steps"], best["period"], best["block"], best["layers"]
        out.confidence, out.rests_on = best["confidence"], best["rests_on"]
    return out


def gpus(k: pd.DataFrame) -> np.ndarray:
    """Per kernel, its GPU: one code per ``(pid, device)`` (a factorized int64 key: a
    MultiIndex of a million rows costs a second to factorize)."""
    pid, dev = k["pid"].to_numpy().astype(np.int64), k["device"].to_numpy().astype(np.int64)
    return pd.factorize(pd.factorize(pid)[0].astype(np.int64) * (int(dev.max(initial=0)) + 2) + dev + 1)[0]


def _cols(k: pd.DataFrame, rows: np.ndarray) -> dict[str, np.ndarray]:
    return {c: k[c].to_numpy()[rows] for c in COLUMNS[1:]}


def _one_gpu(tok: np.ndarray, role: np.ndarray, c: dict[str, np.ndarray], hint: int | None, kind: np.ndarray):
    """Steps and layers of one GPU's tokens ``tok`` (columns ``c``); ``role``: per kernel, its
    role (:func:`.names.roles`); ``kind``: per token, its kind (:func:`.names.kinds`). The
    reading by the stream's period, or where that is unsure (``UNSURE``) the reading by the
    kernels that run once a step (:mod:`.anchored`: steps whose lengths vary) where it is
    surer (a period read into steps that are all different holds the once-a-step kernels at
    random: :func:`.anchored.holds_once`)."""
    b, strong, evidence = boundary(c)
    found = _periodic(tok, role, c, hint, kind, b, strong, evidence)
    if found is not None and (found[2]["replayed"] or found[2]["confidence"] >= UNSURE and found[2]["alike"] >= 0.5):
        return found  # graph replays are steps, whatever their kernels
    steps = anchored_steps(tok, role, b)
    if steps is None:
        return found
    starts, ends, anchors = steps
    period = int(np.median(ends - starts))
    said = f"{len(anchors)} kernels that run once a step (the steps' lengths vary), {evidence}"
    other = _label(tok, b, starts, ends, period, mismatch(tok[: min(len(tok), WINDOW)], period), said, hint, kind,
                   replayed=False)
    take_prefill(tok, other[0], c, other[2])
    if found is None or other[2]["confidence"] > found[2]["confidence"] or holds_once(tok, found[0], anchors) < 0.9:
        return other
    return found


def _periodic(tok: np.ndarray, role: np.ndarray, c: dict[str, np.ndarray], hint: int | None, kind: np.ndarray,
              b: np.ndarray, strong: np.ndarray, evidence: str):
    """:func:`_one_gpu`'s reading by the stream's period, given :func:`.boundaries.boundary`."""
    replays = replay_steps(strong, c["graph"].astype(bool)) if evidence == "graph launches" else None
    if replays is not None:  # one graph replay a step: the steps are the replays
        starts, ends = replays
        period = int(np.median(ends - starts))
        miss = mismatch(tok[starts[0]: starts[0] + WINDOW], period)
        # Layers are read from each replay's first kernel (the model's forward) on; then the
        # kernels that prepare a replay's inputs join its step.
        step, layer, info = _label(tok, b, starts, ends, period, miss, evidence, hint, kind, replayed=True)
        for i, (lo, hi) in enumerate(zip(replay_starts(tok, role, c["graph"].astype(bool), starts, ends), starts)):
            step[lo:hi] = i
        return step, layer, info
    if evidence == "graph launches" and len(strong) > 1 and strong[0] > 0:
        # Decode steps replayed as CUDA graphs: what runs before the first replay (prefill, a
        # compiler's warm-up and autotuning launches) is in no step, and left out of the search.
        lo = int(strong[0])
        found = _one_gpu(tok[lo:], role[lo:], {key: v[lo:] for key, v in c.items()}, hint, kind)
        if found is None:
            return None
        step, layer, info = found
        pad = np.full(lo, -1, np.int64)
        return np.r_[pad, step], np.r_[pad, layer], info
    found = step_period(tok, strong)
    if found is None:
        return None
    period, miss = found
    room = layer_room(tok, period)
    wide = widen(tok, b, period)
    if wide is not None and room is not None and not roomy_widens(b, wide, period):
        wide = None  # the period leaves room for a prologue, and a multiple stands out no more
    if wide is not None and hint and wide < hint * period:
        wide = None  # gaps that stand out more often than a step of the hinted layers can be
    if wide is not None:
        period, room = wide, None
        miss = mismatch(tok[: min(len(tok), WINDOW)], period)
        if "graph" not in evidence:
            evidence = f"idle and launch gaps standing out every {period} kernels"
    elif hint and (room is None or room[2] != hint and not (room[2] == hint // 2 and room[1] > 1)) \
            and 2 * hint * period <= len(tok):
        # The period is one layer and no gap says where steps start (a step of identical layers
        # and nothing else, whose own blocks may repeat inside a layer): the hint says how many
        # of them a step holds.
        period *= hint
        miss = mismatch(tok[: min(len(tok), WINDOW)], period)
        if "graph" not in evidence:
            evidence = f"the --layers hint ({hint} blocks of {period // hint} kernels a step), {evidence}"
    starts, picked = step_starts(tok, b, period, room, role)
    if not len(starts):
        return None
    if picked:
        evidence += ", each step ending at its token's pick (the last reduction after the LM head's matmul)"
    ends = np.minimum(np.r_[starts[1:], starts[-1] + period], len(tok))
    step, layer, info = _label(tok, b, starts, ends, period, miss, evidence, hint, kind, replayed=False)
    take_prefill(tok, step, c, info)
    return step, layer, info


def _label(tok: np.ndarray, b: np.ndarray, starts: np.ndarray, ends: np.ndarray, period: int, miss: float,
           evidence: str, hint: int | None, kind: np.ndarray, replayed: bool):
    """Per kernel its step and layer, and what they rest on, given the steps' ``starts`` and
    ``ends``; ``replayed``: each step is one graph replay (its first kernel starts its first
    layer: the replay begins at the model's forward)."""
    n = len(tok)
    lengths = ends - starts
    step = np.full(n, -1, np.int64)
    idx = np.repeat(np.arange(len(starts)), lengths)
    rel = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    pos = np.repeat(starts, lengths) + rel
    step[pos] = idx
    # Steps with the same kernels in the same order: one hash per step, one analysis per hash.
    w = np.random.default_rng(7).integers(1, 2**62, int(lengths.max()), dtype=np.int64)
    h = np.add.reduceat(tok[pos] * w[rel], np.cumsum(lengths) - lengths) if len(pos) else np.zeros(0, np.int64)
    keys, inverse, counts = np.unique(np.c_[h, lengths], axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    layer = np.full(n, -1, np.int64)
    blocks_seen = []
    for key in np.argsort(-counts, kind="stable")[:64]:
        alike = np.flatnonzero(inverse == key)
        i = int(alike[0])
        s = tok[starts[i]: ends[i]]
        # The boundary strengths of the alike steps, the median per place: one step's host
        # gaps vary too much to tell which of two kernels starts a layer.
        bs = np.median(np.stack([b[starts[j]: ends[j]] for j in alike[:MEDIAN_STEPS]]), axis=0)
        of_pos, block, count, split = _layer_map(s, hint, bs, kind, replayed)
        blocks_seen.append((int(counts[key]) * len(s), block, count, split))
        sel = inverse[idx] == key
        layer[pos[sel]] = of_pos[rel[sel]]
    top = int(counts.max())
    in_steps = int(lengths.sum())
    in_layers = int((layer >= 0).sum())
    _, block, count, split = blocks_seen[0]
    # Steps that differ only outside their layers (a sampler's launches between replays) agree.
    agree = sum(k for k, _, c, _ in blocks_seen if c == count)
    conf = agree / in_steps * (in_layers / in_steps)
    rests = [f"{len(starts)} steps of {period} kernels repeating ({miss:.1%} of kernels differ one step later), "
             f"placed by {evidence}"]
    if count and split:
        rests.append(f"a block of two layers repeating {count // 2} times in a step ({split})")
    elif count:
        rests.append(f"a block of {block} kernels repeating {count} times in a step")
    if len(keys) > 1:
        rests.append(f"{len(keys)} different step sequences ({top} of {len(starts)} steps alike)")
    return step, layer, {"steps": len(starts), "period": period, "block": block, "layers": count,
                         "confidence": float(conf), "alike": top / len(starts), "replayed": replayed,
                         "rests_on": rests}


def _rotation(s: np.ndarray, b: np.ndarray, a: int, block: int, count: int, kind: np.ndarray | None) -> int:
    """Where the layers start, given the exactly repeating run's start ``a``. A kernel that
    ends every layer and the prologue too (a residual add, a cast) starts the run one kernel
    early; one that starts every layer and the epilogue too, one late: from the tokens alone
    the two readings are the same. Where the layers of the other reading all begin with the
    same kernel too, the start is chosen by the gap before it, the median over the layers (the
    host enters each layer's code), ``a`` unless the other is larger by half again. (Only one
    kernel either way: inside an eager layer, the host's gap before each module's code is as
    large.) In a graph replay (``kind`` given: none else), where neither gap stands out (a
    replay runs with no host gaps), the run's first kernel says it: a pointwise one
    (``POINTWISE``: the residual add that ends every layer, after the embedding's) starts the
    layers one later, where the run's first kernel also follows its last block; another (a
    norm, which starts every layer and the final norm too) keeps ``a``."""
    end = a + block * count
    here = float(np.median(b[a: end: block]))
    told = False
    for o in (1, -1):
        if not (0 <= a + o and end + o <= len(s)) or not (s[a + o: end + o: block] == s[a + o]).all():
            continue
        there = float(np.median(b[a + o: end + o: block]))
        if there > 1.5 * here and there < 1e17:
            return a + o
        told |= here > 1.5 * there
    follows = end < len(s) and s[a] == s[end]
    return a + 1 if follows and not told and kind is not None and kind[s[a]] == POINTWISE else a


def _layer_map(s: np.ndarray, hint: int | None, b: np.ndarray, kind: np.ndarray,
               replayed: bool = False) -> tuple[np.ndarray, int, int, str]:
    """Per position of one step's tokens: its layer (-1: prologue or epilogue); the kernels per
    layer, the layers, and why each block was split in two ("": it was not). ``b``: each position's
    boundary strength; ``replayed``: the step is one graph replay
    (:func:`.periods.anchored_layers`)."""
    of_pos = np.full(len(s), -1, np.int64)
    found = layer_block(s, hint)
    exact = found is not None and found[1] * found[2] >= COVERED * len(s) and (not hint or found[2] in (hint, hint // 2))
    anchored = anchored_layers(s, hint, replayed, b) if not exact or not hint else None
    if exact and anchored is not None and (anchored[2] <= found[2] or anchored[2] % found[2]
                                           or not _alike_lengths(np.diff(anchored[0]))):
        anchored = None
    # Layers by their anchors where no block repeats exactly, or where each exact block holds
    # several layers' anchors alike (compiled code whose first of every few layers does one
    # launch more: the block that repeats is those few layers), as long as the layers so found
    # are alike in length (:func:`_alike_lengths`).
    if anchored is not None:
        cuts, block, count = anchored
        for j in range(count):
            of_pos[cuts[j]: cuts[j + 1]] = j
        _deferred(s, of_pos, int(cuts[-1]), count)
        return of_pos, block, count, ""
    if found is None:
        return of_pos, 0, 0, ""
    a, block, count = found
    a = _rotation(s, b, a, block, count, kind if replayed else None)
    cuts = [a + j * block for j in range(count + 1)]
    first = s[a: a + block]
    mid = pair_cut(first)
    split = "the --layers hint" if hint and hint == 2 * count else ""
    if not hint and mid is not None:
        split = f"its first {common_prefix(first, mid)} kernels recur {mid} kernels on"
    if split:  # period two: each block holds two layers
        if mid is None:
            again = np.flatnonzero(first[1:] == first[0]) + 1
            mid = int(again[np.argmin(np.abs(again - block / 2))]) if len(again) else block // 2
        cuts = sorted(cuts + [c + mid for c in cuts[:-1]])
        count, block = 2 * count, block // 2
    if replayed and cuts[-1] < len(s) and s[cuts[-1]] == s[cuts[0]] and kind[s[cuts[0]]] == FUSED_NORM:
        # Layers that start at a compiler's fused norm: the final norm then holds the last
        # layer's residual add (periods.replayed_cuts), and is its.
        cuts[-1] += 1
    for j in range(len(cuts) - 1):
        of_pos[cuts[j]: cuts[j + 1]] = j
    _deferred(s, of_pos, cuts[-1], count)
    return of_pos, block, count, split


def _alike_lengths(d: np.ndarray) -> bool:
    """Whether layers of these lengths (kernels) are alike: the longest of the inner ones at
    most ``ALIKE`` times the shortest (the first and the last may hold an embedding's or a
    final norm's launches)."""
    inner = d[1:-1] if len(d) > 2 else d
    return bool(inner.max() <= ALIKE * inner.min())


def _deferred(s: np.ndarray, of_pos: np.ndarray, end: int, count: int) -> None:
    """Give each layer its share of a run after the last layer that repeats exactly once per
    layer (a compiler applies the writes each layer makes to its inputs, a static KV cache's,
    at the graph's end: the ``j``-th repeat is layer ``j``'s). Only for ``DEFERRED_LAYERS``
    layers or more, the run a block of up to ``DEFERRED_BLOCK`` kernels: fewer repeats occur by
    chance in an epilogue."""
    if count < DEFERRED_LAYERS:
        return
    for d in range(1, DEFERRED_BLOCK + 1):
        span = count * d
        for q in range(end, len(s) - span + 1):
            run = s[q: q + span].reshape(count, d)
            if (run == run[0]).all() and (q + span == len(s) or s[q + span: q + span + d].tolist() != run[0].tolist()) \
                    and (q - d < end or s[q - d: q].tolist() != run[0].tolist()):
                of_pos[q: q + span] = np.repeat(np.arange(count), d)
                return
