"""Results of the tensor-parallel campaign (benchmarks/h200_tp.sh) from its stored trace sets.

    python3 benchmarks/tp_results.py TRACES_ROOT OUT_PREFIX [--prefix h200-tp]

writes OUT_PREFIX.json and OUT_PREFIX.md. Per set (``h200-tp*``, one member per rank):

* per rank: decode-step latency (median of the per-repetition mean steps, its 95% bootstrap
  interval, min-max), kernels and GPU time per decode step, the collectives' (NCCL kernels; on
  a CPU, gloo's ranges) time and share per step, and in how many steps it was the straggler;
* per rank and layer: kernels and GPU time per decode step of each region under the layer
  (``qkv``, ``kv_write``, ``attention``, ``attention/allreduce``, ``mlp``, ``mlp/allreduce``);
* per rank, layer and step: the collectives and their time (``analysis.ranks``), and per step
  the straggler (the rank the others waited for) and its lag;
* checks: kv_write's kernels per layer on every rank, and two collectives (attention's and the
  MLP's all-reduce) in every layer of every step on every rank.

And per pair (kv_write unfused -> fused, cache full -> bucketed; same TP and backend), rank
against rank: the decode-step ratio with its interval and verdict (``analysis.stats``) and
whether the outputs are equal; per set, each rank's outputs against the TP=1 capture of the
same variant (``h200-tp1-...-torch``, a plain trace) where the store holds one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402
from workbench.sets.executors import Executor  # noqa: E402
from workbench.analysis.stats import CONFIDENCE, RESAMPLES, compare_timing  # noqa: E402
from workbench.analysis.steps import trace_steps_info  # noqa: E402

_REGION = re.compile(r"layer_\d+/(.+)$")
# Every per-member task in this process: the sets are small, a pool's start costs more.
HERE = Executor("local", workers=1)
PAIRS = (("kvwrite-unfused", "kvwrite-fused"), ("cache-full", "cache-bucketed"))


def median_ci(samples: list[float]) -> dict:
    """Median, its percentile-bootstrap interval (seeded: the same samples, the same interval),
    min, max and n."""
    x = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(20261201)
    meds = np.median(x[rng.integers(0, len(x), size=(RESAMPLES, len(x)))], axis=1)
    lo, hi = np.quantile(meds, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return {"median": float(np.median(x)), "ci_low": float(lo), "ci_high": float(hi), "min": float(x.min()),
            "max": float(x.max()), "n": int(len(x))}


def per_layer(trace) -> list[dict]:
    """Kernels and GPU time per decode step of each region of each layer."""
    p = wb.project(trace)
    decode = p[(p["phase"] == "decode") & (p["layer"] >= 0)]
    steps = max(trace_steps_info(trace).count(), 1)
    region = decode["path"].astype(str).map(lambda s: (m := _REGION.search(s)) and m.group(1) or "(layer)")
    g = decode.assign(region=region).groupby(["layer", "region"], observed=True)["duration"]
    return [{"layer": int(layer), "region": str(reg), "kernels": n / steps, "gpu_us": float(ns) / steps / 1e3}
            for (layer, reg), n, ns in zip(g.size().index, g.size(), g.sum())]


def one_set(ts) -> dict:
    cap = ts.meta.get("capture", {})
    variant = cap.get("variant", {})
    overview = ts.summary(by="rank").set_index("rank")
    steps = ts.steps()
    coll = ts.collectives()
    strag = ts.stragglers()
    ranks = []
    for rank in sorted(ts.members["rank"]):
        trace = ts.trace(rank)
        timing = trace.meta.get("timing", {})
        samples = (timing.get("decode_step_ms_per_repeat") or timing.get("decode_step_ms") or {}).get("samples")
        mine = steps[steps["rank"] == rank]
        c = coll[(coll["rank"] == rank) & coll["step"].astype(str).isin(set(mine["step"].astype(str)))]
        layers = c.groupby("layer")
        o = overview.loc[rank]
        ranks.append({
            "rank": int(rank), "device": trace.meta.get("capture", {}).get("device"),
            "timer": timing.get("timer"), "decode_step_ms": median_ci(samples) if samples else None,
            "kernels_per_decode_step": float(mine["kernels"].mean()) if len(mine) else None,
            "busy_us_per_decode_step": float(mine["busy_ns"].mean()) / 1e3 if len(mine) else None,
            "step_wall_us": float(mine["wall_ns"].mean()) / 1e3 if len(mine) else None,
            "collective_us_per_decode_step": float(mine["collective_ns"].mean()) / 1e3 if len(mine) else None,
            "collective_share": float(mine["collective_share"].mean()) if len(mine) else None,
            "straggler_steps": int(o["straggler_steps"]),
            "per_layer": per_layer(trace),
            "collectives_per_layer": [
                {"layer": int(layer), "per_step": float(g["collectives"].mean()),
                 "us_per_step": float(g["collective_ns"].mean()) / 1e3, "share_of_step": float(g["share_of_step"].mean())}
                for layer, g in layers],
            "collectives_per_layer_step": [
                {"layer": int(r.layer), "step": str(r.step), "collectives": int(r.collectives),
                 "us": r.collective_ns / 1e3} for r in c.itertuples()],
            "comm_env": trace.meta.get("distributed", {}).get("env"),
        })
    n_layers = int(variant.get("layers", 0))
    checks = {
        "kv_write_kernels_per_layer": sorted({x["kernels"] for r in ranks for x in r["per_layer"]
                                              if x["region"] == "kv_write"}),
        # Every rank, layer and decode step: the two all-reduces, in that layer.
        "two_collectives_in_every_layer_and_step": all(
            len(r["collectives_per_layer_step"]) == n_layers * len(set(steps[steps["rank"] == r["rank"]]["step"]))
            and all(x["collectives"] == 2 for x in r["collectives_per_layer_step"]) for r in ranks),
        "collectives_outside_layers": int(coll[(coll["layer"] < 0)
                                               & coll["step"].astype(str).str.startswith("step_")]["collectives"].sum()),
    }
    return {
        "name": ts.name, "tp": int(variant.get("tp", len(ranks))), "backend": cap.get("backend"),
        "engine": cap.get("engine"),
        "variant": {k: variant.get(k) for k in ("kv_write", "cache_rows", "ctx", "rows", "layers", "heads", "head_dim",
                                                "mlp_dim", "dtype")},
        "command_line": cap.get("command_line"),
        "gpus": sorted({str((ts.trace(r).meta.get("env") or {}).get("gpu")) for r in ts.members["rank"]}),
        "ranks": ranks,
        "stragglers": [{"step": str(r.step), "straggler": int(r.straggler), "lag_us": float(r.lag_ns) / 1e3,
                        "wall_us": float(r.wall_ns) / 1e3} for r in strag.itertuples()],
        "checks": checks,
    }


def same_outputs(meta_a: dict, meta_b: dict) -> dict | None:
    """Greedy tokens and logits of two captures compared (``run.compare``, the dtype's
    tolerance), None where either kept none."""
    from workbench.capturing.session import decode_outputs
    from workbench.capturing.run import compare

    if not meta_a.get("outputs") or not meta_b.get("outputs"):
        return None
    dtype = (meta_a.get("capture", {}).get("engine_info") or {}).get("dtype", "float32")
    c = compare(*decode_outputs(meta_a["outputs"]), *decode_outputs(meta_b["outputs"]), dtype)
    return {k: c[k] for k in ("equal", "tokens_equal", "max_abs_diff", "tolerance")}


def against_tp1(root: str, ts) -> list[dict]:
    """Each rank's outputs against the TP=1 capture of the same variant (``h200-tp1-...-torch``)."""
    ref_name = re.sub(r"-tp\d+-", "-tp1-", ts.name)
    ref_name = re.sub(r"-(nsys|torch)$", "-torch", ref_name)
    if ref_name not in wb.list_traces(root):
        return []
    ref = wb.open_trace(ref_name, root=root).meta
    return [{"rank": int(r), "reference": ref_name, **(same_outputs(ref, ts.trace(r).meta) or {})}
            for r in sorted(ts.members["rank"])]


def pairs(root: str, names: list[str]) -> list[dict]:
    out = []
    for a_name in names:
        for a_tag, b_tag in PAIRS:
            if a_tag not in a_name:
                continue
            b_name = a_name.replace(a_tag, b_tag)
            if b_name not in names:
                continue
            a, b = wb.open_set(a_name, root=root, executor=HERE), wb.open_set(b_name, root=root, executor=HERE)
            rows = []
            for rank in sorted(set(a.members["rank"]) & set(b.members["rank"])):
                ma, mb = a.trace(rank).meta, b.trace(rank).meta
                cmp = [c for c in compare_timing(ma, mb) if c.metric == "decode_step_ms"]
                rows.append({"rank": int(rank), "decode_step": cmp[0].as_dict() if cmp else None,
                             "decode_step_text": cmp[0].describe() if cmp else None,
                             "outputs": same_outputs(ma, mb)})
            out.append({"a": a_name, "b": b_name, "change": f"{a_tag} -> {b_tag}", "ranks": rows})
    return out


def _ms(d: dict | None) -> str:
    if not d:
        return "n/a"
    return f"{d['median']:.3f} [{d['ci_low']:.3f}, {d['ci_high']:.3f}] ({d['min']:.3f}–{d['max']:.3f}, n={d['n']})"


def _equal(c: dict | None) -> str:
    if not c or "equal" not in c:
        return "n/a"
    return f"{'yes' if c['equal'] else 'NO'} (max diff {c['max_abs_diff']:.3g}, tolerance {c['tolerance']:.3g})"


def markdown(result: dict) -> str:
    sets = result["sets"]
    out = ["# Tensor-parallel decoder: trace sets (issue 28)", "",
           "Decode step: median of the per-repetition mean step, [95% bootstrap interval] (min–max, n). "
           "Collectives: NCCL kernels on a GPU (gloo's ranges on a CPU), per decode step.", "",
           "| set | TP | backend | rank | GPU | decode step ms | kernels / step | busy µs / step "
           "| collective µs / step (share) | straggler steps |", "|" + "---|" * 10]
    for s in sets:
        for r in s["ranks"]:
            share = f"{r['collective_share']:.0%}" if r["collective_share"] is not None else "n/a"
            coll = f"{r['collective_us_per_decode_step']:.1f} ({share})" \
                if r["collective_us_per_decode_step"] is not None else "n/a"
            kern = f"{r['kernels_per_decode_step']:g}" if r["kernels_per_decode_step"] is not None else "n/a"
            busy = f"{r['busy_us_per_decode_step']:.1f}" if r["busy_us_per_decode_step"] is not None else "n/a"
            out.append(f"| `{s['name']}` | {s['tp']} | {s['backend']} | {r['rank']} | {r['device']} | "
                       f"{_ms(r['decode_step_ms'])} | {kern} | {busy} | {coll} | {r['straggler_steps']} |")
    out += ["", "## Pairs, rank against rank", "", "| A -> B | rank | decode step | outputs equal |",
            "|---|---|---|---|"]
    for p in result["pairs"]:
        for r in p["ranks"]:
            out.append(f"| `{p['a']}` -> `{p['b']}` | {r['rank']} | {r['decode_step_text'] or 'n/a'} | "
                       f"{_equal(r['outputs'])} |")
    out += ["", "## Checks", "", "| set | kv_write kernels per layer (every rank) | 2 collectives in every layer "
            "and step | collectives in steps outside layers | outputs equal TP=1's (per rank) |", "|---|---|---|---|---|"]
    for s in sets:
        c = s["checks"]
        ref = ", ".join(_equal(r) for r in s["against_tp1"]) or "no TP=1 reference"
        out.append(f"| `{s['name']}` | {', '.join(f'{k:g}' for k in c['kv_write_kernels_per_layer'])} | "
                   f"{'yes' if c['two_collectives_in_every_layer_and_step'] else 'NO'} | "
                   f"{c['collectives_outside_layers']} | {ref} |")
    for s in sets:
        regions = sorted({x["region"] for r in s["ranks"] for x in r["per_layer"]})
        out += ["", f"### `{s['name']}`: per rank and layer, per decode step (kernels / GPU µs; collectives: "
                "count / µs)", "", "| rank | layer | " + " | ".join(regions) + " | collectives |",
                "|" + "---|" * (len(regions) + 3)]
        for r in s["ranks"]:
            by = {(x["layer"], x["region"]): x for x in r["per_layer"]}
            coll = {x["layer"]: x for x in r["collectives_per_layer"]}
            for layer in sorted({x["layer"] for x in r["per_layer"]}):
                cells = [f"{by[(layer, g)]['kernels']:g} / {by[(layer, g)]['gpu_us']:.1f}" if (layer, g) in by else ""
                         for g in regions]
                c = coll.get(layer)
                out.append(f"| {r['rank']} | {layer} | " + " | ".join(cells) + " | "
                           + (f"{c['per_step']:g} / {c['us_per_step']:.1f}" if c else "") + " |")
        out += ["", "| step | straggler | lag µs | longest wall µs |", "|---|---|---|---|"]
        out += [f"| {x['step']} | {x['straggler']} | {x['lag_us']:.1f} | {x['wall_us']:.1f} |" for x in s["stragglers"]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="trace store holding the sets")
    ap.add_argument("out", help="OUT_PREFIX: writes OUT_PREFIX.json and OUT_PREFIX.md")
    ap.add_argument("--prefix", default="h200-tp", help="sets whose names start with this (default h200-tp)")
    a = ap.parse_args(argv)
    from workbench.sets.store import list_sets

    names = [n for n in list_sets(a.root) if n.startswith(a.prefix)]
    if not names:
        print(f"no trace sets named {a.prefix}* under {a.root}", file=sys.stderr)
        return 2
    result = {"sets": [], "pairs": pairs(a.root, names)}
    for n in names:
        ts = wb.open_set(n, root=a.root, executor=HERE)
        result["sets"].append({**one_set(ts), "against_tp1": against_tp1(a.root, ts)})
    Path(a.out + ".json").write_text(json.dumps(result, indent=1) + "\n")
    md = markdown(result)
    Path(a.out + ".md").write_text(md)
    print(md.split("\n## ")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
