"""The numbers a report leads with: the timed phases (:mod:`.timing`), and per decode step,
counted in the trace itself, the work launched, its summed time and, for device work, how much
of the step the device was busy (:mod:`workbench.analysis.busy`); and the headline made of them.

A wall-time comparison can be confounded (:mod:`workbench.analysis.confounding`: a step whose
device is busy for less than ``HOST_BOUND`` of its wall time waits on the host; ranges the change
did not touch moved on the host beyond their noise): the headline then says so first, with the
evidence, leads with what the change moves (launches and device time per decode step) and gives
the wall times without a verdict.
"""

from __future__ import annotations

from .. import textfmt as fmt
from ..analysis.confounding import HOST_BOUND
from . import timing
from .inputs import Input
from .model import Code, Headline, Mixed, Table
from ..trace.words import Words, trace_words
from ..trace.words import words as words_of

NO_STEPS = "n/a (no step ranges)"
NO_DEVICE = "n/a (no device work: a CPU capture)"


def launches(inp: Input) -> dict | None:
    """Work launched and its summed time per decode step (the decode steps of
    :func:`workbench.analysis.launches_per_step`: outermost step-named ranges at any depth,
    else model calls, each counted even when it launched nothing; prefill left out), from the
    per-range totals; None without decode steps. ``kernels_mean`` and ``gpu_mean`` are the
    per-step numbers the diff reports (decode work over decode steps)."""
    from ..analysis import launches_per_step

    lp = launches_per_step(inp.trace, phase="decode")
    if not len(lp):
        return None
    k = sorted(int(x) for x in lp["kernels"])
    g = sorted(int(x) for x in lp["gpu_time_ns"])
    return {"steps": len(lp), "kernels": k, "gpu_ns": g, "kernels_mean": sum(k) / len(k), "gpu_mean": sum(g) / len(g)}


def busy(inp: Input) -> dict | None:
    """Median device busy time, wall time and busy fraction per decode step, with the fraction's
    min and max over steps; None for a trace whose work units are not device work, or without
    decode steps."""
    if not trace_words(inp.meta).device:
        return None
    from ..analysis.busy import busy_per_step

    b = busy_per_step(inp.trace)
    f = b["busy_fraction"].dropna()
    if not len(f):
        return None
    return {"busy_ns": float(b["gpu_busy_ns"].median()), "wall_ns": float(b["wall_ns"].median()),
            "fraction": float(f.median()), "lo": float(f.min()), "hi": float(f.max()), "steps": len(b)}


def _share(f: float) -> str:
    return f"{100 * f:.0f}%" if f >= 0.1 else f"{100 * f:.1f}%"


def _steps(n: int) -> str:
    return f"{n} step{'s' if n != 1 else ''}"


def _launch_cell(lp: dict | None) -> str:
    if lp is None:
        return NO_STEPS
    k = lp["kernels"]
    if k[0] == k[-1]:
        return f"{k[0]} ({_steps(lp['steps'])})"
    return f"{fmt.num(lp['kernels_mean'])} ({k[0]}–{k[-1]}, {_steps(lp['steps'])})"


def _time_cell(lp: dict | None) -> str:
    if lp is None:
        return NO_STEPS
    g = lp["gpu_ns"]
    return f"{fmt.us(lp['gpu_mean'])} ({fmt.us_from_ns(g[0])}–{fmt.us_from_ns(g[-1])})"


def _busy_cell(b: dict | None, inp: Input) -> str:
    if b is None:
        return NO_STEPS if trace_words(inp.meta).device else NO_DEVICE
    spread = "" if b["lo"] == b["hi"] else f" ({_share(b['lo'])}–{_share(b['hi'])})"
    return f"{fmt.us(b['busy_ns'])} / {fmt.us(b['wall_ns'])} = {_share(b['fraction'])}{spread}"


def _count_change(a: float, b: float) -> str:
    return f"{fmt.signed(b - a)} ({fmt.pct(b, a)})"


def _time_change(a: float, b: float) -> str:
    return f"{b / a:.2f}x ({fmt.pct(b, a)})" if a > 0 else "n/a"


def _busy_change(a: dict, b: dict) -> str:
    bound = [x["fraction"] < HOST_BOUND for x in (a, b)]
    label = ": host/launch-bound" if all(bound) else ": base host/launch-bound" if bound[0] else \
        ": fix host/launch-bound" if bound[1] else ""
    return f"{_share(a['fraction'])} → {_share(b['fraction'])}{label}"


def _timers(inputs: list[Input]) -> str:
    names = {"cuda_event": "CUDA events", "host": "host clock"}
    timed = [timing.recorded(i.meta) for i in inputs]
    timers = sorted({str(t["timer"]) for t in timed if t.get("timer")})
    text = "timer: " + ", ".join(names.get(t, t) for t in timers) if timers else "no timing recorded"
    benched = [i.role for i, t in zip(inputs, timed) if t.get("source") == "workbench bench"]
    if benched:  # a bench's samples replace the capture's: say whose
        text += "; " + ", ".join(benched) + " timed by workbench bench (variants interleaved round by round)"
    return text


def _note(inputs: list[Input], words: Words, busy_shown: bool) -> str:
    note = (f"Timed phases come from the timing recorded with each trace ({_timers(inputs)}; median over "
            f"repeated runs, min–max across them). {timing.method()} The rows from the trace are counted over "
            f"its captured decode steps (step ranges): {words.launches} and their time are the mean per step, "
            "as the diff counts them, with min–max over steps and no interval (a capture holds a few steps).")
    if busy_shown:
        note += (" GPU busy is the union of a step's kernels' intervals on every stream of its busiest device "
                 "(overlap counted once) over the step's wall time: the longer of its range on the host and its "
                 "kernels' span on the device (under CUDA graphs they run on past the range's end), so never above "
                 f"100%; median over steps. Below {HOST_BOUND:.0%} the step waits on the host (launches, Python, "
                 "synchronization): host/launch-bound, and its wall time measures the host more than the GPU work. "
                 "The traced steps ran under the profiler, which slows the host: their wall time can exceed the timed "
                 "decode step, and the fraction is then lower than without it.")
    cpu = [i for i in inputs if not trace_words(i.meta).device]
    if cpu:
        which = "These traces hold" if len(cpu) == len(inputs) else \
            ", ".join(i.role for i in cpu) + (" holds" if len(cpu) == 1 else " hold")
        note += f" {which} {words_of(i.meta for i in cpu).units}: no device busy time."
    return note


def _extra(cell: str, change: str) -> str:
    return cell if change == "n/a" else f"{cell}; vs base {change}"


def results(inputs: list[Input], phases: list[dict], comps: list[dict], launched: list, busies: list,
            words: Words, confounded: bool = False) -> Table:
    """The "Commands and Results" table: timed phases, then launches, time and busy per step.
    ``comps[i]``: phase -> comparison of trace i against the base (``comps[0]`` unused);
    ``confounded``: fix against base gets no wall-time verdict (``analysis.confounding``)."""
    base, fix, extras = inputs[0], inputs[1], inputs[2:]
    headers = ["Metric", Mixed(("base: ", Code(base.name))), Mixed(("fix: ", Code(fix.name))),
               "Change (fix vs base)"] + [Mixed((f"{e.role}: ", Code(e.name))) for e in extras]
    rows = []
    for p in timing.names(phases):
        what = next((ph[p]["what"] for ph in phases if p in ph and ph[p].get("what")), "")
        st = [ph.get(p) for ph in phases]
        ch = [timing.change(st[0], s, c.get(p), confounded and k == 1) for k, (s, c) in enumerate(zip(st, comps))]
        cells = [timing.stat_cell(s) for s in st]
        rows.append([f"{p} (median, min–max{', ' + what if what else ''})", cells[0], cells[1], ch[1],
                     *[_extra(c, x) for c, x in zip(cells[2:], ch[2:])]])
    la = launched[0]

    def trace_row(label: str, cell, change) -> list:
        vs = [change(la, lp) if la and lp else "n/a" for lp in launched]
        return [label, cell(launched[0]), cell(launched[1]), vs[1],
                *[_extra(cell(lp), x) for lp, x in zip(launched[2:], vs[2:])]]

    rows.append(trace_row(f"{words.launches} per decode step (from the trace)", _launch_cell,
                          lambda a, b: _count_change(a["kernels_mean"], b["kernels_mean"])))
    rows.append(trace_row(f"{words.time} per decode step (sum of {words.unit} durations, from the trace)", _time_cell,
                          lambda a, b: _time_change(a["gpu_mean"], b["gpu_mean"])))
    shown = any(b is not None for b in busies)
    if shown:
        ba = busies[0]
        vs = [_busy_change(ba, b) if ba and b else "n/a" for b in busies]
        cells = [_busy_cell(b, i) for b, i in zip(busies, inputs)]
        rows.append(["GPU busy per decode step / wall (from the trace)", cells[0], cells[1], vs[1],
                     *[_extra(c, x) for c, x in zip(cells[2:], vs[2:])]])
        rows.append(_projection_row(inputs))
    return Table(headers, rows, numeric=tuple(range(1, len(headers))), note=_note(inputs, words, shown))


def _projection_row(inputs: list) -> list:
    """Nsight Systems' GPU projection of a decode step (its first GPU start to its last end, as
    ``nvtx_gpu_proj_sum`` gives it), mean over the steps, beside the summed time above."""
    from ..analysis.gpu_projection import TITLE, step_projection

    p = [step_projection(i.trace) for i in inputs]
    vs = [_time_change(p[0], x) if p[0] == p[0] and x == x else "n/a" for x in p]
    cells = [fmt.us(x) for x in p]
    return [f"{TITLE} per decode step, mean (from the trace)", cells[0], cells[1], vs[1],
            *[_extra(c, x) for c, x in zip(cells[2:], vs[2:])]]


def _confounded(conf, words: Words) -> Headline:
    """The headline's first item when the wall-time comparison is confounded, with the evidence."""
    read = (f"the {words.launches} per decode step" if any(conf.interpreted)
            else f"the {words.launches} and {words.time} per decode step")
    return Headline("wall-time comparison", "", "",
                    f"confounded: {'; '.join(conf.reasons())}. Read {read}, which the change moves; the times below "
                    "carry no verdict", caveat=True)


def _unjudged(a: dict, b: dict) -> str:
    x, y = float(a["median"]), float(b["median"])
    return f"{y / x:.2f}x (confounded: no verdict)" if x > 0 else "n/a"


def headline(phases: list[dict], comps: list[dict], launched: list, busies: list, words: Words,
             conf=None, changed: list[str] = ()) -> list[Headline]:
    """The numbers a PR description leads with (base vs fix); ``conf``: the pair's
    :class:`~workbench.analysis.confounding.Confounding`, when known; ``changed``: what changed
    most, one line per range label (:func:`workbench.analysis.per_step.describe`), put first."""
    out = [Headline("changed most", "", "", line) for line in changed]
    confounded = conf is not None and conf.confounded
    la, lb = launched[0], launched[1]
    work = []
    if la and lb:
        work.append(Headline(f"{words.launches} per decode step", fmt.num(la["kernels_mean"]),
                             fmt.num(lb["kernels_mean"]), fmt.pct(lb["kernels_mean"], la["kernels_mean"])))
        work.append(Headline(f"{words.time} per decode step", fmt.us(la["gpu_mean"]), fmt.us(lb["gpu_mean"]),
                             _time_change(la["gpu_mean"], lb["gpu_mean"])))
    if confounded:
        if any(conf.interpreted):  # the counts first: the times, the "changed most" among them, are the interpreter's
            out = work[:1] + out + work[1:]
        else:
            out += work
        out.insert(0, _confounded(conf, words))
    for p in timing.ORDER:
        a, b = phases[0].get(p), phases[1].get(p)
        if a and b:
            change = _unjudged(a, b) if confounded else timing.change(a, b, comps[1].get(p))
            out.append(Headline(p, f"{fmt.ms(a['median'])} ms", f"{fmt.ms(b['median'])} ms", change))
    if not confounded:
        out += work
    return out
