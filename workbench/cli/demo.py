"""``workbench demo``: the main job on an embedded default, with or without a GPU.

1. Diff the committed fusion traces (real H200 captures under ``traces/``): per-layer
   ``kv_write`` kernels, kernels and GPU time per step, the aligned kernel sequence.
2. Capture the reference decoder unfused and fused with the project's own code — on the GPU
   when there is one, else on the CPU with torch.profiler (Triton in interpreter mode) —
   and diff those captures the same way.
3. Write self-contained HTML and Markdown reports for both comparisons to ``--out``, the
   bucketing one with the sweep results given with ``--sweep`` (``scripts/demo.sh`` gives the
   repository's ``benchmarks/results/h200_live.json``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Committed traces per case, best first: base, fix, then extras shown beside them (the
# project's own H200 captures, then the imported reference captures).
FUSION = (
    ("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys",
     "h200-kvwrite-unfused-cudagraph-torch", "h200-kvwrite-fused-cudagraph-torch"),
    ("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys"),
    ("ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys"),
)
BUCKETING = (
    ("h200-cache-full-ctx2048-eager-torch", "h200-cache-bucketed-ctx2048-eager-torch"),
    ("ref-h200-kvwrite-fused-cache-full-torch", "ref-h200-kvwrite-fused-cache-bucketed-torch"),
)
# Small enough for a 2-core CPU without a GPU, with the same ranges and kernel mix.
CPU_VARIANT = {"layers": 4, "rows": 2048, "ctx": 64}


def add_parser(sub) -> None:
    from .args import device

    s = sub.add_parser("demo", help="the main job: diff the committed traces, capture the decoder, write reports")
    s.add_argument("--out", default="out", help="directory for the reports (default ./out)")
    s.add_argument("--no-capture", action="store_true", help="skip the live capture")
    s.add_argument("--sweep", default=None, metavar="PATH",
                   help="sweep results (JSON) for the bucketing report's latency-vs-context section (default: none)")
    s.add_argument("--device", default=None, type=device, help="cpu or cuda (default: cuda when available)")
    s.set_defaults(func=run)


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def _headline(d, metas: tuple) -> None:
    """The diff in a few lines, worded for what the traces hold (CPU ops on a CPU), with what the
    numbers mean there: a CPU capture runs Triton under its interpreter, so counts lead."""
    from ..analysis.per_step import describe
    from ..trace.words import words
    from ..textfmt import MICRO_ASCII, clean, num, us
    from ..trace.manifest import interpreter_note

    w = words(metas)
    t = d.totals
    _say(f"  {clean(d.a)} -> {clean(d.b)}")
    notes = [n for n in (interpreter_note(m) for m in metas) if n]
    _say(f"  {w.units} per decode step {num(t['kernels_per_step_a'])} -> {num(t['kernels_per_step_b'])}"
         + ("" if notes else f"; {w.time} per decode step {us(t['gpu_time_per_step_ns_a'], MICRO_ASCII)} -> "
                             f"{us(t['gpu_time_per_step_ns_b'], MICRO_ASCII)}"))
    for n in dict.fromkeys(notes):
        _say(f"  note: {n}")
    g = d.groups()
    g = g[g["changed"]]
    if notes:  # the change in counts is what a CPU capture measures
        g = g.iloc[(-(g["kernels_b"] - g["kernels_a"]).abs()).argsort(kind="stable").to_numpy()]
    if len(g):
        _say(f"  most changed: {clean(describe(g.iloc[0], w.units, '->', MICRO_ASCII))}")


def run(args) -> int:
    import workbench as wb

    from ..trace import default_root, list_traces

    root = Path(args.root) if args.root else default_root()
    if args.sweep is not None:  # a bad file is refused before any work, not after the first report
        from ..reporting.inputs import load_sweep

        load_sweep(args.sweep)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stored = set(list_traces(root))
    _say(f"workbench demo: {len(stored)} stored trace(s) under {root}/")

    for case, choices, with_sweep in (("fusion", FUSION, False), ("bucketing", BUCKETING, True)):
        chosen = next((c for c in choices if set(c) <= stored), None)
        if chosen is None:
            _say(f"\n  no committed {case} traces found; skipping that comparison")
            continue
        _say(f"\nCommitted {case} traces")
        a, b = wb.open_trace(chosen[0], root), wb.open_trace(chosen[1], root)
        _headline(wb.diff(a, b), (a.meta, b.meta))
        r = wb.report(*chosen, html=out / f"{case}-report.html", md=out / f"{case}-report.md",
                      sweep=args.sweep if with_sweep else None, root=root)
        _say(f"  report: {', '.join(r.written)}")

    if not args.no_capture:
        _capture(wb, root, out, args.device)
    _say("\ndone.")
    return 0


def _capture(wb, root: Path, out: Path, device: str | None) -> None:
    from ..devices import resolve_device

    device = resolve_device(device)
    if device == "cpu":
        # Triton has no CPU backend: its interpreter runs the fused kernel instead.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    variant = {} if device.startswith("cuda") else dict(CPU_VARIANT)
    _say(f"\nLive capture of the reference decoder on {device} (torch.profiler)")
    names = []
    for kv in ("unfused", "fused"):
        name = f"demo-{device.split(':')[0]}-kvwrite-{kv}"
        wb.capture("decoder", {**variant, "kv_write": kv}, engine="eager", backend="torch", name=name,
                   steps=3, repeats=3, warmup=1, device=device, root=root, overwrite=True,
                   progress=sys.stderr.isatty(), command=["workbench", "demo"])
        names.append(name)
        _say(f"  captured {root / name}")
    a, b = wb.open_trace(names[0], root), wb.open_trace(names[1], root)
    _headline(wb.diff(a, b), (a.meta, b.meta))
    r = wb.report(names[0], names[1], html=out / f"{device.split(':')[0]}-capture-report.html",
                  md=out / f"{device.split(':')[0]}-capture-report.md", root=root)
    _say(f"  report: {', '.join(r.written)}")
