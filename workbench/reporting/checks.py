"""What a report checks and admits: each trace's recorded outputs against the base's, and the
gaps ("not run / remaining gaps") the report could not close, with the reason for each.
"""

from __future__ import annotations

from ..trace.compiled import compiled_note
from ..trace.manifest import OUTPUTS, graph_counts, graph_note, inferred_note, lookup, section
from .inputs import Input, Sweep
from .model import Code, listing
from .provenance import ENV_ITEMS, NOT_RECORDED, env_value
from .timing import NOT_TIMED
from ..trace.words import Words

def outputs(meta: dict) -> dict | None:
    """The outputs a capture recorded, None where it recorded none."""
    return section(meta, OUTPUTS) or None


def _logits(o: dict):
    """Logits recorded by the capture (``outputs.decode_logits``: NaN where only the top-k of
    a position were kept), or None."""
    from ..analysis.outputs import decode_logits

    try:
        return decode_logits(o)
    except ValueError:
        return None


def _tolerance(meta: dict, scale: float) -> float | None:
    from ..vocabulary import OUTPUT_TOLERANCE as TOLERANCE

    dtype = lookup(meta, "capture", "engine_info", "dtype") or lookup(meta, "capture", "variant", "dtype")
    if dtype not in TOLERANCE:
        return None
    return TOLERANCE[dtype] * scale


def _item_facts(a: dict, b: dict) -> list[str]:
    """Outputs of profiled calls (``workbench.analysis.outputs`` encoding), compared item by item."""
    from ..analysis.outputs import compare, over_text

    c = compare(a, b)
    if c["equal"]:
        return [f"outputs equal ({c['items']} item(s), max abs diff {c['max_abs_diff']:.3g}{over_text(c['topk'])})"]
    return ["outputs DIFFER: " + "; ".join(c["differences"][:5])]


def _logit_fact(meta: dict, ob: dict, oo: dict, la, lb) -> str:
    """The max abs logit diff of two recorded runs, over the logits both kept."""
    from ..analysis.outputs import apart_text, logit_diff, logits_topk, over_text

    d = logit_diff(la, lb)
    sparse = logits_topk(ob) is not None or logits_topk(oo) is not None
    kept = d["topk"] if sparse else None
    if not sparse and d["topk"]:  # both kept in full: a NaN is a value
        return "logits DIFFER (NaN among them)"
    mad, tol = d["max_abs_diff"], _tolerance(meta, d["scale"])
    text = f"max abs logit diff {mad:.3g}{over_text(kept)}"
    if tol is not None:
        text += f" ({'within' if mad <= tol else 'OUTSIDE'} tolerance {tol:.3g})"
    if sparse and d["apart"]:
        text += f"; logits DIFFER: {apart_text(d['apart'], kept)}"
    return text


def correctness(inputs: list[Input]) -> tuple[list[list], list[list], list[str]]:
    """Each trace's recorded outputs against the base's: tokens equal, max abs logit diff."""
    lines: list[list] = []
    gaps: list[list] = []
    summaries: list[str] = []
    base = inputs[0]
    ob = outputs(base.meta)
    for other in inputs[1:]:
        oo = outputs(other.meta)
        if ob is None or oo is None:
            missing = [Code(i.name) for i, o in ((base, ob), (other, oo)) if o is None]
            gaps.append(["correctness of ", Code(other.name), " vs ", Code(base.name),
                         " not checked: no outputs recorded in ", listing(missing)])
            continue
        facts = _item_facts(ob, oo) if "items" in ob and "items" in oo else []
        tb, to = ob.get("tokens"), oo.get("tokens")
        if isinstance(tb, list) and isinstance(to, list):
            if tb == to:
                facts.append(f"greedy tokens identical ({len(tb)} tokens)")
            else:
                first = next((i for i, (x, y) in enumerate(zip(tb, to)) if x != y), min(len(tb), len(to)))
                facts.append(f"greedy tokens DIFFER (first at position {first} of {len(tb)})")
        la, lb = _logits(ob), _logits(oo)
        if la is not None and lb is not None:
            if la.shape != lb.shape:
                facts.append(f"logits of different shapes ({list(la.shape)} vs {list(lb.shape)})")
            else:
                facts.append(_logit_fact(base.meta, ob, oo, la, lb))
        if not facts:
            facts.append("outputs recorded, but in no form this report compares (" +
                         ", ".join(sorted(map(str, oo))) + ")")
        lines.append([f"{other.role} ", Code(other.name), " vs base ", Code(base.name), ": " + "; ".join(facts)])
        summaries.append("; ".join(facts))
    return lines, gaps, summaries


def gaps(inputs: list[Input], phases: list[dict], d, sweep: Sweep | None, corr_gaps: list,
         allow_mixed: bool, words: Words) -> list[list]:
    """"Not run / remaining gaps": what the report could not show, and why."""
    base, fix = inputs[0], inputs[1]
    per_trace: dict[str, list[Input]] = {}  # one line per kind of gap, naming every trace
    for i, ph in zip(inputs, phases):
        what = []
        if not ph:
            what.append(f"timing {NOT_TIMED}")
        device = str(lookup(i.meta, "capture", "device") or "")
        if device and not device.startswith("cuda"):
            what.append(f"captured on {device}, not on a GPU")
        elif not lookup(i.meta, "env", "gpu"):
            what.append("no GPU recorded in the trace's environment")
        missing = [label for label, paths in ENV_ITEMS
                   if label in ("torch", "triton", "Engine git revision", "Workbench git revision")
                   and env_value(label, paths, i) is None
                   and (label != "Engine git revision" or lookup(i.meta, "capture", "engine") is not None)]
        if missing:
            what.append(", ".join(missing) + " " + NOT_RECORDED)
        for w in what:
            per_trace.setdefault(w, []).append(i)
    gaps: list[list] = []
    for what, members in per_trace.items():  # insertion order: the order the checks run in
        gaps.append([what + ": ", listing((f"{i.role} ", Code(i.name)) for i in members)])
    for i in inputs:  # gaps the capture itself recorded
        for key in ("gaps", "not_run", "skipped"):
            listed = lookup(i.meta, "capture", key) or lookup(i.meta, key)
            for g in listed if isinstance(listed, list) else []:
                gaps.append([f"{i.role} ", Code(i.name), ": ", Code(str(g))])
    gaps += corr_gaps
    for side, inp in (("a", base), ("b", fix)):
        n = int(d.totals.get(f"unattributed_{side}", 0))
        if n:
            gaps.append([f"{inp.role} ", Code(inp.name), f": {n} {words.unit}(s) outside any range or without a launch "
                                                           "record (counted, not attributed to a layer)"])
    for i in inputs:  # graph kernels not under their capture-time ranges (layers)
        n, by_capture = graph_counts(i.meta)
        if by_capture < n and "only under the range around" in (graph_note(i.meta) or ""):
            gaps.append([f"{i.role} ", Code(i.name), f": {graph_note(i.meta)}"])
        c = i.meta.get("compiled") if isinstance(i.meta.get("compiled"), dict) else {}
        if c and (not c.get("call_sites") or c.get("unmatched")):  # compiled kernels without their modules
            gaps.append([f"{i.role} ", Code(i.name), f": {compiled_note(i.meta)}"])
        if note := inferred_note(i.meta):  # steps and layers that no range of the program gave
            gaps.append([f"{i.role} ", Code(i.name), f": {note}"])
    if none := d.nothing_in_common(("base", "fix")):
        gaps.append([f"{none}: no per-range comparison possible"])
    if sweep is not None:
        gaps += [["sweep: ", Code(s)] for s in sweep.not_run]
    engines = {str(lookup(i.meta, "capture", "engine")) for i in inputs if lookup(i.meta, "capture", "engine")}
    if engines:
        from ..vocabulary import ENGINE_KINDS as KINDS

        if sweep is not None:
            engines |= {str(v) for v in sweep.meta.get("engines", [])}
        missing = [k for k in KINDS if k not in engines]
        if missing:
            gaps.append(["engines without a capture in this report: " + ", ".join(missing)])
    if allow_mixed:
        gaps.append(["traces of different workloads were allowed (--allow-mixed): per-range numbers compare "
                     "different programs"])
    return gaps
