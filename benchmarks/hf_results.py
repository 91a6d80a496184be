"""Results of the `hf` workload campaign (benchmarks/h200_hf.sh) from its stored traces.

    python3 benchmarks/hf_results.py TRACES_ROOT OUT_PREFIX

writes OUT_PREFIX.json and OUT_PREFIX.md: per capture (``h200-hf-*``) its variant, engine and
backend, decode-step latency (median, min-max over the timed steps, from the manifest), kernels
and GPU time per decode step (from the trace: decode-phase kernels over the decode steps), and
per layer, for each range of a decoder layer (``self_attn``, ``mlp``, the norms), the kernels and
GPU time per decode step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import workbench as wb
from workbench.analysis.steps import trace_steps_info


def one(trace) -> dict:
    m = trace.meta
    cap = m.get("capture", {})
    t = m.get("timing", {})
    dec = t.get("decode_step_ms", {})
    p = wb.project(trace)
    decode = p[p["phase"] == "decode"]
    steps = max(trace_steps_info(trace).count(), 1)
    layers = decode[decode["layer"] >= 0].groupby(["layer", "range"], observed=True)["duration"]
    per_layer = [{"layer": int(layer), "range": str(rng), "kernels": n / steps, "gpu_us": float(ns) / steps / 1e3}
                 for (layer, rng), n, ns in zip(layers.size().index, layers.size(), layers.sum())]
    return {
        "name": trace.name, "variant": {k: cap.get("variant", {}).get(k) for k in ("attn", "cache")},
        "engine": cap.get("engine"), "backend": m.get("source", {}).get("format"),
        "decode_step_ms": {k: dec.get(k) for k in ("median", "min", "max", "n")},
        "prefill_ms": {k: t.get("prefill_ms", {}).get(k) for k in ("median", "min", "max")},
        "decode_steps_captured": steps,
        "kernels_per_decode_step": len(decode) / steps,
        "gpu_us_per_decode_step": float(decode["duration"].sum()) / steps / 1e3,
        "kernels_in_layers_per_decode_step": float(sum(r["kernels"] for r in per_layer)),
        "per_layer": per_layer,
        "env": {k: m.get("env", {}).get(k) for k in ("gpu", "torch", "cuda", "driver")},
        "transformers": m.get("capture", {}).get("info", {}).get("transformers"),
    }


def markdown(rows: list[dict]) -> str:
    out = ["| capture | attn | cache | engine | backend | decode step ms, median (min–max) | kernels / decode step "
           "| GPU µs / decode step | kernels in layer ranges / step |", "|" + "---|" * 9]
    for r in rows:
        d = r["decode_step_ms"]
        lat = f"{d['median']:.3f} ({d['min']:.3f}–{d['max']:.3f})" if d.get("median") is not None else "n/a"
        out.append(f"| `{r['name']}` | {r['variant']['attn']} | {r['variant']['cache']} | {r['engine']} | "
                   f"{r['backend']} | {lat} | {r['kernels_per_decode_step']:g} | {r['gpu_us_per_decode_step']:.1f} | "
                   f"{r['kernels_in_layers_per_decode_step']:g} |")
    for r in rows:
        if not r["per_layer"]:
            continue
        ranges = sorted({x["range"] for x in r["per_layer"]})
        by = {(x["layer"], x["range"]): x for x in r["per_layer"]}
        out += ["", f"### `{r['name']}`: per layer, per decode step (kernels / GPU µs)", "",
                "| layer | " + " | ".join(ranges) + " |", "|" + "---|" * (len(ranges) + 1)]
        for layer in sorted({x["layer"] for x in r["per_layer"]}):
            cells = [f"{by[(layer, g)]['kernels']:g} / {by[(layer, g)]['gpu_us']:.1f}" if (layer, g) in by else ""
                     for g in ranges]
            out.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(root: str, prefix: str) -> int:
    names = sorted(n for n in wb.list_traces(root) if n.startswith("h200-hf-"))
    rows = [one(wb.open_trace(n, root=root)) for n in names]
    Path(prefix + ".json").write_text(json.dumps(rows, indent=1) + "\n")
    Path(prefix + ".md").write_text(markdown(rows))
    print(markdown(rows).split("\n\n")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
