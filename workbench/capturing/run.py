"""Timed runs of an engine: warm-up, N repetitions, outputs kept for the equality check.

One repetition is a prefill of the prompt followed by ``steps`` one-token greedy decode steps,
under the ranges ``prefill`` and ``step_i``. Prefill and each decode step are timed separately,
with CUDA events on a GPU (the device synchronized before each phase starts) and the host
clock on CPU. The first warm-up repetition also keeps the logits and tokens, which ``compare`` checks
across variants.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict

from ..instrument.ranges import annotate
from ..vocabulary import OUTPUT_TOLERANCE as TOLERANCE


class _HostClock:
    """Times named phases with the host clock; ``collect`` hands back and forgets them."""

    kind = "host"

    def __init__(self):
        self.marks: dict[str, list] = defaultdict(list)

    @contextlib.contextmanager
    def phase(self, name: str):
        t0 = time.perf_counter_ns()
        yield
        self.marks[name].append((time.perf_counter_ns() - t0) / 1e6)

    def collect(self) -> dict[str, list[float]]:
        out, self.marks = self.marks, defaultdict(list)
        return out


class _EventClock(_HostClock):
    kind = "cuda_event"

    @contextlib.contextmanager
    def phase(self, name: str):
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # An empty queue makes the pair measure this phase's latency: without it, a step
        # queued behind the prefill is timed by its GPU time alone and a host-bound step by
        # its launches alone.
        torch.cuda.synchronize()
        start.record()
        yield
        end.record()
        self.marks[name].append((start, end))

    def collect(self) -> dict[str, list[float]]:
        import torch

        torch.cuda.synchronize()
        return defaultdict(list, {k: [s.elapsed_time(e) for s, e in v] for k, v in super().collect().items()})


def clock_for(cuda: bool):
    """CUDA events when the timed work runs on a GPU, else the host clock."""
    return _EventClock() if cuda else _HostClock()


class _NoClock:
    @contextlib.contextmanager
    def phase(self, name: str):
        yield


def generate(engine, steps: int, *, clock=None, window=None, keep: bool = False):
    """Prefill, then ``steps`` greedy decode steps; ``window`` wraps the decode steps (and what
    the engine rebuilds for them, see ``rebuild``) only.

    Returns ``(logits, tokens)`` copied to the host when ``keep``, else ``None``.
    """
    import torch

    with torch.inference_mode():  # what a serving engine runs under: no autograd bookkeeping
        return _generate(engine, steps, clock or _NoClock(), window, keep)


def _generate(engine, steps: int, clock, window, keep: bool):
    import torch

    kept = []
    with clock.phase("prefill"), annotate("prefill"):
        logits = engine.prefill()
        token = logits.argmax(-1)
    if keep:
        kept.append((logits.float().cpu(), token.cpu()))
    ctx = engine.instance.ctx
    with window if window is not None else contextlib.nullcontext():
        if window is not None:
            # What the engine replays is built again inside the recording, so the trace holds
            # how it was built (a CUDA graph's kernels keep the ranges open at its capture).
            engine.rebuild(range(ctx, ctx + steps))
        for i in range(steps):
            with clock.phase("decode"), annotate(f"step_{i}"):
                logits = engine.decode(token, ctx + i)
                token = logits.argmax(-1)
            if keep:
                kept.append((logits.float().cpu(), token.cpu()))
        if engine.instance.device.type == "cuda":
            torch.cuda.synchronize()
    if not keep:
        return None
    return torch.cat([lg for lg, _ in kept]), [int(t) for _, t in kept]


def stats(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "mean": statistics.fmean(samples), "n": len(samples),
            "samples": [round(s, 5) for s in samples]}


def time_engine(engine, *, steps: int = 3, repeats: int = 10, warmup: int = 2, progress: bool = True) -> dict:
    """Warm up, then time ``repeats`` repetitions; returns timing and the reference outputs."""
    from tqdm.auto import tqdm

    warmup = max(1, warmup)  # the first warm-up repetition is also the output reference
    logits, tokens = generate(engine, steps, keep=True)
    for _ in range(warmup - 1):
        generate(engine, steps)
    clock = clock_for(engine.instance.device.type == "cuda")
    prefill, decode, per_rep = [], [], []
    for _ in tqdm(range(repeats), desc=f"timing {engine.kind}", unit="rep", disable=not progress or None,
                  leave=False):
        generate(engine, steps, clock=clock)
        marks = clock.collect()
        prefill += marks["prefill"]
        decode += marks["decode"]
        per_rep.append(statistics.fmean(marks["decode"]) if marks["decode"] else 0.0)
    timing = {"timer": clock.kind, "warmup": warmup, "repeats": repeats, "decode_steps": steps,
              "prefill_ms": stats(prefill)}
    if steps:
        timing["decode_step_ms"] = stats(decode)
        # Min-max over repetitions of each repetition's mean step: the run-to-run spread.
        timing["decode_step_ms_per_repeat"] = stats(per_rep)
    return {"timing": timing, "logits": logits, "tokens": tokens}


def compare(logits_a, tokens_a, logits_b, tokens_b, dtype: str) -> dict:
    """Max abs logit difference and token equality between two runs of the same prompt.

    Logits may be ones a manifest kept only the top-k of (NaN where not kept): the difference
    is over the entries both kept (``topk``: how many per position, when not all), and a
    position whose kept sets share under half their entries is not equal (``apart``)."""
    from ..analysis.outputs import logit_diff

    d = logit_diff(logits_a, logits_b)
    diff = d["max_abs_diff"]
    tol = TOLERANCE.get(dtype, 1e-4) * d["scale"]
    same_tokens = list(tokens_a) == list(tokens_b)
    return {"max_abs_diff": diff, "tolerance": tol, "tokens_equal": same_tokens, "topk": d["topk"],
            "apart": d["apart"], "equal": same_tokens and diff <= tol and not d["apart"]}
