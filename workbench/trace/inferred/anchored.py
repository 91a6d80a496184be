"""Decode steps whose lengths vary, found by the kernels that run once a step (:mod:`.structure`
uses it where no step period reads the stream well).

A mixture-of-experts layer run as a loop over the experts its tokens were routed to launches
each hit expert's kernels: every layer, and so every step, has its own length, and no period
``P`` makes ``tok[i] == tok[i + P]`` (the period search then locks onto one expert's block).
What still runs once a step is the embedding, the LM head, the final norm and the sampler. Their
tokens occur ``N`` times each, and the ``j``-th occurrences of all of them lie in step ``j``,
before any of step ``j + 1``'s (:func:`.periods.anchor_bounds`). Of the counts shared by
``ANCHORS`` tokens or more whose units cover most of the stream, the smallest is the steps':
layers' anchors (the attention, a norm) pass the same test ``layers`` times as often.

Between one step's last anchor and the next one's first, a step ends right after its token's
pick (:func:`.boundaries.after_pick`, from the step's last matrix multiply: its LM head), else
at the strongest boundary there. The first step starts as far before its first anchor as the
others do; the last ends as far after its last anchor.
"""

from __future__ import annotations

import numpy as np

from .boundaries import after_pick
from .names import GEMM
from .periods import anchor_bounds

# Tokens that must share a count before their occurrences are taken for steps: the embedding,
# the LM head, the final norm's kernels, a sampler's (a pair shares a count by chance).
ANCHORS = 3
# The units the anchors make must span this share of the stream at least.
COVERS = 0.5


def anchored_steps(tok: np.ndarray, role: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(starts, ends, anchors)``: each step's first kernel and the position after its last,
    and the tokens that run once a step (sorted); None where no count of tokens places three
    steps."""
    n = len(tok)
    vals, counts = np.unique(tok, return_counts=True)
    shared, k = np.unique(counts[counts >= 3], return_counts=True)
    for count in shared[k >= ANCHORS]:
        anchors = vals[counts == count]
        found = anchor_bounds(tok, anchors, int(count))
        if found is None:
            continue
        first, last = found
        if last[-1] - first[0] < COVERS * n:
            continue
        cuts = [_cut(role, b, int(first[j - 1]), int(last[j - 1]), int(first[j])) for j in range(1, len(first))]
        cuts = np.asarray(cuts, np.int64)
        lead = int(np.median(first[1:] - cuts))
        tail = int(np.median(cuts - last[:-1]))
        starts = np.r_[max(0, int(first[0]) - lead), cuts]
        ends = np.r_[cuts, min(n, int(last[-1]) + tail)]
        return starts.astype(np.int64), ends.astype(np.int64), anchors
    return None


def _cut(role: np.ndarray, b: np.ndarray, first: int, last: int, nxt: int) -> int:
    """Where the step whose anchors span ``first..last`` ends, the next one's first anchor at
    ``nxt``: after its pick, else at the strongest boundary after its last anchor."""
    gemm = np.flatnonzero(role[first: last + 1] == GEMM)
    picked = after_pick(role, first + int(gemm[-1]), nxt + 1) if len(gemm) else None
    if picked is not None and last < picked <= nxt:
        return picked
    return last + 1 + int(np.argmax(b[last + 1: nxt + 1]))


def holds_once(tok: np.ndarray, step: np.ndarray, anchors: np.ndarray) -> float:
    """Share of the steps in ``step`` holding each of the tokens ``anchors`` exactly once."""
    n = int(step.max(initial=-1)) + 1
    if not n:
        return 0.0
    sel = (step >= 0) & np.isin(tok, anchors)
    counts = np.zeros((n, len(anchors)), np.int64)
    np.add.at(counts, (step[sel], np.searchsorted(anchors, tok[sel])), 1)
    return float((counts == 1).all(axis=1).mean())
