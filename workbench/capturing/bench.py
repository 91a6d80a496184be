"""``bench``: interleaved A/B timing of several variants in one process.

Two captures are timed in two processes, often minutes apart: clocks, temperatures and the
machine's load differ between them, and a second capture of the same variant often moves by a
few percent. ``bench(A, B, ...)`` builds every variant once in this process, warms each up,
then runs ``rounds`` rounds; in each round every variant runs once, in an order shuffled
anew each round from a fixed seed, so whatever drifts during the run falls on all variants
alike and the order is the same on every run. Each variant's samples are those its capture
records (:func:`workbench.capturing.run.time_engine`, :func:`.calls.measure`): per round, the prefill and
the mean decode step of one repetition (and each step's time), or one call.

A variant is

* a stored trace whose manifest says how it was captured: a workload variant (``capture``:
  workload, variant, engine, decode steps, warm-up) or a ``--call`` / ``profile_call`` capture
  (its ``module:function`` target, called without arguments: a manifest records no call's
  arguments). A ``module:attribute`` a trace names (a call's function, a plugin workload) is
  imported only with ``trust_code``: nothing a trace holds runs unless the user says so. A
  command capture (``capture -- COMMAND``) ran another program and is refused;
* ``WORKLOAD:key=value,...``: a workload variant directly. The settings are split off at the
  last ``:`` (a plugin ``pkg.mod:ATTR:key=value`` works), ``engine=KIND`` picks the engine
  (default eager), every other key is a variant setting; ``decoder:`` is the defaults.
  Trace names cannot hold ``:``, so the two never mix (:mod:`.bench_refs`).

``store=True`` writes each stored trace's samples into its manifest as ``timing_bench``
(:mod:`.bench_store`), which :func:`workbench.analysis.stats.timed_samples` prefers to the
capture's own ``timing``.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ProgramFailed, WorkbenchError
from .bench_refs import Variant, place, variants as resolve_variants

SEED = 0  # the round orders: the same on every run


@dataclass
class BenchResult:
    """What :func:`bench` measured. ``labels``: the variants as given (a repeated one gets
    ``#2``); ``samples[label][metric]``: the samples, ms, per metric of the capture's timing
    (``decode_step_ms_per_repeat``, ``decode_step_ms``, ``prefill_ms``; or ``call_ms``);
    ``comparisons[label]``: each variant after the first against the first
    (:class:`workbench.analysis.stats.Comparison`, one per timed phase); ``timing[label]``:
    the samples as a manifest's ``timing`` holds them (median, min, max, samples);
    ``orders``: the labels in the order each round ran them; ``stored``: the manifests written."""

    labels: list[str]
    samples: dict[str, dict[str, list[float]]]
    comparisons: dict[str, list]
    timing: dict[str, dict]
    rounds: int
    device: str
    orders: list[list[str]] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)


def _device(variants: list[Variant], device: str | None, store: bool) -> str:
    """The device the workloads run on: ``device``, else the one their traces were captured
    on, else cuda when there is one."""
    from ..devices import require_device, resolve_device

    captured = {v.captured_on.split(" ")[0] for v in variants if v.kind == "workload" and v.captured_on}
    if device is None:
        if len(captured) > 1:
            raise WorkbenchError("bench", f"the traces were captured on {' and '.join(sorted(captured))}: "
                                          "pass the device to time them on")
        device = next(iter(captured)) if captured else resolve_device()
    require_device(device, " (the traces were captured on it; --device cpu times them here)" if captured else "")
    if variants[0].kind == "workload":
        _check_store(variants, device, store)
    return device


def _check_store(variants: list[Variant], device: str, store: bool) -> None:
    """Samples are stored only beside a capture timed where the bench times: the same kind of
    device and, on a GPU, the same model; anything else would pass for that capture's."""
    import torch

    if not store:
        return
    here = place(device, torch.cuda.get_device_name(device) if device.startswith("cuda") else None)
    for v in variants:
        if v.captured_on and v.captured_on != here:
            raise WorkbenchError(v.label, f"captured on {v.captured_on}: samples timed on {here} would be stored "
                                          "beside it (bench it there, or without --store)")


def _build(v: Variant, device: str) -> None:
    """The engine built (cached per variant by ``engines.build``), or the function imported."""
    import inspect

    if v.kind == "workload":
        from .. import engines

        if v.engine == "tensorrt":
            raise WorkbenchError(v.label, "a TensorRT engine runs inside trtexec: bench times Python engines only")
        engines.check(v.engine, device)
        v.run = engines.build(v.target, v.variant, v.engine, device)
        return
    from .calls import resolve_callable

    try:
        fn = resolve_callable(v.target)
    except WorkbenchError as e:
        hint = f" (captured in {v.cwd}: run bench there, or put its module on PYTHONPATH)" if v.cwd else ""
        raise WorkbenchError(v.label, f"{e.problem}{hint}") from None
    if isinstance(fn, type):
        raise WorkbenchError(v.label, f"{v.target} is a class: the capture called an object made from it, "
                                      "which bench cannot rebuild")
    try:
        inspect.signature(fn).bind()
    except TypeError:
        raise WorkbenchError(v.label, f"{v.target} takes arguments, and a capture does not record a call's "
                                      "arguments") from None
    except ValueError:  # no signature to inspect (a builtin): called as it is
        pass
    v.run = fn


def _once(v: Variant, clock) -> dict[str, list[float]]:
    """One repetition of ``v`` (the unit a capture times), timed by ``clock`` when given."""
    from . import run

    try:
        if v.kind == "workload":
            run.generate(v.run, v.steps, clock=clock)
        elif clock is None:
            v.run()
        else:
            with clock.phase("call"):
                v.run()
    except WorkbenchError:
        raise
    except Exception as e:  # the workload's or function's own failure: one line, cause kept
        raise ProgramFailed(v.label, f"run failed: {type(e).__name__}: {e}") from e
    return clock.collect() if clock is not None else {}


def bench(*refs, rounds: int = 10, device: str | None = None, store: bool = False, steps: int | None = None,
          root: str | Path | None = None, trust_code: bool = False, progress: bool = True) -> BenchResult:
    """Time the variants ``refs`` (stored trace names or directories, stored ``Trace`` objects,
    or ``WORKLOAD:key=value,...``) interleaved, ``rounds`` rounds; compare each against the first.

    ``device``: where workloads run (default: where their traces were captured, else cuda when
    there is one); a call runs where its function puts its work. ``steps``: decode steps per
    repetition (default: each trace's own, 3 for a spec). ``store``: write each stored
    trace's samples into its manifest as ``timing_bench``. ``trust_code``: import and run a
    ``module:attribute`` that a trace names (a call's function, a plugin workload)."""
    from ..trace.manifest import TIMING_BENCH
    from .bench_store import store_samples

    if rounds < 2:
        raise WorkbenchError("bench", "rounds must be at least 2 (each round gives every variant one sample)")
    if steps is not None and steps < 1:
        raise WorkbenchError("bench", "steps must be at least 1")
    variants = resolve_variants(refs, root, steps, store, trust_code)
    labels = [v.label for v in variants]
    device = _device(variants, device, store)
    for v in variants:
        _build(v, device)
    for v in variants:  # warm-up: compiled code, caches and graphs ready before any round
        for _ in range(v.warmup):
            _once(v, None)
    timed_on = _timed_on(variants, device, store)
    marks, orders, timer = _rounds(variants, rounds, timed_on, progress)
    context = {"source": "workbench bench", "timer": timer, "device": timed_on, "rounds": rounds, "seed": SEED,
               "variants": labels}
    timing = {v.label: _timing(marks[v.label], v, context) for v in variants}
    result = _result(labels, timing, rounds, timed_on, orders)
    if store:
        result.stored = store_samples([(v.path, timing[v.label]) for v in variants if v.path is not None])
        for r, v in zip(refs, variants):
            if hasattr(r, "meta") and v.path is not None:  # a Trace given: its manifest as now stored
                r.meta[TIMING_BENCH] = timing[v.label]
    return result


def _timed_on(variants: list[Variant], device: str, store: bool) -> str:
    """Where the timed work runs: the workloads' device; for calls, cuda when the warm-up
    calls used the GPU (as :func:`.calls.measure` decides)."""
    import sys

    if variants[0].kind == "workload":
        return device
    torch = sys.modules.get("torch")
    used = "cuda" if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"
    _check_store(variants, used, store)
    return used


def _rounds(variants: list[Variant], rounds: int, device: str, progress: bool):
    """Run the rounds: (label -> metric -> samples, each round's order of labels, timer kind)."""
    from tqdm.auto import tqdm

    from .run import clock_for

    clock = clock_for(device.startswith("cuda"))
    marks: dict[str, dict[str, list[float]]] = {v.label: {} for v in variants}
    orders, rng = [], random.Random(SEED)
    for _ in tqdm(range(rounds), desc="workbench: bench", unit="round", disable=not progress or None, leave=False):
        order = list(variants)
        rng.shuffle(order)
        orders.append([v.label for v in order])
        for v in order:
            got = _once(v, clock)  # collected after each run: one variant's marks at a time
            for k, values in got.items():
                marks[v.label].setdefault(k, []).extend(values)
            if got.get("decode"):  # the repetition's mean step: the unit that varies run to run
                marks[v.label].setdefault("per_repeat", []).append(statistics.fmean(got["decode"]))
    return marks, orders, clock.kind


def _timing(marks: dict[str, list[float]], v: Variant, context: dict) -> dict:
    """The samples shaped as a capture's ``timing`` (``run.stats`` per metric), with what the
    bench was (``context``: timer, device, rounds, seed, the variants it interleaved)."""
    from .run import stats as run_stats

    def stats(samples: list[float]) -> dict:
        # Rounded as the manifest keeps them first: the median shown is the one compared.
        return run_stats([round(x, 5) for x in samples])

    out = {**context, "warmup": v.warmup}
    if v.kind == "call":
        return {**out, "call_ms": stats(marks["call"])}
    return {**out, "decode_steps": v.steps, "prefill_ms": stats(marks["prefill"]),
            "decode_step_ms": stats(marks["decode"]), "decode_step_ms_per_repeat": stats(marks["per_repeat"])}


def _result(labels: list[str], timing: dict[str, dict], rounds: int, device: str, orders: list) -> BenchResult:
    """Samples and comparisons from the timing dicts (what ``timing_bench`` stores), so a diff
    of two stored traces afterwards compares exactly what the bench compared."""
    from ..analysis.stats import compare_timing

    samples = {lab: {k: list(v["samples"]) for k, v in t.items() if isinstance(v, dict) and "samples" in v}
               for lab, t in timing.items()}
    first = {"timing": timing[labels[0]]}
    comparisons = {lab: compare_timing(first, {"timing": timing[lab]}) for lab in labels[1:]}
    return BenchResult(labels, samples, comparisons, timing, rounds, device, orders)
