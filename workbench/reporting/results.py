"""The numbers a report leads with: timed phases from each capture's recorded timing, and
kernel launches and GPU time per step counted in the trace itself.
"""

from __future__ import annotations

from .. import textfmt as fmt
from .inputs import Input
from .model import Code, Headline, Mixed, Table
from .provenance import get

NOT_TIMED = "n/a (not captured with timing)"
NO_STEPS = "n/a (no step ranges)"


def phases(meta: dict) -> dict[str, dict]:
    """Timed phases of one trace: name -> {median, min, max, n, what}."""
    t = meta.get("timing")
    if not isinstance(t, dict):
        return {}
    out = {}
    pre = t.get("prefill_ms")
    if isinstance(pre, dict) and "median" in pre:
        out["prefill"] = dict(pre, what="per run")
    per_rep = t.get("decode_step_ms_per_repeat")
    dec = t.get("decode_step_ms")
    if isinstance(per_rep, dict) and "median" in per_rep:
        out["decode step"] = dict(per_rep, what="mean step per run")
    elif isinstance(dec, dict) and "median" in dec:
        out["decode step"] = dict(dec, what="per step")
    for k in sorted(t):
        if k.endswith("_ms") and k not in ("prefill_ms", "decode_step_ms") and isinstance(t[k], dict) \
                and "median" in t[k]:
            out[k[:-3].replace("_", " ")] = dict(t[k], what="")
    return out


def _stat_cell(s: dict, unit: str = "ms") -> str:
    mid, lo, hi = float(s["median"]), float(s.get("min", s["median"])), float(s.get("max", s["median"]))
    n = s.get("n")
    runs = f", {n} runs" if isinstance(n, int) else ""
    return f"{fmt.ms(mid)} {unit} ({fmt.ms(lo)}–{fmt.ms(hi)}{runs})"


def launches(inp: Input) -> dict | None:
    """Kernels and GPU time per decode step instance (the decode steps of
    :func:`workbench.analysis.launches_per_step`: outermost step-named ranges at any depth,
    else model calls, each counted even when it launched nothing; prefill left out), from the
    per-range totals; None without decode steps."""
    from ..analysis import launches_per_step

    lp = launches_per_step(inp.trace, phase="decode")
    if not len(lp):
        return None
    k = sorted(int(x) for x in lp["kernels"])
    g = sorted(int(x) for x in lp["gpu_time_ns"])
    return {"steps": len(lp), "kernels": k, "gpu_ns": g, "kernels_median": _median(k), "gpu_median": _median(g)}


def _median(xs: list) -> float:
    n = len(xs)
    return float(xs[n // 2]) if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def _launch_cell(lp: dict | None) -> str:
    if lp is None:
        return NO_STEPS
    k = lp["kernels"]
    if k[0] == k[-1]:
        return f"{k[0]} ({lp['steps']} steps)"
    return f"{fmt.num(lp['kernels_median'])} ({k[0]}–{k[-1]}, {lp['steps']} steps)"


def _gpu_cell(lp: dict | None) -> str:
    if lp is None:
        return NO_STEPS
    g = lp["gpu_ns"]
    return f"{fmt.us(lp['gpu_median'])} ({fmt.us_from_ns(g[0])}–{fmt.us_from_ns(g[-1])})"


def _change(a: dict | None, b: dict | None) -> str:
    if not a or not b:
        return "n/a"
    x, y = float(a["median"]), float(b["median"])
    r = fmt.ratio(y, x)
    return fmt.pct(y, x) + (f", {r}" if r else "")


def unit(inputs: list[Input]) -> str:
    """What the traces' kernel table holds: ``kernel`` (GPU), or e.g. ``cpu_op`` (CPU capture)."""
    shown = {"kernel": "kernel", "cpu_op": "CPU op"}
    units = sorted({str(get(i.meta, "source", "work_units") or "kernel") for i in inputs})
    return "/".join(shown.get(u, u.replace("_", " ")) for u in units)


def _timers(inputs: list[Input]) -> str:
    names = {"cuda_event": "CUDA events", "host": "host clock"}
    timers = sorted({str(get(i.meta, "timing", "timer")) for i in inputs if get(i.meta, "timing", "timer")})
    return "timer: " + ", ".join(names.get(t, t) for t in timers) if timers else "no timing recorded"


def _with_delta(cell: str, a: dict | None, b: dict | None) -> str:
    if not a or not b:
        return cell
    return f"{cell}; {fmt.pct(float(b['median']), float(a['median']))} vs base"


def results(inputs: list[Input], phases: list[dict], launches: list, unit: str) -> Table:
    """The "Commands and Results" table: timed phases, then launches and time per step."""
    base, fix, extras = inputs[0], inputs[1], inputs[2:]
    headers = ["Metric", Mixed(("base: ", Code(base.name))), Mixed(("fix: ", Code(fix.name))),
               "Change (fix vs base)"] + [Mixed((f"{e.role}: ", Code(e.name))) for e in extras]
    rows = []
    phase_names = ["prefill", "decode step"] + sorted({p for ph in phases for p in ph} - {"prefill", "decode step"})
    for p in phase_names:
        what = next((ph[p]["what"] for ph in phases if p in ph and ph[p].get("what")), "")
        label = f"{p} (median, min–max{', ' + what if what else ''})"
        cells = [(_stat_cell(ph[p]) if p in ph else NOT_TIMED) for ph in phases]
        row = [label, cells[0], cells[1], _change(phases[0].get(p), phases[1].get(p))]
        row += [_with_delta(c, phases[0].get(p), ph.get(p)) for c, ph in zip(cells[2:], phases[2:])]
        rows.append(row)
    lp_stat = [None if lp is None else {"median": lp["kernels_median"]} for lp in launches]
    gpu_stat = [None if lp is None else {"median": lp["gpu_median"]} for lp in launches]
    row = [f"{unit} launches per decode step (from the trace)", *[_launch_cell(lp) for lp in launches[:2]]]
    if launches[0] and launches[1]:
        a, b = launches[0]["kernels_median"], launches[1]["kernels_median"]
        row.append(f"{fmt.signed(b - a)} ({fmt.pct(b, a)})")
    else:
        row.append("n/a")
    row += [_with_delta(_launch_cell(lp), lp_stat[0], st) for lp, st in zip(launches[2:], lp_stat[2:])]
    rows.append(row)
    row = [f"{'GPU kernel' if unit == 'kernel' else unit} time per decode step (from the trace)",
           *[_gpu_cell(lp) for lp in launches[:2]], _change(gpu_stat[0], gpu_stat[1])]
    row += [_with_delta(_gpu_cell(lp), gpu_stat[0], st) for lp, st in zip(launches[2:], gpu_stat[2:])]
    rows.append(row)
    return Table(headers, rows, numeric=tuple(range(1, len(headers))),
                 note=f"Timed phases come from the timing recorded with each capture ({_timers(inputs)}; "
                      "median over repeated runs, min–max across runs); launches and their time per step are "
                      "counted in the trace itself, over its captured decode steps (step ranges)."
                      + ("" if unit == "kernel" else f" These traces hold {unit} events (a CPU capture), "
                                                     "not GPU kernels."))


def headline(phases: list[dict], launches: list, unit: str) -> list[Headline]:
    """The numbers a PR description leads with (base vs fix)."""
    out = []
    for p in ("prefill", "decode step"):
        if p in phases[0] and p in phases[1]:
            out.append(Headline(p, f"{fmt.ms(phases[0][p]['median'])} ms", f"{fmt.ms(phases[1][p]['median'])} ms",
                                _change(phases[0][p], phases[1][p])))
    if launches[0] and launches[1]:
        a, b = launches[0]["kernels_median"], launches[1]["kernels_median"]
        out.append(Headline(f"{unit} launches per decode step", fmt.num(a), fmt.num(b), fmt.pct(b, a)))
        ga, gb = launches[0]["gpu_median"], launches[1]["gpu_median"]
        out.append(Headline(f"{'GPU' if unit == 'kernel' else unit} time per decode step", fmt.us(ga),
                            fmt.us(gb), _change({"median": ga}, {"median": gb})))
    return out
