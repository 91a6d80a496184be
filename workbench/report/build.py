"""Build the :class:`~workbench.report.model.Report` from loaded inputs: numbers, tables, gaps.

Pure: the same traces (and sweep) give the same report. Nothing here reads the clock, the
working directory or the git checkout; revisions come from the traces' manifests.
"""

from __future__ import annotations

import shlex

from . import fmt
from .inputs import Input, Sweep
from .model import AlignGroup, Code, Headline, Mixed, Report, Table

NOT_TIMED = "n/a (not captured with timing)"
NOT_RECORDED = "not recorded"

# A range counts as changed when its kernel count differs in any layer, or when its GPU time
# per step (summed over layers) moved by at least this fraction and this many nanoseconds.
TIME_CHANGE = 0.20
TIME_CHANGE_NS = 1000.0
MAX_COLUMNS = 8  # changed ranges shown in the per-layer table (all are in the range table)
MAX_ALIGNMENTS = 12  # kernel-sequence groups shown
MAX_OPS = 200  # lines of one aligned sequence


# ---------------------------------------------------------------------------- timing / launches

def _phases(meta: dict) -> dict[str, dict]:
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


def _launches(inp: Input) -> dict | None:
    """Kernels and GPU time per step instance (top-level ranges matching the step regex),
    vectorized: one pass over the projected kernels whatever the number of steps."""
    import re

    import numpy as np

    from ..analysis import project
    from ..analysis.diff import STEP_REGEX

    r = inp.trace.ranges
    if not len(r):
        return None
    rx = re.compile(STEP_REGEX)
    names = r["name"].astype(str).to_numpy(dtype=object)
    is_step = (r["depth"].to_numpy() == 0) & np.array([bool(rx.search(n)) for n in names], dtype=bool)
    if not is_step.any():
        return None
    parent = r["parent"].to_numpy()
    root = np.arange(len(r))
    cur = parent.copy()
    while (m := cur >= 0).any():
        root[m] = cur[m]
        cur[m] = parent[cur[m]]
    p = project(inp.trace)
    rid = p["range_id"].to_numpy()
    ok = rid >= 0
    kroot = root[rid[ok]]
    dur = p["duration"].to_numpy()[ok]
    idx = np.flatnonzero(is_step)  # step instances, each counted even when it launched nothing
    pos = np.full(len(r), -1, dtype=np.int64)
    pos[idx] = np.arange(len(idx))
    kpos = pos[kroot]
    sel = kpos >= 0
    counts = np.bincount(kpos[sel], minlength=len(idx))
    gpu = np.bincount(kpos[sel], weights=dur[sel].astype(np.float64), minlength=len(idx))
    k = sorted(int(x) for x in counts)
    g = sorted(int(round(x)) for x in gpu)
    return {"steps": len(idx), "kernels": k, "gpu_ns": g, "kernels_median": _median(k), "gpu_median": _median(g)}


def _median(xs: list) -> float:
    n = len(xs)
    return float(xs[n // 2]) if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def _launch_cell(lp: dict | None) -> str:
    if lp is None:
        return "n/a (no step ranges)"
    k = lp["kernels"]
    if k[0] == k[-1]:
        return f"{k[0]} ({lp['steps']} steps)"
    return f"{fmt.num(lp['kernels_median'])} ({k[0]}–{k[-1]}, {lp['steps']} steps)"


def _gpu_cell(lp: dict | None) -> str:
    if lp is None:
        return "n/a (no step ranges)"
    g = lp["gpu_ns"]
    return f"{fmt.us_from_ns(lp['gpu_median'])} µs ({fmt.us_from_ns(g[0])}–{fmt.us_from_ns(g[-1])})"


# ---------------------------------------------------------------------------- metadata lookups

def _get(d: dict, *path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _first(meta: dict, *paths) -> str | None:
    for p in paths:
        v = _get(meta, *p)
        if v not in (None, "", [], {}):
            return _cuda_version(v) if p[-1] in ("cuda_runtime_version", "cuda_driver_version") else str(v)
    return None


def _cuda_version(v) -> str:
    """CUPTI/nsys report CUDA versions as 13000 -> ``13.0``."""
    if isinstance(v, int) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def _command(meta: dict) -> str:
    cmd = _get(meta, "capture", "command")
    if cmd is None:
        cmd = _get(meta, "source", "command")
    if cmd is None:
        return ""
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    return str(cmd)


def _tool(meta: dict) -> str:
    tool = _get(meta, "source", "tool")
    ver = _get(meta, "source", "tool_version")
    if tool and ver:
        return f"{tool} {ver}"
    return str(tool or ver or NOT_RECORDED)


# Rows of "Hardware, Environment and Revisions": label -> where to look (first hit wins).
ENV_ITEMS: list[tuple[str, tuple]] = [
    ("GPU", (("env", "gpu"), ("capture", "gpu"))),
    ("Driver", (("env", "driver"), ("env", "driver_version"))),
    ("CUDA (torch build)", (("env", "cuda"), ("env", "cuda_version"), ("env", "cuda_runtime_version"))),
    ("CUDA (driver API)", (("env", "cuda_driver_version"),)),
    ("torch", (("env", "torch"), ("env", "torch_version"))),
    ("triton", (("env", "triton"), ("env", "triton_version"))),
    ("Nsight Systems", (("env", "nsys"), ("env", "nsys_version"))),
    ("Profiler", ()),  # from source.tool / tool_version
    ("Python", (("env", "python"), ("env", "python_version"))),
    ("OS", (("env", "os"), ("env", "platform"))),
    ("Engine", ()),  # from capture.engine and capture.engine_info
    ("Engine git revision", (("env", "engine_git"), ("env", "engine_revision"), ("capture", "engine_revision"))),
    ("Workbench git revision", (("env", "git", "revision"), ("env", "workbench_revision"))),
]
_ENV_USED = {p[1] for _, paths in ENV_ITEMS for p in paths if p[0] == "env" and len(p) > 1}
# Recorded but machine-specific or shown elsewhere: listed under "other", never dropped.


def _engine(meta: dict) -> str | None:
    kind = _get(meta, "capture", "engine")
    if kind is None:
        return None
    info = _get(meta, "capture", "engine_info")
    extra = ""
    if isinstance(info, dict):
        keep = [f"{k}={info[k]}" for k in sorted(info) if k not in ("engine", "build_key", "artifacts")
                and isinstance(info[k], (str, int, float, bool))]
        extra = f" ({', '.join(keep)})" if keep else ""
    return f"{kind}{extra}"


def _env_value(label: str, paths: tuple, inp: Input) -> str | None:
    meta = inp.meta
    if label == "Profiler":
        return _tool(meta)
    if label == "Engine":
        return _engine(meta)
    v = _first(meta, *paths)
    if label == "Nsight Systems" and v is None and "nsight" in str(_get(meta, "source", "tool") or "").lower():
        v = _get(meta, "source", "tool_version")
        v = None if v is None else str(v)
    if label == "Workbench git revision" and v is not None:
        git = _get(meta, "env", "git")
        if isinstance(git, dict) and git.get("dirty"):
            v += " (with uncommitted changes)"
    if label == "Engine git revision" and v is None and _get(meta, "capture", "engine") is not None:
        rev = _get(meta, "env", "git", "revision")
        if rev:
            v = str(rev)  # the engines live in the workbench's repository
    return v


def _merge_cells(values: list[tuple[str, str | None]]) -> list:
    """One value when every trace agrees, else ``role: value`` for each."""
    shown = [(role, v if v is not None else NOT_RECORDED) for role, v in values]
    distinct = {v for _, v in shown}
    if len(distinct) == 1:
        return [Code(shown[0][1])] if shown[0][1] != NOT_RECORDED else [NOT_RECORDED]
    parts: list = []
    for i, (role, v) in enumerate(shown):
        if i:
            parts.append("; ")
        parts.append(f"{role}: ")
        parts.append(Code(v) if v != NOT_RECORDED else NOT_RECORDED)
    return [Mixed(tuple(parts))]


def _show(key: str, v) -> str | None:
    import json

    if v in (None, "", [], {}):
        return None
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    if key.endswith("_version") and isinstance(v, int):
        return _cuda_version(v)
    return str(v)


def _environment(inputs: list[Input]) -> Table:
    import workbench

    rows = []
    for label, paths in ENV_ITEMS:
        vals = [(i.role, _env_value(label, paths, i)) for i in inputs]
        rows.append([label, *_merge_cells(vals)])
    extra = sorted({k for i in inputs for k in (i.meta.get("env") or {}) if k not in _ENV_USED})
    for k in extra:
        vals = []
        for i in inputs:
            v = (i.meta.get("env") or {}).get(k)
            vals.append((i.role, _show(k, v)))
        rows.append([Code(k), *_merge_cells(vals)])
    rows.append(["Report generator", Code(f"workbench {workbench.__version__}")])
    note = "From each trace's manifest (recorded at capture time); one value when all traces agree."
    if any(_get(i.meta, "capture", "engine") is not None for i in inputs):
        note += " The engines are the workbench's own code, so their revision is the workbench's."
    return Table(["Item", "Value"], rows, note=note)


# ---------------------------------------------------------------------------- diff tables

def ranges_view(d):
    """``d.ranges`` with ``name`` made readable for keys that are not a range of their own:
    kernels launched directly inside a step show as ``(step)``, unattributed ones by their key."""
    r = d.ranges
    special = r["range"].astype(str).str.startswith("(")
    if special.any():
        r = r.copy()
        r["name"] = r["name"].astype(str).where(~special, r["range"].astype(str))
    return r


def _changed_names(d) -> list[str]:
    r = ranges_view(d)
    if not len(r):
        return []
    names = set(r.loc[r["kernels_a"] != r["kernels_b"], "name"].astype(str))
    names |= set(r.loc[r["status"] != "both", "name"].astype(str))
    g = r.groupby("name", sort=True)[["gpu_time_ns_a", "gpu_time_ns_b"]].sum()
    for name, row in g.iterrows():
        a, b = float(row["gpu_time_ns_a"]), float(row["gpu_time_ns_b"])
        if abs(b - a) >= TIME_CHANGE_NS and (a == 0 or abs(b - a) >= TIME_CHANGE * a):
            names.add(str(name))
    return sorted(names)


def _arrow(a: float, b: float) -> str:
    return fmt.num(a) if a == b else f"{fmt.num(a)} → {fmt.num(b)}"


def _layer_counts(d, names: list[str]) -> Table | None:
    lay = d.layers[(d.layers["layer"] >= 0) & d.layers["range"].astype(str).isin(names)]
    moved = set(lay.loc[lay["kernels_a"] != lay["kernels_b"], "range"].astype(str))
    lay = lay[lay["range"].astype(str).isin(moved)]  # time-only changes are in the range table
    if not len(lay):
        return None
    cols = sorted(set(lay["range"].astype(str)))
    more = 0
    if len(cols) > MAX_COLUMNS:  # keep the ranges whose kernel counts moved most
        moved = lay.assign(m=(lay["kernels_b"] - lay["kernels_a"]).abs()).groupby(lay["range"].astype(str))["m"].sum()
        keep = sorted(sorted(cols, key=lambda c: (-float(moved.get(c, 0)), c))[:MAX_COLUMNS])
        more = len(cols) - len(keep)
        cols = keep
        lay = lay[lay["range"].astype(str).isin(cols)]
    cells: dict[int, dict[str, str]] = {}
    for row in lay.itertuples(index=False):
        cells.setdefault(int(row.layer), {})[str(row.range)] = _arrow(row.kernels_a, row.kernels_b)
    layers = sorted(cells)
    # Merge runs of consecutive layers whose cells are identical: a 60-layer model stays short.
    groups: list[tuple[list[int], tuple]] = []
    for layer in layers:
        key = tuple(cells[layer].get(c, "–") for c in cols)
        if groups and groups[-1][1] == key and groups[-1][0][-1] == layer - 1:
            groups[-1][0].append(layer)
        else:
            groups.append(([layer], key))
    rows = [[fmt.layer_span(ls), *key] for ls, key in groups]
    return Table(["Layer(s)", *[Code(c) for c in cols]], rows, numeric=tuple(range(1, len(cols) + 1)),
                 note="Kernels launched per decode step in each changed range, base → fix "
                      "(consecutive layers with identical counts share a row)."
                      + (f" {more} more changed range(s) are in the table below." if more else ""))


def _range_times(d, names: list[str]) -> Table | None:
    r = ranges_view(d)
    r = r[r["name"].astype(str).isin(names)]
    if not len(r):
        return None
    rows = []
    for name, g in r.groupby(r["name"].astype(str), sort=True):
        ka, kb = float(g["kernels_a"].sum()), float(g["kernels_b"].sum())
        ta, tb = float(g["gpu_time_ns_a"].sum()), float(g["gpu_time_ns_b"].sum())
        status = sorted(set(g["status"].astype(str)))
        where = "only in base" if status == ["only_a"] else "only in fix" if status == ["only_b"] else ""
        rows.append([Code(name), str(len(g)) + (f" ({where})" if where else ""), _arrow(ka, kb),
                     f"{fmt.us_from_ns(ta)} → {fmt.us_from_ns(tb)}", fmt.pct(tb, ta)])
    return Table(["Range", "Instances per step", "Kernels per step", "GPU time per step (µs)", "Change"], rows,
                 numeric=(1, 2, 3, 4),
                 note=f"Summed over layers. A range is listed when its kernel count changed or its GPU time moved "
                      f"by at least {TIME_CHANGE:.0%} (and {TIME_CHANGE_NS / 1000:g} µs).")


def _runs(names: list[str]) -> list[tuple[str, int]]:
    out: list[list] = []
    for n in names:
        if out and out[-1][0] == n:
            out[-1][1] += 1
        else:
            out.append([n, 1])
    return [(n, c) for n, c in out]


def _alignments(d, names: list[str]) -> tuple[list[AlignGroup], int]:
    r = ranges_view(d)
    r = r[(r["status"] == "both") & r["name"].astype(str).isin(names)]
    groups: dict[tuple, list] = {}
    for row in r.itertuples(index=False):
        al = d.alignments.get(row.range)
        if al is None or not (al.removed or al.added):
            continue
        ops = tuple((op, n, c) for op, ks in al.ops for n, c in _runs(list(ks)))
        groups.setdefault((str(row.name), ops), []).append((int(row.layer), str(row.range)))
    out = []
    for (name, ops), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0][0], kv[1][0][1])):
        layers = [lay for lay, _ in members if lay >= 0]
        if len(layers) == len(members) and layers:
            where = f"layer{'s' if len(layers) > 1 else ''} {fmt.layer_span(layers)}"
        elif len(members) == 1 and members[0][1] == name:
            where = ""  # a range of its own, e.g. (step): kernels launched directly in the step
        else:
            where = ", ".join(k for _, k in sorted(members)[:6]) + (" …" if len(members) > 6 else "")
        removed = sum(c for op, _, c in ops if op == "removed")
        added = sum(c for op, _, c in ops if op == "added")
        out.append(AlignGroup(name, where, len(members), list(ops[:MAX_OPS]), removed, added,
                              truncated=max(0, len(ops) - MAX_OPS)))
    total = len(out)
    if total > MAX_ALIGNMENTS:  # keep the groups that changed most, in name order
        keep = sorted(out, key=lambda g: (-(g.removed + g.added) * g.count, g.range, g.where))[:MAX_ALIGNMENTS]
        out = [g for g in out if g in keep]
    return out, total


# ---------------------------------------------------------------------------- correctness

def _outputs(meta: dict) -> dict | None:
    o = meta.get("outputs")
    return o if isinstance(o, dict) and o else None


def _logits(o: dict):
    """Logits recorded by the capture (base64 float32, see capture/session.py), or None."""
    import base64

    import numpy as np

    b64, shape = o.get("logits_f32_b64"), o.get("logits_shape")
    if not isinstance(b64, str) or not isinstance(shape, list):
        return None
    try:
        arr = np.frombuffer(base64.b64decode(b64), dtype=np.float32)
        return arr.reshape([int(x) for x in shape])
    except (ValueError, TypeError):
        return None


def _tolerance(meta: dict, base_logits) -> float | None:
    from ..run import TOLERANCE

    dtype = _get(meta, "capture", "engine_info", "dtype") or _get(meta, "capture", "variant", "dtype")
    if dtype not in TOLERANCE:
        return None
    return TOLERANCE[dtype] * max(1.0, float(abs(base_logits).max()))


def _correctness(inputs: list[Input]) -> tuple[list[list], list[list], list[str]]:
    """Each trace's recorded outputs against the base's: tokens equal, max abs logit diff."""
    lines: list[list] = []
    gaps: list[list] = []
    summaries: list[str] = []
    base = inputs[0]
    ob = _outputs(base.meta)
    for other in inputs[1:]:
        oo = _outputs(other.meta)
        if ob is None or oo is None:
            missing = [i for i, o in ((base, ob), (other, oo)) if o is None]
            names = tuple(x for j, i in enumerate(missing) for x in ((", " if j else ""), Code(i.name)))
            gaps.append(["correctness of ", Code(other.name), " vs ", Code(base.name),
                         " not checked: no outputs recorded in ", Mixed(names)])
            continue
        facts = []
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
                mad = float(abs(la.astype("float64") - lb.astype("float64")).max()) if la.size else 0.0
                tol = _tolerance(base.meta, la)
                text = f"max abs logit diff {mad:.3g}"
                if tol is not None:
                    text += f" ({'within' if mad <= tol else 'OUTSIDE'} tolerance {tol:.3g})"
                facts.append(text)
        if not facts:
            facts.append("outputs recorded, but in no form this report compares (" +
                         ", ".join(sorted(map(str, oo))) + ")")
        lines.append([f"{other.role} ", Code(other.name), " vs base ", Code(base.name), ": " + "; ".join(facts)])
        summaries.append("; ".join(facts))
    return lines, gaps, summaries


# ---------------------------------------------------------------------------- the report

def _variant_changes(base: Input, fix: Input) -> list[tuple[str, str, str]]:
    out = []
    for key in ("workload", "engine", "backend"):
        a, b = _get(base.meta, "capture", key), _get(fix.meta, "capture", key)
        if a is not None and b is not None and a != b:
            out.append((key, str(a), str(b)))
    va, vb = _get(base.meta, "capture", "variant"), _get(fix.meta, "capture", "variant")
    if isinstance(va, dict) and isinstance(vb, dict):
        for k in sorted(set(va) | set(vb), key=str):
            if va.get(k) != vb.get(k):
                out.append((f"variant.{k}", str(va.get(k, "–")), str(vb.get(k, "–"))))
    return out


def _change(a: dict | None, b: dict | None) -> str:
    if not a or not b:
        return "n/a"
    x, y = float(a["median"]), float(b["median"])
    r = fmt.ratio(y, x)
    return fmt.pct(y, x) + (f", {r}" if r else "")


def _unit(inputs: list[Input]) -> str:
    """What the traces' kernel table holds: ``kernel`` (GPU), or e.g. ``cpu_op`` (CPU capture)."""
    shown = {"kernel": "kernel", "cpu_op": "CPU op"}
    units = sorted({str(_get(i.meta, "source", "work_units") or "kernel") for i in inputs})
    return "/".join(shown.get(u, u.replace("_", " ")) for u in units)


def _timers(inputs: list[Input]) -> str:
    names = {"cuda_event": "CUDA events", "host": "host clock"}
    timers = sorted({str(_get(i.meta, "timing", "timer")) for i in inputs if _get(i.meta, "timing", "timer")})
    return "timer: " + ", ".join(names.get(t, t) for t in timers) if timers else "no timing recorded"


def _with_delta(cell: str, a: dict | None, b: dict | None) -> str:
    if not a or not b:
        return cell
    return f"{cell}; {fmt.pct(float(b['median']), float(a['median']))} vs base"


def _results(inputs: list[Input], phases: list[dict], launches: list, unit: str) -> Table:
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


def _headline(phases: list[dict], launches: list, unit: str) -> list[Headline]:
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
        out.append(Headline(f"{'GPU' if unit == 'kernel' else unit} time per decode step", f"{fmt.us_from_ns(ga)} µs",
                            f"{fmt.us_from_ns(gb)} µs", _change({"median": ga}, {"median": gb})))
    return out


def _gaps(inputs: list[Input], phases: list[dict], d, sweep: Sweep | None, corr_gaps: list,
          allow_mixed: bool) -> list[list]:
    """"Not run / remaining gaps": what the report could not show, and why."""
    base, fix = inputs[0], inputs[1]
    per_trace: dict[str, list[Input]] = {}  # one line per kind of gap, naming every trace
    for i, ph in zip(inputs, phases):
        what = []
        if not ph:
            what.append(f"timing {NOT_TIMED}")
        device = str(_get(i.meta, "capture", "device") or "")
        if device and not device.startswith("cuda"):
            what.append(f"captured on {device}, not on a GPU")
        elif not _get(i.meta, "env", "gpu"):
            what.append("no GPU recorded in the trace's environment")
        missing = [label for label, paths in ENV_ITEMS
                   if label in ("torch", "triton", "Engine git revision", "Workbench git revision")
                   and _env_value(label, paths, i) is None]
        if missing:
            what.append(", ".join(missing) + " " + NOT_RECORDED)
        for w in what:
            per_trace.setdefault(w, []).append(i)
    gaps: list[list] = []
    for what, members in per_trace.items():  # insertion order: the order the checks run in
        who: list = []
        for j, i in enumerate(members):
            who += ([", "] if j else []) + [f"{i.role} ", Code(i.name)]
        gaps.append([what + ": ", Mixed(tuple(who))])
    for i in inputs:  # gaps the capture itself recorded
        for key in ("gaps", "not_run", "skipped"):
            listed = _get(i.meta, "capture", key) or i.meta.get(key)
            for g in listed if isinstance(listed, list) else []:
                gaps.append([f"{i.role} ", Code(i.name), ": ", Code(str(g))])
    gaps += corr_gaps
    for side, inp in (("a", base), ("b", fix)):
        n = int(d.totals.get(f"unattributed_{side}", 0))
        if n:
            gaps.append([f"{inp.role} ", Code(inp.name), f": {n} kernel(s) outside any range or without a launch "
                                                           "record (counted, not attributed to a layer)"])
    for i in inputs:
        k = i.trace.kernels
        if len(k) and bool(k["graph"].any()):
            gaps.append([f"{i.role} ", Code(i.name), f": {int(k['graph'].sum())} kernel(s) launched from CUDA "
                                                     "graphs, attributed through their graph launch (to the step, not to a layer)"])
    if d.common == 0:
        gaps.append(["base and fix share no range path: no per-range comparison possible"])
    if sweep is not None:
        gaps += [["sweep: ", Code(s)] for s in sweep.not_run]
    engines = {str(_get(i.meta, "capture", "engine")) for i in inputs if _get(i.meta, "capture", "engine")}
    if engines:
        from ..engines import KINDS

        if sweep is not None:
            engines |= {str(v) for v in sweep.meta.get("engines", [])}
        missing = [k for k in KINDS if k not in engines]
        if missing:
            gaps.append(["engines without a capture in this report: " + ", ".join(missing)])
    if allow_mixed:
        gaps.append(["traces of different workloads were allowed (--allow-mixed): per-range numbers compare "
                     "different programs"])
    return gaps


def _provenance(inputs: list[Input], sweep: Sweep | None) -> Table:
    rows = []
    for i in inputs:
        src = i.meta.get("source") or {}
        rows.append([i.role, Code(i.name), Code(str(src.get("file", i.name))), Code(str(src.get("format", "?"))),
                     Code(_tool(i.meta)), Code(i.hash_kind), Code(i.sha256)])
    if sweep is not None:
        rows.append(["sweep", Code(sweep.source), Code(sweep.source), Code("json"), "", Code("file sha256"),
                     Code(sweep.sha256)])
    return Table(["Role", "Trace", "Captured file", "Format", "Tool", "Hash", "SHA-256"], rows)


def _sweep_table(sweep: Sweep) -> Table:
    """One row per (metric, series), one column per context length."""
    contexts = sorted({r["context"] for r in sweep.rows}, key=float)
    cells: dict[tuple, dict] = {}
    for r in sweep.rows:
        n = f", {r['n']} runs" if r.get("n") else ""
        spread = "" if r["min"] == r["max"] == r["median"] else f" ({fmt.ms(r['min'])}–{fmt.ms(r['max'])}{n})"
        cells.setdefault((r["metric"], r["series"]), {})[r["context"]] = \
            f"{fmt.ms(r['median'])} {r.get('unit', 'ms')}{spread}"
    order = sorted(cells, key=lambda k: (_metric_rank(k[0]), k[0], k[1]))
    rows = [[Code(m), Code(s), *[cells[(m, s)].get(c, "–") for c in contexts]] for m, s in order]
    return Table(["Metric", "Series", *[f"context {c}" for c in contexts]], rows,
                 numeric=tuple(range(2, 2 + len(contexts))),
                 note="Median (min–max over runs) of each point; a series is what differs between the "
                      "sweep's captures.")


def _metric_rank(metric: str) -> int:
    return {"decode_step": 0, "prefill": 1}.get(metric, 2)


def _regenerate(inputs: list[Input], sweep: Sweep | None, title: str | None, allow_mixed: bool) -> str:
    """The command that regenerates this report (trace names, not the paths they were read from)."""
    regen = ["workbench", "report", *[i.name for i in inputs]]
    if sweep is not None:
        regen += ["--sweep", sweep.source]
    if title:
        regen += ["--title", title]
    if allow_mixed:
        regen.append("--allow-mixed")
    return shlex.join(regen + ["-o", "report.html", "--md", "report.md"])


def build(inputs: list[Input], d, sweep: Sweep | None = None, *, title: str | None = None,
          allow_mixed: bool = False) -> Report:
    """The report model of ``inputs`` (base, fix, extras), their diff ``d`` and a sweep."""
    import workbench

    base, fix, extras = inputs[0], inputs[1], inputs[2:]
    phases = [_phases(i.meta) for i in inputs]
    launches = [_launches(i) for i in inputs]
    unit = _unit(inputs)
    headline = _headline(phases, launches, unit)
    correctness, corr_gaps, corr_summary = _correctness(inputs)
    if _outputs(base.meta) is not None and _outputs(fix.meta) is not None:
        headline.append(Headline("outputs", "", "", corr_summary[0]))
    names = _changed_names(d)
    aligned, n_aligned = _alignments(d, names) if names else ([], 0)
    return Report(
        title=title or f"{base.name} → {fix.name}",
        subtitle=["base ", Code(base.name), " → fix ", Code(fix.name)] +
                 [x for e in extras for x in (f", {e.role} ", Code(e.name))],
        headline=headline,
        commands=[(i.role, i.name, _command(i.meta)) for i in inputs],
        results=_results(inputs, phases, launches, unit),
        variant_changes=_variant_changes(base, fix),
        layer_counts=_layer_counts(d, names) if names else None,
        range_times=_range_times(d, names) if names else None,
        alignments=aligned,
        alignments_total=n_aligned,
        changed_ranges=names,
        correctness=correctness,
        environment=_environment(inputs),
        provenance=_provenance(inputs, sweep),
        sweep=_sweep_table(sweep) if sweep is not None else None,
        sweep_note=_sweep_note(sweep) if sweep is not None else [],
        gaps=_gaps(inputs, phases, d, sweep, corr_gaps, allow_mixed),
        regenerate=_regenerate(inputs, sweep, title, allow_mixed),
        generator=f"workbench {workbench.__version__}",
        roles=[(i.role, i.name) for i in inputs],
    )


def _sweep_note(sweep: Sweep) -> list[list]:
    """Lines: each metric's series at the longest context they share; what was left out."""
    lines: list[list] = []
    for metric in sorted(sweep.metrics, key=lambda m: (_metric_rank(m), m)):
        rows = [r for r in sweep.rows if r["metric"] == metric]
        by: dict[str, dict] = {}
        for r in rows:
            by.setdefault(r["series"], {})[r["context"]] = r["median"]
        series = sorted(by)
        if len(series) < 2:
            continue
        common = set.intersection(*(set(v) for v in by.values()))
        if not common:
            continue
        c = max(common, key=float)
        unit = rows[0].get("unit", "ms")
        parts: list = [f"{metric.replace('_', ' ')} at context {c}: "]
        for j, sname in enumerate(series):
            parts += ([", "] if j else []) + [Code(sname), f" {fmt.ms(by[sname][c])} {unit}"]
        lines.append(parts)
    groups = sweep.meta.get("left_out_groups") or []
    if groups:
        lines.append(["not part of the sweep (a single context length): group(s) ",
                      Mixed(tuple(x for j, g in enumerate(groups) for x in ((", " if j else ""), Code(g))))])
    left = sweep.meta.get("left_out") or []
    if left:
        lines.append(["measured at one context length only, so not plotted: ",
                      Mixed(tuple(x for j, g in enumerate(left) for x in ((", " if j else ""), Code(g))))])
    return lines
