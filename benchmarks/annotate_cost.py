"""Cost of one annotate range, enabled and disabled, and its share of a decode step.

    python benchmarks/annotate_cost.py --device cpu  --out benchmarks/results/annotate_cost_cpu.json
    python benchmarks/annotate_cost.py --device cuda --out benchmarks/results/annotate_cost_h200.json

Per-range cost is the mean over a tight loop of ``with annotate(name): pass`` minus the same
loop over a do-nothing context manager (the floor Python charges for any ``with``), rounds of
the three interleaved; with torch ranges on (``record_function`` too), it is measured both
without a profiler and inside a CPU torch.profiler session. The share
of a decode step compares that cost times the ranges a step opens against the measured step,
and the step itself is also timed with ranges on and off (eager, kv_write=fused), in
alternating blocks; the step medians are the medians of the blocks' medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.instrument.ranges import annotate, set_enabled, torch_ranges  # noqa: E402


class _Floor:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def per_call_ns(cm, n: int) -> float:
    """Mean time of one ``with cm("kv_write"): pass`` over ``n`` iterations."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with cm("kv_write"):
            pass
    return (time.perf_counter_ns() - t0) / n


def range_costs(n: int, rounds: int = 15) -> dict:
    """Per round, the bare ``with``, ranges on and ranges off one after another; the costs are
    the medians over rounds of each round's difference, so a noisy neighbour (a shared VM)
    shifts all three alike and cancels out. Then ranges with torch ranges on (each also opens a
    ``record_function``), without a profiler and inside a CPU torch.profiler session."""
    import torch

    per_round = max(1, n // rounds)
    on, off, floor = [], [], []
    for _ in range(rounds):
        f = per_call_ns(_Floor, per_round)
        set_enabled(True)
        on.append(per_call_ns(annotate, per_round) - f)
        set_enabled(False)
        off.append(per_call_ns(annotate, per_round) - f)
        floor.append(f)
    set_enabled(True)
    base = statistics.median(floor)
    few = max(1, n // 10)
    with torch_ranges():
        unprofiled = statistics.median(per_call_ns(annotate, few) for _ in range(3))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            profiled = statistics.median(per_call_ns(annotate, few) for _ in range(3))
    return {"floor_ns": base, "enabled_ns": statistics.median(on), "disabled_ns": statistics.median(off),
            "torch_ranges_no_profiler_ns": unprofiled - base, "torch_profiler_active_ns": profiled - base,
            "loop_iterations": n, "rounds": rounds}


BLOCKS = 4  # per state


def decode_share(device: str, repeats: int, variant: dict) -> dict:
    from workbench import workloads
    from workbench.engines import build
    from workbench.capturing.run import time_engine

    v = workloads.resolve("decoder", {"kv_write": "fused", **variant})
    engine = build("decoder", v, "eager", device)
    # Blocks with ranges on and off alternate (after one warm-up block, as a GPU's clocks
    # ramp up): a drift over the run then touches both states alike.
    time_engine(engine, steps=3, repeats=max(1, repeats // 4), warmup=3, progress=False)
    blocks: dict[str, list] = {"enabled": [], "disabled": []}
    for i in range(2 * BLOCKS):
        state = i % 2 == 1
        set_enabled(state)
        t = time_engine(engine, steps=3, repeats=max(1, repeats // BLOCKS), warmup=1, progress=False)["timing"]
        blocks["enabled" if state else "disabled"].append(t["decode_step_ms"])
    set_enabled(True)
    out = {state: {"median": statistics.median(b["median"] for b in got), "min": min(b["min"] for b in got),
                   "max": max(b["max"] for b in got), "n": sum(b["n"] for b in got), "blocks": len(got)}
           for state, got in blocks.items()}
    out["ranges_per_step"] = 2 + 5 * v["layers"]  # step_i, lm_head, and layer + 4 regions per layer
    out["variant"] = v
    out["timer"] = t["timer"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch

    from workbench.workloads import parse_assignments

    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # the fused kernel runs interpreted on CPU
    costs = range_costs(args.n)
    share = decode_share(args.device, args.repeats, parse_assignments(args.variant))
    step_ms = share["enabled"]["median"]
    ranges_ms = share["ranges_per_step"] * costs["enabled_ns"] / 1e6
    result = {
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
        "torch": torch.__version__, "host": platform.node(),
        "per_range": costs,
        "decode_step": share,
        "share_of_decode_step": ranges_ms / step_ms,
        "summary": (f"{costs['enabled_ns']:.0f} ns per range enabled, {costs['disabled_ns']:.0f} ns disabled "
                    f"(over a {costs['floor_ns']:.0f} ns bare `with`); with torch ranges "
                    f"{costs['torch_ranges_no_profiler_ns']:.0f} ns without a profiler, "
                    f"{costs['torch_profiler_active_ns']:.0f} ns inside one; {share['ranges_per_step']} ranges per "
                    f"decode step = {ranges_ms * 1e3:.1f} us = {100 * ranges_ms / step_ms:.2f}% of a "
                    f"{step_ms:.3f} ms step (measured: {share['enabled']['median']:.3f} ms with ranges, "
                    f"{share['disabled']['median']:.3f} ms without)"),
    }
    print(result["summary"])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
