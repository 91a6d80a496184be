"""Where decode steps start in one GPU's kernel stream (:mod:`.structure` uses it): each
kernel's strength as a step's first kernel (a CUDA-graph launch, else the GPU's idle gap before
it plus the host's gap before its launch), those strengths per place of a period (the median
over the periods), the step period widened from one layer where the gaps say so, and the
steps' first kernels: right after each step's pick of its token where the kernels between its
layers show one (a reduction after the LM head's matmul), else at the strongest boundary; a
replayed step's start moved back to its input copies; the prefill told from the steps.
"""

from __future__ import annotations

import numpy as np

from .names import GATHER, GEMM, PICK
from .periods import WINDOW, layer_block, spacings

# The strongest boundary of a multiple of the token period stands out this much over the same
# place one period on where the period is a layer (:func:`_above_layers`) ...
WIDER = 1.5
# ... and, where the period leaves room for a prologue (the reading of a step), the multiple's
# boundaries stand out this much more than the period's: between what a step of several layers
# shows and what a longer host gap every few steps does (benchmarks/RESULTS.md, issue 37).
ROOMY = 1.75
# A first step at least this share of whose kernels no later step runs (the prompt's shapes
# pick other GEMM and attention kernels), and more GPU time than the other steps' median, is
# the prefill (the committed captures of whole programs, prompts of 8-16 tokens: 12-24%, and
# 1.10-1.35x the GPU time; every first step that is no prefill, warm-up or a compiler's first
# replay: 0%).
PREFILL = 0.05
# The step of the prefill's kernels (-1: in no step).
PREFILL_STEP = -2


def boundary(c: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, str]:
    """Per kernel, how strongly it looks like a step's first kernel, the strong ones, and what
    the strength rests on."""
    start, end = c["start"], c["end"]
    gap = np.zeros(len(start), np.float64)
    gap[1:] = np.maximum(start[1:] - np.maximum.accumulate(end)[:-1], 0)
    ls, le = c["launch_start"], c["launch_end"]
    host = np.zeros(len(start), np.float64)
    known = (ls[1:] >= 0) & (le[:-1] >= 0)
    host[1:] = np.where(known, np.maximum(ls[1:] - le[:-1], 0), 0)
    graph = c["graph"].astype(bool)
    first = graph & np.r_[True, (c["correlation"][1:] != c["correlation"][:-1]) | ~graph[:-1]]
    b = gap + host
    if first.any():
        return b + first * 1e18, np.flatnonzero(first), "graph launches"
    med = float(np.median(b)) if len(b) else 0.0
    strong = np.flatnonzero(b > 20 * med) if med > 0 else np.zeros(0, np.int64)
    return b, strong, "idle gaps before steps" + (" and launch gaps" if known.any() else "")


def _columns(b: np.ndarray, period: int) -> np.ndarray:
    """Per place in a period: the median boundary strength there over the periods."""
    return np.median(_rows(b, period), axis=0)


def _rows(b: np.ndarray, period: int) -> np.ndarray:
    """The boundary strengths of the first periods (200k kernels at most), one row each. The
    stream's first kernel has nothing before it: its strength is taken as one period on."""
    m = max(1, min(len(b), 200_000) // period)
    x = b[: m * period].reshape(m, period)
    if m > 1:
        x = x.copy()
        x[0, 0] = x[1, 0]
    return x


def contrast(b: np.ndarray, period: int) -> float:
    col = _columns(b, period)
    return float(col.max() / max(float(np.median(col)), 1e-9))


def widen(tok: np.ndarray, b: np.ndarray, period: int) -> int | None:
    """The step period where the token period is one layer: the smallest multiple of it whose
    steps start at a gap that stands out over its layers' (:func:`_above_layers`: a step of
    identical layers and nothing else). Else steps that vary more from step to step than
    from layer to layer (eager attention over a growing cache): of the spacings of tokens that recur less often
    (a step's embedding, its sampler) and are no multiple of it, the one whose boundaries
    stand out most (the strongest place over the median place, three times at least), or the smallest
    divisor of it among them that stands out 70% as much. None when none does."""
    n = len(tok)
    # Three periods at least: the median place of two is their mean, which a warm-up's gaps
    # (a program's first launches) outweigh.
    multiples = [k * period for k in range(2, min(32, n // (3 * period)) + 1)]
    wide = next((w for w in multiples if _above_layers(b, w, period)), None)
    if wide is not None:
        return wide
    # The multiples failed above: a step of whole layers would have stood out there.
    cand = {int(c) for c in spacings(tok[:WINDOW], above=period) if c <= n // 3 and c % period}
    stand = {c: contrast(b, c) for c in sorted(cand)}
    if not stand:
        return None
    top = max(stand, key=stand.get)
    if stand[top] < 3.0:
        return None
    # A multiple of the step stands out as much as the step: the smallest divisor of the
    # best that nearly does.
    return next(c for c, v in stand.items() if top % c == 0 and v >= 0.7 * stand[top])


def _above_layers(b: np.ndarray, wide: int, period: int) -> bool:
    """Whether steps of ``wide`` kernels (a multiple of ``period``) start where the gap is
    ``WIDER`` times the gap at the same place of the step's other periods (the medians over
    the steps), and is the largest of those places in two steps of three at least: the period
    is one layer (of a kernel or two, whose repeats look like a prologue and layers), and the
    host waits longer between steps than between layers. Steps whose period leaves that room
    have as large a gap one step on, and no multiple passes; a multiple of a layer that is no
    step has its largest place at random in each step."""
    if wide % period:
        return False
    col = _columns(b, wide)
    top = int(np.argmax(col))
    places = (top + period * np.arange(wide // period)) % wide
    if col[top] < WIDER * col[places[1:]].max():
        return False
    return _wins(b, wide, period, top) >= 2 / 3


def _wins(b: np.ndarray, wide: int, period: int, top: int) -> float:
    """Share of the steps of ``wide`` kernels whose place ``top`` has the largest gap of the
    places one ``period`` apart from it."""
    places = (top + period * np.arange(wide // period)) % wide
    rows = _rows(b, wide)[:, places]
    return float((rows.argmax(axis=1) == 0).mean())


def roomy_widens(b: np.ndarray, wide: int, period: int) -> bool:
    """Whether a period that leaves room for a prologue (the reading of a whole step) is a
    layer of steps of ``wide`` kernels after all: the multiple's boundaries stand out
    ``ROOMY`` times more than the period's, and its strongest place is the largest of those
    one period apart in every step of it. In a capture of a few dozen eager steps, a longer
    host gap every few steps (a collector's pause, the first steps' warm-up) stands out in
    some of them; a step's start, in all (the committed traces: 3 of 3 where the period is one
    layer, 2 of 3 where it is a step of eight layers)."""
    if contrast(b, wide) < ROOMY * contrast(b, period):
        return False
    return _wins(b, wide, period, int(np.argmax(_columns(b, wide)))) == 1.0


def room(tok: np.ndarray, period: int) -> tuple[int, int, int] | None:
    """The layer blocks of one period (two periods of the stream searched, at its start, else
    in its middle: a capture that starts with the prefill, whose layers route their tokens to
    more experts, has its steps' layers only later) when they leave room for a prologue or an
    epilogue: the period is a step, not a layer. The blocks' start is a position in the stream."""
    if len(tok) < 2 * period:
        return None
    for at in sorted({0, (len(tok) // 2 // period) * period}):
        if at + 2 * period > len(tok):
            continue
        found = layer_block(tok[at: at + 2 * period], longest=period // 2)
        # Layers fill most of a step: a short run of repeats in a period is no layer block, nor
        # are two like kernels in a row (a cast and an add: "layers" of one kernel).
        if found is not None and found[1] > 1 and period // 2 <= found[1] * found[2] < period:
            return at + found[0], found[1], found[2]
    return None


def _phase(tok: np.ndarray, b: np.ndarray, period: int, room: tuple[int, int, int] | None,
           role: np.ndarray) -> tuple[int, bool]:
    """Where in the period steps start: among the places outside the layer blocks (between one
    step's last layer and the next one's first), right after the step's pick of its token
    (:func:`after_pick`), else the strongest boundary there, unless a place
    inside them that starts with the same two kernels stands out ``WIDER`` times over it (a
    step whose middle layer does one op more: the exact blocks are its last layer and the next
    step's first, and the gap says which of the like places starts a step); anywhere when
    the period has no room outside them. There, where the strongest place starts with the
    same two kernels as other places that are nearly as strong (a few steps of identical
    layers: no gap tells which layer is a step's first) and the stream starts with them too,
    the stream's first kernel starts a step: a capture window opens between steps."""
    col = _columns(b, period)
    if room is not None:
        a, block, count = room
        allowed = np.arange(a + block * count, a + period + 1) % period
        picked = after_pick(role, a + block * count, a + period)
        best = picked % period if picked is not None else int(allowed[np.argmax(col[allowed])])
        top = int(np.argmax(col))
        same = tok[top] == tok[best] and tok[top + 1] == tok[best + 1]
        if same and col[top] > WIDER * col[best]:
            return top, False
        return best, picked is not None
    top = int(np.argmax(col))
    if top == 0 or len(tok) <= period:
        return top, False
    alike = np.flatnonzero((tok[:period] == tok[top]) & (tok[1: period + 1] == tok[top + 1]))
    if alike[0] == 0 and len(alike) > 1 and col[top] < WIDER * np.sort(col[alike])[-2]:
        return 0, False
    return top, False


def after_pick(role: np.ndarray, lo: int, hi: int) -> int | None:
    """The place right after a step's pick of its next token among the kernels ``lo:hi``
    between one step's last layer and the next one's first (``role``: per kernel,
    :func:`.names.roles`): the last reduction or sampler (``PICK``) after the first matrix
    multiply there (the LM head) and before the next embedding's gather. A decode step ends
    when its token is picked; what follows prepares the next step's inputs (a fill, copies
    into static buffers, the positions), however long the host takes before the embedding's
    launch. None where the kernels there hold no such pick."""
    seg = role[lo: min(hi, len(role))]
    gemm = np.flatnonzero(seg == GEMM)
    if not len(gemm):
        return None
    after = seg[gemm[0] + 1:]
    gather = np.flatnonzero(after == GATHER)
    picks = np.flatnonzero(after[: gather[0]] == PICK if len(gather) else after == PICK)
    return lo + int(gemm[0]) + 2 + int(picks[-1]) if len(picks) else None


def starts(tok: np.ndarray, b: np.ndarray, period: int, room, role: np.ndarray) -> tuple[np.ndarray, bool]:
    """Each step's first kernel (see the module docstring), and whether the steps end at their
    token's pick (:func:`after_pick`) rather than at the strongest gap; ``role``: per kernel,
    its role (:func:`.names.roles`)."""
    n = len(tok)
    # Where the layers were found in the middle of the stream (its first periods are another
    # phase's: the prefill), the steps are read from there, and back only as far as the
    # anchor recurs: what runs before the first step is in none.
    base = (room[0] // period) * period if room is not None and room[0] >= 2 * period else 0
    phase, picked = _phase(tok[base:], b[base:], period, None if room is None else (room[0] - base, *room[1:]),
                           role[base:])
    phase += base
    anchor = tok[phase], tok[phase + 1] if phase + 1 < n else -1
    hits = np.flatnonzero((tok[:-1] == anchor[0]) & (tok[1:] == anchor[1]))
    tol = max(1, period // 4)
    out = [phase]
    while out[-1] + period < n:
        want = out[-1] + period
        near = _near(hits, want, tol, lambda h: h > out[-1])
        out.append(near if near is not None else want)
    if n - out[-1] < period - tol:  # the last step, cut short by the end of the window
        out.pop()
    while base and out[0] - period > -tol:
        near = _near(hits, out[0] - period, tol, lambda h: h < out[0])
        if near is None:
            break
        out.insert(0, near)
    if (not base or out[0] < period) and out[0] >= period - tol:
        out.insert(0, max(0, out[0] - period))  # a first step before the phase, its start cut by the window
    return np.asarray(out, np.int64), picked


def _near(hits: np.ndarray, want: int, tol: int, keep) -> int | None:
    """The anchor hit nearest ``want``, within ``tol``, that ``keep`` takes, or None."""
    j = int(np.searchsorted(hits, want))
    near = [int(h) for h in hits[max(0, j - 1): j + 1] if abs(int(h) - want) <= tol and keep(int(h))]
    return min(near, key=lambda h: abs(h - want)) if near else None


def replay_starts(tok: np.ndarray, role: np.ndarray, graph: np.ndarray, starts: np.ndarray,
                  ends: np.ndarray) -> np.ndarray:
    """Where replayed steps start, from one token's pick to the next: the eager kernels
    launched after a replay and after its step's pick (:func:`after_pick` from the
    step's last matrix multiply, the LM head's, in the replay or after it), an input copy for
    the next replay, start the next step; the first step takes the same kernels before its
    replay where they are there. A step whose kernels show no pick starts at its replay."""
    out = starts.copy()
    for i in range(1, len(starts)):
        prev, nxt = int(starts[i - 1]), int(starts[i])
        gemm = np.flatnonzero(role[prev:nxt] == GEMM)
        if ends[i - 1] != nxt or not len(gemm):  # a step of its own between (replays.py)
            continue
        cut = after_pick(role, prev + int(gemm[-1]), nxt)
        replayed = np.flatnonzero(graph[prev:nxt])
        if cut is not None:  # never inside the replay: its kernels are its step's
            out[i] = max(cut, prev + int(replayed[-1]) + 1 if len(replayed) else prev)
    if len(starts) > 1:
        prep = tok[out[1]: starts[1]]
        lo = int(starts[0]) - len(prep)
        if len(prep) and lo >= 0 and not graph[lo: starts[0]].any() and (tok[lo: starts[0]] == prep).all():
            out[0] = lo
    return out


def take_prefill(tok: np.ndarray, step: np.ndarray, c: dict[str, np.ndarray], info: dict) -> None:
    """Take the first step out of the steps (its kernels' step -> ``PREFILL_STEP``, the others
    numbered from 0 again) where it is the prefill: ``PREFILL`` of its kernels or more run in
    no later step (the prompt's shapes), and it has more GPU time than the other steps' median.
    A capture of a whole program starts with the prefill, which the anchors of the steps after
    it may find as their first."""
    n = int(step.max(initial=-1)) + 1
    if n < 3:
        return
    first = tok[step == 0]
    novel = float(np.isin(first, tok[step > 0], invert=True).mean()) if len(first) else 0.0
    sel = step >= 0
    busy = np.bincount(step[sel], weights=(c["end"] - c["start"])[sel], minlength=n)
    ratio = busy[0] / max(float(np.median(busy[1:])), 1.0)
    if novel < PREFILL or ratio <= 1:
        return
    step[step == 0] = PREFILL_STEP
    step[step > 0] -= 1
    info["steps"] -= 1
    said = info["rests_on"][0].removeprefix(f"{n} steps")
    info["rests_on"][0] = (f"{n - 1} steps{said}; before them the prefill ({len(first)} kernels, {novel:.0%} of them "
                           f"in no step, {ratio:.2f}x the steps' median GPU time)")
