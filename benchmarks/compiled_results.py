"""Eager against compiled, per layer, on the committed H200 captures of the compiled-code
campaign (benchmarks/h200_compiled.sh): per module label, kernels and GPU time per decode step
in a typical layer (the median over layers), eager twin -> compiled, and what inductor fused.

    python benchmarks/compiled_results.py [ROOT]      # prints Markdown for benchmarks/RESULTS.md
"""

from __future__ import annotations

import sys

import workbench as wb

PAIRS = [  # (what, eager twin, compiled)
    ("transformers generate(), attn sdpa, nsys", "h200-hfc-sdpa-eager-nsys", "h200-hfc-sdpa-compile-nsys"),
    ("transformers generate(), attn eager, nsys", "h200-hfc-eager-eager-nsys", "h200-hfc-eager-compile-nsys"),
    ("decoder, kv_write unfused, torch", "h200-kvwrite-unfused-eager-torch", "h200-kvwrite-unfused-compile-torch"),
    ("decoder, kv_write fused, torch", "h200-kvwrite-fused-eager-torch", "h200-kvwrite-fused-compile-torch"),
    ("decoder, kv_write unfused, nsys", "h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-unfused-compile-nsys"),
    ("decoder, kv_write fused, nsys", "h200-kvwrite-fused-eager-nsys", "h200-kvwrite-fused-compile-nsys"),
]


def per_layer(trace) -> dict:
    """{label: (kernels, GPU us) per decode step in the median layer}, and the layer count."""
    p = wb.project(trace)
    d = p[(p["phase"] == "decode") & (p["layer"] >= 0)]
    steps = max(d["step"].nunique(), 1)
    g = d.groupby(["layer", "range"], observed=True).agg(k=("name", "size"), t=("duration", "sum")).reset_index()
    out = {label: (x["k"].median() / steps, x["t"].median() / steps / 1e3) for label, x in g.groupby("range")}
    return out, d["layer"].nunique(), int(d.shape[0] / steps)


def main(root: str = "traces") -> None:
    print("| capture | layers | label | eager kernels/step/layer | compiled | eager GPU us | compiled GPU us |")
    print("|---|---|---|---|---|---|---|")
    for what, eager, compiled in PAIRS:
        try:
            (e, ne, ke), (c, nc, kc) = per_layer(wb.open_trace(eager, root=root)), per_layer(wb.open_trace(compiled, root=root))
        except wb.WorkbenchError as err:
            print(f"| {what} | missing: {err} | | | | | |")
            continue
        for label in sorted(set(e) | set(c)):
            ek, et = e.get(label, (0, 0.0))
            ck, ct = c.get(label, (0, 0.0))
            print(f"| {what} | {ne} -> {nc} | {label} | {ek:g} | {ck:g} | {et:.1f} | {ct:.1f} |")
        print(f"| {what} | | (all layers, kernels per decode step) | {ke} | {kc} | | |")
        sites = wb.open_trace(compiled, root=root).sites
        if sites is not None and len(sites):
            print(f"| {what} | | call sites fused across layers | | {int(sites['crosses_layers'].sum())} of "
                  f"{len(sites)} | | |")


if __name__ == "__main__":
    main(*sys.argv[1:])
