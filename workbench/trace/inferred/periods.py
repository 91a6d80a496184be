"""Periods in a token sequence: the step that repeats in a kernel stream, and the layer block
that repeats inside a step. Pure numpy on int64 token arrays (see :mod:`.names`).

**Step period.** The candidates are the spacings between two occurrences of one token (a
kernel run once per step recurs one step later), the spacings between strong boundaries (graph
launches, the largest idle gaps) and small multiples of the commonest spacings; each is scored by
the share of positions ``i`` where ``tok[i] != tok[i + P]`` over a window of the stream. The
step period is the smallest candidate whose mismatch is within a hair of the best: a layer
period mismatches at every step's prologue and epilogue, a multiple of the step matches no
better than the step.

**Layer block.** Inside one step, for each period ``L`` the longest run of ``s[i] == s[i + L]``
covers ``run + L`` kernels: ``(run + L) // L`` blocks. The block is the smallest ``L`` whose
coverage is within 1% of the largest (a multiple of the block covers as much, no more). A
block whose first kernels recur inside it holds two layers (:func:`pair_cut`).
"""

from __future__ import annotations

import numpy as np

# Scored on at most this many kernels of the stream: steps repeat, a prefix shows the period.
WINDOW = 200_000
# How much worse than the best a smaller step period may match and still be taken: a hair.
SLACK = 0.002
# An exactly repeating block whose first kernels recur inside it (not overlapping) for this share
# of it holds two layers: Qwen2-MoE's dense and MoE layers share their norms and attention (a
# third of the pair); a norm recurring inside one layer is less (committed traces: 0.19 at most).
PAIRED = 0.25
# Anchored layers' inner ones vary in length by at most this share of their mean (standard
# deviation): a mixture of experts' loop makes its layers 110-170 kernels (2 to 8 experts
# hit: 0.12), while the experts' own kernels, which run as often as the hit experts, make
# "layers" of 15 kernels and of about 40 (an expert, or the next layer's attention: 0.5).
VARIED = 0.3


def mismatch(tok: np.ndarray, period: int) -> float:
    """Share of positions whose token differs from the one ``period`` later."""
    if period <= 0 or period >= len(tok):
        return 1.0
    return float(np.count_nonzero(tok[:-period] != tok[period:])) / (len(tok) - period)


def spacings(tok: np.ndarray, top: int = 64, above: int = 0) -> np.ndarray:
    """The commonest distances longer than ``above`` between two consecutive occurrences of
    one token."""
    order = np.argsort(tok, kind="stable")
    same = tok[order][1:] == tok[order][:-1]
    d = (order[1:] - order[:-1])[same]
    d = d[d > above]
    if not len(d):
        return d
    vals, counts = np.unique(d, return_counts=True)
    return vals[np.argsort(-counts, kind="stable")[:top]]


def step_period(tok: np.ndarray, boundaries: np.ndarray) -> tuple[int, float] | None:
    """``(period, mismatch)`` of the stream's repeating step, None when nothing repeats twice.
    ``boundaries``: positions with strong evidence of a step start (may be empty). Scored from
    the first of them: what comes before (a compiler's warm-up, a prefill) repeats at no step
    period and would blur the scores of every candidate alike."""
    lo = int(boundaries[0]) if len(boundaries) > 1 else 0
    w = tok[lo: lo + WINDOW]
    common = spacings(w)
    cand = {int(c) for c in common}
    for v in common[:8]:
        cand.update(int(v) * k for k in range(2, 33))
    if len(boundaries) > 1:
        gaps = np.diff(boundaries)
        vals, counts = np.unique(gaps, return_counts=True)
        cand.update(int(v) for v in vals[np.argsort(-counts, kind="stable")[:8]])
    cand = sorted(c for c in cand if 0 < c <= len(w) // 2)
    if not cand:
        return None
    scores = np.array([mismatch(w, c) for c in cand])
    best = float(scores.min())
    if best > 0.5:
        return None
    ok = np.flatnonzero(scores <= best * 1.5 + SLACK)
    i = int(ok[0])
    return cand[i], float(scores[i])


def runs(match: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of True in a boolean array."""
    pad = np.concatenate([[False], match, [False]])
    edges = np.flatnonzero(pad[1:] != pad[:-1])
    return edges[0::2], edges[1::2] - edges[0::2]


def layer_block(s: np.ndarray, blocks: int | None = None, longest: int | None = None) -> tuple[int, int, int] | None:
    """``(start, block, count)`` of the repeating block in one step's tokens ``s`` (its first
    kernel's position, kernels per block, blocks), None when no block repeats. ``blocks``: the
    number of layers expected (a hint): the block whose run holds that many is preferred.
    ``longest``: the longest block considered (default: half of ``s``)."""
    n = len(s)
    found = []  # (coverage, L, start)
    for L in range(1, min(n // 2, longest or n) + 1):
        starts, lengths = runs(s[:-L] == s[L:])
        if not len(lengths):
            continue
        j = int(np.argmax(lengths))
        if lengths[j] >= L:  # two whole blocks at least
            found.append((int(lengths[j]) + L, L, int(starts[j])))
    if not found:
        return None
    if blocks:
        exact = [f for f in found if f[0] // f[1] == blocks]
        if exact:
            cov, L, a = max(exact, key=lambda f: (f[0], -f[1]))
            return a, L, blocks
    top = max(f[0] for f in found)
    cov, L, a = next(f for f in found if f[0] >= 0.99 * top)
    return a, L, cov // L


def common_prefix(blk: np.ndarray, q: int) -> int:
    """How many of ``blk``'s first kernels recur from position ``q`` on."""
    differ = blk[: len(blk) - q] != blk[q:]
    return int(np.argmax(differ)) if differ.any() else len(blk) - q


def pair_cut(blk: np.ndarray) -> int | None:
    """Where a block of two layers splits: the place its longest run of first kernels recurs,
    not overlapping itself, where that run is ``PAIRED`` of the block or more and three kernels
    at least (a hybrid's two kinds of layer share their norms and attention; a kernel or two
    alike in a row are no layers); else None."""
    best, longest = None, 0
    for q in range(1, len(blk)):
        run = common_prefix(blk, q)
        if run > longest:
            best, longest = q, run
    return best if best is not None and longest <= best and longest >= max(PAIRED * len(blk), 3) else None


def anchored_layers(s: np.ndarray, layers: int | None = None, replayed: bool = False,
                    b: np.ndarray | None = None) -> tuple[np.ndarray, int, int] | None:
    """``(cuts, block, count)``: the layers of one step's tokens ``s`` found by their anchors,
    where no block repeats exactly (compiled code: a fusion that swallows one kernel more in
    every fourth layer, generated kernels whose layers differ by one launch). ``cuts``: the
    ``count + 1`` positions where each layer starts and the last ends; None when no anchors.

    Anchors of ``N`` layers are the tokens occurring exactly ``N`` times in the step, the
    ``j``-th occurrence of each in layer ``j``: every anchor of a layer comes before every
    anchor of the next. ``N`` is ``layers`` (a hint), else the largest count that two tokens
    share and that passes that test (a token twice per layer has its occurrences of two
    layers interleaved with the others' and fails it) whose inner layers' lengths vary by at
    most ``VARIED``, three layers at least (else the largest that passes). A layer ends at its
    last anchor (the next layer's own kernels start after it: its norm and projections before
    its first anchor); the first layer starts as far before its first anchor as the others do,
    and what is after the last layer's last anchor is the step's epilogue (where the stretches
    between anchors vary in length, :func:`_varied_cuts` places the cuts instead). The layers must hold half
    the step at least. ``replayed``: the step is one graph replay, whose first kernel starts
    the first layer (see :func:`replayed_cuts`). ``b``: each position's boundary strength (the
    host enters each layer's code): a layer then starts at the strongest place from just
    after the previous layer's last anchor to its own first, which keeps an op that only one
    layer does at the end of that layer where the gaps say so."""
    n = len(s)
    vals, counts = np.unique(s, return_counts=True)
    shared = np.unique(counts[counts >= 2], return_counts=True)
    tries = [layers] if layers else sorted((int(c) for c, k in zip(*shared) if k >= 2), reverse=True)
    fallback = None
    for count in tries:
        found = anchor_bounds(s, vals[counts == count], count)
        if found is None:
            continue
        first, last = found
        cuts = replayed_cuts(s, first, last) if replayed else _varied_cuts(s, first, last)
        if cuts is None:
            after = last[:-1] + 1
            if b is not None:
                after = after + np.array([int(np.argmax(b[lo: hi + 1])) for lo, hi in zip(after, first[1:])])
            lead = int(np.median(first[1:] - after))
            cuts = np.r_[max(0, int(first[0]) - lead), after, last[-1] + 1].astype(np.int64)
        if cuts[-1] - cuts[0] < n / 2:
            continue
        out = cuts, int(np.median(np.diff(cuts))), count
        inner = np.diff(cuts)[1:-1]
        if layers or count > 2 and inner.std() <= VARIED * inner.mean():
            return out
        fallback = fallback or out
    return fallback


def _suffix(parts: list[np.ndarray]) -> int:
    """How many tokens all of ``parts`` end with alike."""
    n = min(len(p) for p in parts)
    k = 0
    while k < n and all(p[len(p) - k - 1] == parts[0][len(parts[0]) - k - 1] for p in parts):
        k += 1
    return k


def _varied_cuts(s: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray | None:
    """Layer cuts where the stretches between one layer's last anchor and the next one's first
    vary in length (a mixture of experts' loop launches each hit expert's kernels after the
    router, the layer's last anchor): each layer starts the same kernels before its first
    anchor as the first layer does after the step's prologue (what every stretch and the
    prologue end with alike: the norm, the projections), and the last layer ends where the
    other layers' tails end alike, at the last place its stretch does so. None where the
    stretches are alike in length (:func:`anchored_layers` places those cuts by the gaps)."""
    gaps = [s[lo + 1: hi] for lo, hi in zip(last[:-1], first[1:])]
    if len(gaps) < 2 or len({len(g) for g in gaps}) == 1:
        return None
    head = _suffix(gaps + [s[: first[0]]])
    starts = first - head
    tails = [s[lo + 1: hi] for lo, hi in zip(last[:-1], starts[1:])]
    end = int(last[-1]) + 1 + int(np.median([len(t) for t in tails]))
    t = _suffix(tails)
    if t:
        rest = s[last[-1] + 1:]
        at = [i for i in range(t, len(rest) + 1) if (rest[i - t: i] == tails[0][len(tails[0]) - t:]).all()]
        if at:
            end = int(last[-1]) + 1 + at[-1]
    return np.r_[starts, end].astype(np.int64)


def anchor_bounds(s: np.ndarray, anchors: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Where ``anchors`` (tokens occurring ``count`` times each in ``s``) place ``count`` units:
    each unit's first and last anchor position, where every anchor of a unit comes before
    every anchor of the next (the ``j``-th occurrence of each is unit ``j``'s); else None."""
    if not len(anchors) or count < 2:
        return None
    order = np.argsort(s, kind="stable")
    at = np.isin(s[order], anchors)
    occ = order[at].reshape(len(anchors), count)  # per anchor (in token order), its positions in order
    first, last = occ.min(axis=0), occ.max(axis=0)
    return (first, last) if (last[:-1] < first[1:]).all() else None


def replayed_cuts(s: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray | None:
    """The layer cuts of a step that is one graph replay, given each layer's first and last
    anchor position: the replay starts at the model's forward, so its first kernel ``t``
    starts the first layer (a compiler fuses the embedding into the first norm), and every
    other layer starts at the ``t`` between the previous layer's last anchor and its own
    first that has as many ``t`` from it to that first as the first layer has (the norm
    before the attention, not the one before the MLP; counted in ``t``, not in kernels: a
    compiler fuses the attention's preparation into three kernels in one layer and four in
    the next). The last layer ends as far after its last anchor as the others do, and takes
    as many ``t`` more right there as a layer starts with: a compiler that fuses each layer's
    residual add into the next layer's norm fuses the last one's into the final norm. None
    where a gap holds no ``t``."""
    n, t = len(s), s[0]
    head = int(np.count_nonzero(s[: first[0]] == t))
    cuts = [0]
    for j in range(1, len(first)):
        at = np.flatnonzero(s[last[j - 1] + 1: first[j] + 1] == t) + last[j - 1] + 1
        if not len(at):
            return None
        cuts.append(int(at[max(0, len(at) - head)]))
    end = int(last[-1]) + 1 + int(np.median(np.asarray(cuts[1:]) - last[:-1] - 1))
    for _ in range(head):
        if end < n and s[end] == t:
            end += 1
    return np.asarray(cuts + [min(end, n)], np.int64)
