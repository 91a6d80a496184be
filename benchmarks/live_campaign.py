"""The capture campaign of issue 3: both cases, both backends, with manifests and a results file.

    python benchmarks/live_campaign.py --device cuda --prefix h200 --root traces \
        --out benchmarks/results/h200_live            # on the H200 (see h200_campaign.sh)
    python benchmarks/live_campaign.py --device cpu --small --prefix cpu --root /tmp/dry \
        --out /tmp/dry/live                           # the same pipeline, tiny, on CPU

Case 1 (fusion): kv_write unfused vs fused at the default context (128 cached rows of a
10368-row allocation, full attention), engines eager / compile / cudagraph, backends torch /
nsys. Case 2 (bucketing): full vs bucketed attention at 512, 2048 and 8192 cached rows, eager
and cudagraph. Every capture is a stored trace whose manifest holds its timing (CUDA events,
min-max over repetitions) and outputs; this script reads them back into ``OUT.json`` and
``OUT.md``: per-layer kv_write kernels, decode-step and prefill times, per-layer attention
GPU time, and the output equality of every variant against its group's reference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench import analysis, engines  # noqa: E402
from workbench.capturing import capture  # noqa: E402
from workbench.capturing.session import decode_outputs  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402
from workbench.capturing.run import compare, stats, time_engine  # noqa: E402

SMALL = {"layers": 2, "heads": 2, "head_dim": 16, "index_dim": 16, "mlp_dim": 64, "vocab": 128, "rows": 1296}
# Phi-4-mini-like dimensions (32 layers, 24 heads of 128, MLP 8192, vocab 32064) in the decoder,
# with its 10368-row allocation: the size where the GPU, not the host, decides a decode step.
PHI4 = {"layers": 32, "heads": 24, "head_dim": 128, "mlp_dim": 8192, "vocab": 32064}


def plan(prefix: str, small: bool, backends: tuple[str, ...], shape: str = "live") -> list[dict]:
    """Captures in priority order (the most important first, should time run out). Shape
    ``phi4``: only the bucketing sweep, at PHI4's dimensions, under CUDA graphs with nsys (the
    backend that gives replayed kernels their capture-time layer ranges)."""
    base = dict(SMALL) if small else dict(PHI4) if shape == "phi4" else {}
    ctxs = (64, 256, 1024) if small else (512, 2048, 8192)
    fusion = lambda kv, engine, backend: {  # noqa: E731
        "name": f"{prefix}-kvwrite-{kv}-{engine}-{backend}", "group": "fusion",
        "variant": {**base, "kv_write": kv}, "engine": engine, "backend": backend}
    cache = lambda rows, ctx, engine, backend: {  # noqa: E731
        "name": f"{prefix}-cache-{rows}-ctx{ctx}-{engine}-{backend}", "group": f"cache-ctx{ctx}",
        "variant": {**base, "kv_write": "fused", "cache_rows": rows, "ctx": ctx}, "engine": engine,
        "backend": backend}
    if shape == "phi4":
        return [cache(rows, ctx, "cudagraph", "nsys" if "nsys" in backends else "torch")
                for ctx in ctxs for rows in ("full", "bucketed")]
    out = [fusion(kv, "eager", "torch") for kv in ("unfused", "fused")]
    if "nsys" in backends:
        out += [fusion(kv, "eager", "nsys") for kv in ("unfused", "fused")]
    out += [cache(rows, ctx, "eager", "torch") for ctx in ctxs for rows in ("full", "bucketed")]
    if "cudagraph" in backends:
        out += [cache(rows, ctx, "cudagraph", "torch") for ctx in ctxs for rows in ("full", "bucketed")]
        out += [fusion(kv, "cudagraph", "torch") for kv in ("unfused", "fused")]
    out += [fusion(kv, "compile", "torch") for kv in ("unfused", "fused")]
    if "nsys" in backends:
        out += [cache(rows, ctxs[1], "eager", "nsys") for rows in ("full", "bucketed")]
        if "cudagraph" in backends:
            out += [fusion(kv, "cudagraph", "nsys") for kv in ("unfused", "fused")]
    return out


def _stat(t: dict | None) -> dict | None:
    return None if t is None else {k: round(t[k], 4) for k in ("median", "min", "max")} | {"n": t["n"]}


def measure(trace) -> dict:
    """What the results file reports of one stored capture."""
    meta, timing = trace.meta, trace.meta["timing"]
    by_path = analysis.summary(trace, by="path")
    path = by_path["path"].astype(str)
    region = path.str.rsplit("/", n=1).str[-1]
    kv = by_path[region == "kv_write"]["kernels"]
    att = by_path[region == "attention"]["gpu_time_ns"]
    att_kernels = by_path[region == "attention"]["kernels"]
    # Decode steps only: not the graph capture before them, nor any prefill inside the window.
    steps = analysis.launches_per_step(trace, phase="decode")
    return {
        "trace": meta["name"], "backend": meta["capture"]["backend"], "engine": meta["capture"]["engine"],
        "variant": {k: meta["capture"]["variant"][k] for k in ("kv_write", "cache_rows", "ctx", "rows", "layers")},
        "kv_write_impl": meta["capture"]["engine_info"].get("kv_write_impl"),
        "timer": timing["timer"],
        "prefill_ms": _stat(timing.get("prefill_ms")),
        "decode_step_ms": _stat(timing.get("decode_step_ms")),
        "decode_step_ms_per_repeat": _stat(timing.get("decode_step_ms_per_repeat")),
        # Per recorded (step, layer): kernels in kv_write. Under CUDA graphs only where the
        # trace holds the graph's capture (nsys): there replayed kernels keep their layer ranges.
        "kv_write_kernels_per_layer": sorted(set(int(k) for k in kv)),
        "kv_write_instances": int(len(kv)),
        "attention_gpu_us_per_layer": round(float(att.mean()) / 1e3, 3) if len(att) else None,
        # Per recorded (step, layer): kernels in attention.
        "attention_kernels_per_layer": sorted(set(int(k) for k in att_kernels)),
        "kernels_per_step": sorted(set(int(k) for k in steps["kernels"])),
        # Sum of kernel durations per step: the GPU's work, free of the host's launch noise.
        "gpu_us_per_step": round(float(steps["gpu_time_ns"].mean()) / 1e3, 2),
        "work_units": int(meta["counts"]["kernels"]),
    }


def interleaved(cases: list[dict], traces: dict, device: str, rounds: int, repeats: int) -> dict:
    """Latency of every captured eager/cudagraph variant, timed in interleaved rounds.

    Captures run one after another, so host and clock drift between them reads as a
    difference between variants; here every round times every variant once (engines reused
    from the captures), and the spread of the per-round medians shows what is noise.
    """
    built = {c["name"]: engines.build("decoder", traces[c["name"]].meta["capture"]["variant"], c["engine"], device)
             for c in cases if c["backend"] == "torch" and c["engine"] in ("eager", "cudagraph") and c["name"] in traces}
    runs = {name: {"prefill": [], "decode": [], "rounds": []} for name in built}
    for _ in range(rounds):
        for name, engine in built.items():
            t = time_engine(engine, steps=3, repeats=repeats, warmup=1, progress=False)["timing"]
            runs[name]["prefill"] += t["prefill_ms"]["samples"]
            runs[name]["decode"] += t["decode_step_ms"]["samples"]
            runs[name]["rounds"].append(t["decode_step_ms"]["median"])
    out = {}
    for name, r in runs.items():
        out[name] = {"prefill_ms": _stat(stats(r["prefill"])), "decode_step_ms": _stat(stats(r["decode"])),
                     "decode_round_medians_ms": [round(x, 4) for x in r["rounds"]],
                     "rounds": rounds, "repeats_per_round": repeats}
    return out


def equality(traces: dict, cases: list[dict]) -> list[dict]:
    """Each capture's outputs against the first capture of its group (eager, torch, full)."""
    out, refs = [], {}
    for case in cases:
        trace = traces.get(case["name"])
        if trace is None or not trace.meta.get("outputs"):
            continue
        logits, tokens = decode_outputs(trace.meta["outputs"])
        ref = refs.setdefault(case["group"], (case["name"], logits, tokens))
        cmp = compare(ref[1], ref[2], logits, tokens, trace.meta["capture"]["engine_info"]["dtype"])
        out.append({"group": case["group"], "reference": ref[0], "trace": case["name"], "tokens": tokens,
                    **{k: (round(v, 6) if isinstance(v, float) else v) for k, v in cmp.items()}})
    return out


def _ms(s: dict | None) -> str:
    return "-" if s is None else f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f})"


def markdown(result: dict) -> str:
    rows = result["captures"]
    env = result.get("env") or {}
    lines = [f"# Live captures: {result['prefix']}", "",
             f"GPU {env.get('gpu')}, driver {env.get('driver')}, CUDA {env.get('cuda')}, torch {env.get('torch')}, "
             f"triton {env.get('triton')}, nsys {env.get('nsys')}. Generated by `benchmarks/live_campaign.py`; "
             "every row is a stored trace under `traces/` whose manifest holds the raw samples.", "",
             "Times are median (min-max) over all timed decode steps / prefills of one capture "
             f"({result['repeats']} repetitions x 3 decode steps; CUDA events, device synchronized before "
             "each phase). Captures run one after another; the interleaved table at the end is the fairer "
             "latency comparison. GPU us per step is the sum of kernel durations in the trace.", ""]
    fusion = [r for r in rows if r["group"] == "fusion" and "error" not in r]
    if fusion:
        lines += ["## Case 1: kv_write unfused vs fused (ctx 128, full attention)", "",
                  "| trace | engine | backend | kv_write kernels per layer | kernels per step | GPU us per step "
                  "| decode step ms |", "|---|---|---|---|---|---|---|"]
    for r in fusion:
        m = r["measured"]
        kv = ", ".join(map(str, m["kv_write_kernels_per_layer"])) or "(graph replay: under step only)"
        lines.append(f"| {r['name']} | {m['engine']} | {m['backend']} | {kv} | "
                     f"{', '.join(map(str, m['kernels_per_step']))} | {m['gpu_us_per_step']:.1f} | "
                     f"{_ms(m['decode_step_ms'])} |")
    layers = {r["measured"]["variant"]["layers"] for r in rows if "measured" in r and r["group"] != "fusion"}
    lines += ["", "## Case 2: full vs bucketed attention (kv_write fused, 10368-row allocation"
              + (f", {', '.join(map(str, sorted(layers)))} layers" if layers else "") + ")", "",
              "| ctx | cache_rows | engine | backend | prefill ms | decode step ms | GPU us per step | attention GPU us/layer "
              "| attention kernels/layer |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["group"] == "fusion" or "error" in r:
            continue
        m = r["measured"]
        att = "-" if m["attention_gpu_us_per_layer"] is None else f"{m['attention_gpu_us_per_layer']:.1f}"
        lines.append(f"| {m['variant']['ctx']} | {m['variant']['cache_rows']} | {m['engine']} | {m['backend']} | "
                     f"{_ms(m['prefill_ms'])} | {_ms(m['decode_step_ms'])} | {m['gpu_us_per_step']:.1f} | {att} | "
                     f"{', '.join(map(str, m.get('attention_kernels_per_layer') or [])) or '-'} |")
    lines += ["", "## Outputs", "", "| group | trace | max abs logit diff | tolerance | tokens equal |",
              "|---|---|---|---|---|"]
    for e in result["equality"]:
        lines.append(f"| {e['group']} | {e['trace']} | {e['max_abs_diff']:.4g} | {e['tolerance']:.3g} | "
                     f"{e['tokens_equal']} |")
    if result.get("interleaved"):
        lines += ["", "## Latency, interleaved rounds", "",
                  "Every variant timed once per round, rounds interleaved (engines as captured). Decode step: "
                  "median (min-max) over all steps; rounds: min-max of the per-round medians.", "",
                  "| variant | prefill ms | decode step ms | rounds min-max ms |", "|---|---|---|---|"]
        for name, t in result["interleaved"].items():
            rm = t["decode_round_medians_ms"]
            lines.append(f"| {name} | {_ms(t['prefill_ms'])} | {_ms(t['decode_step_ms'])} | "
                         f"{min(rm):.3f}-{max(rm):.3f} |")
    errors = [r for r in rows if "error" in r]
    if errors:
        lines += ["", "## Not captured", ""] + [f"- {r['name']}: {r['error']}" for r in errors]
    return "\n".join(lines) + "\n"


def remeasure(cases: list[dict], root: str, out: Path, result: dict) -> int:
    """The results file made again from the stored traces of ``cases`` (those not stored are
    listed as not captured), with the interleaved timing of the previous file, if any."""
    from workbench.trace import open_trace

    old = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else {}
    traces = {}
    for case in cases:
        row = {"name": case["name"], "group": case["group"]}
        try:
            traces[case["name"]] = trace = open_trace(case["name"], root)
            row["measured"] = measure(trace)
            result["env"] = result["env"] or trace.meta["env"]
            result["repeats"] = trace.meta["capture"].get("repeats", result["repeats"])
        except WorkbenchError as e:
            row["error"] = str(e)
        result["captures"].append(row)
    result["equality"] = equality(traces, cases)
    if old.get("interleaved"):
        result["interleaved"] = old["interleaved"]
    out.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prefix", default="h200")
    ap.add_argument("--root", default="traces")
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.json and .md written)")
    ap.add_argument("--small", action="store_true", help="tiny model (CPU dry run)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (0: none)")
    ap.add_argument("--no-nsys", action="store_true")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting captures after this many seconds")
    ap.add_argument("--shape", choices=("live", "phi4"), default="live",
                    help="live: both cases at the decoder's size; phi4: the bucketing sweep at PHI4's size")
    ap.add_argument("--from-traces", action="store_true",
                    help="capture nothing: measure the stored traces of the plan (under --root) into OUT, "
                         "keeping OUT.json's interleaved timing")
    args = ap.parse_args()

    backends = ("torch",) + (() if args.no_nsys or not (shutil.which("nsys") or args.from_traces) else ("nsys",))
    if args.device.startswith("cuda"):
        backends += ("cudagraph",)
    cases = plan(args.prefix, args.small, backends, args.shape)
    result = {"prefix": args.prefix, "device": args.device, "repeats": args.repeats, "captures": [],
              "equality": [], "env": None}
    if args.from_traces:
        return remeasure(cases, args.root, args.out, result)
    traces, t0 = {}, time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for i, case in enumerate(cases):
        row = {"name": case["name"], "group": case["group"]}
        if time.monotonic() - t0 > args.budget_s:
            row["error"] = "skipped: campaign time budget spent"
        else:
            started = time.monotonic()
            try:
                trace = capture("decoder", case["variant"], engine=case["engine"], backend=case["backend"],
                                name=case["name"], steps=3, repeats=args.repeats, warmup=3, device=args.device,
                                root=args.root, overwrite=True, progress=False)
                traces[case["name"]] = trace
                row["measured"] = measure(trace)
                result["env"] = result["env"] or trace.meta["env"]
            except WorkbenchError as e:
                row["error"] = str(e)
            row["seconds"] = round(time.monotonic() - started, 1)
        result["captures"].append(row)
        m = row.get("measured")
        print(f"[{i + 1}/{len(cases)}] {case['name']}: " + (row.get("error") or
              f"kv_write {m['kv_write_kernels_per_layer']}, decode {_ms(m['decode_step_ms'])} ms, "
              f"prefill {_ms(m['prefill_ms'])} ms ({row['seconds']} s)"), flush=True)
        result["equality"] = equality(traces, cases)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        args.out.with_suffix(".md").write_text(markdown(result))
    if args.rounds:
        result["interleaved"] = interleaved(cases, traces, args.device, args.rounds, max(1, args.repeats // 3))
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        args.out.with_suffix(".md").write_text(markdown(result))
        print("interleaved:", {k: v["decode_step_ms"]["median"] for k, v in result["interleaved"].items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
