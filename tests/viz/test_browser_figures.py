"""Every figure function ``workbench.viz`` exports, drawn from committed traces and loaded in
real headless Chromium (plotly embedded, networking off), read as a user reads it:

* it renders (``svg.main-svg``) without a JavaScript error;
* no legend entry or title is clipped: each one's box lies inside the figure, and a legend
  entry inside the legend's visible box (a legend taller than the figure scrolls, hiding some);
* the base comes before the fix: first in a legend, left on an axis, left in a group of bars;
* distinct kernels of a figure (and of a pair of timelines) have distinct colours, one kernel
  the same colour in both timelines of a pair;
* bars lie inside the plot area; bar labels that are drawn do not overlap, and stay inside
  their bars where they are drawn inside;
* tick labels (their rotated outlines) lie inside the figure, outside every plot area, off
  the titles, subplot titles, axis titles and the legend, and off each other; bar labels off
  the titles;
* a CPU-only trace's figures say "CPU", never "GPU" (text, hovers, titles, axes, legends).

Across figures (``test_figures_agree_across_a_session``): one kernel has one colour in every
figure of a session; layers read in numeric order (0, 1, 2, ..., 10); a TensorRT engine's
figures say "engine layer" and "per inference", never "step"; a pair of timelines shares one
time axis (bucketed attention visibly shorter than full); an eager window's kernels are drawn
wider than slivers (the GPU view); a trace set's warm-up does not flatten the other steps.

On a failure each failing figure is saved as a screenshot under pytest's tmp dir, its path
printed. Needs the Python ``playwright`` package and a Chromium binary (/usr/bin/chromium or
``$WORKBENCH_CHROMIUM``); skipped without them.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from helpers import CPU_TRACE, REPO, TRACES  # noqa: E402
import workbench as wb  # noqa: E402
from workbench import viz  # noqa: E402

pytestmark = pytest.mark.browser

KV = ("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys")
HF = ("h200-hf-attn-eager-static-nsys", "h200-hf-attn-sdpa-static-nsys")
FIGURE_MODULES = {"trace_figures", "diff_figures", "timelines", "sweeps", "set_figures"}
TRT = REPO / "tests" / "data" / "tensorrt"
SETS = REPO / "tests" / "data" / "sets" / "cpu4"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
        "--disable-quic"]


@dataclass
class Case:
    name: str
    figs: tuple                       # drawn on one page, in this order
    order: tuple[str, str] | None = None  # (base, fix) as the figure writes them
    kernels: bool = False             # legend entries are kernels: distinct colours
    cpu: bool = False                 # a CPU-only trace: no "GPU" anywhere
    problems: list[str] = field(default_factory=list)


def _chromium() -> str:
    exe = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        pytest.skip("no Chromium binary (apt-get install chromium, or set WORKBENCH_CHROMIUM)")
    return exe


def _cases() -> tuple[list[Case], set[str]]:
    """The figures to check, and the names of the figure functions they used."""
    used: set[str] = set()

    def call(fn: str, *args, **kw):
        used.add(fn)
        return getattr(viz, fn)(*args, **kw)

    a, b = (wb.open_trace(str(TRACES / n)) for n in KV)
    ha, hb = (wb.open_trace(str(TRACES / n)) for n in HF)
    cpu = wb.open_trace(str(CPU_TRACE))
    d, hd, cd = wb.diff(a, b), wb.diff(ha, hb), wb.diff(cpu, cpu)
    ab = ("A: " + KV[0], "B: " + KV[1])
    habs = ("A: " + HF[0], "B: " + HF[1])
    cases = [
        Case("kv_layer_counts", (call("layer_counts", d, range="kv_write"),), ab),
        Case("kv_layer_time", (call("layer_time", d),), ab),
        Case("kv_diff_bars", (call("diff_bars", d),), ab),
        Case("kv_diff_bars_layer", (call("diff_bars", d, 3),), ab),
        Case("kv_diff_bars_range", (call("diff_bars", d, "layer_03/kv_write"),), ab),
        Case("kv_composition", (call("range_composition", {"base: unfused": a, "fix: fused": b}),),
             ("base: unfused", "fix: fused"), kernels=True),
        Case("kv_composition_counts", (call("range_composition", [a, b], metric="kernels"),), KV, kernels=True),
        Case("kv_launches", (call("launches_per_step", {"base: unfused": a, "fix: fused": b}),),
             ("base: unfused", "fix: fused")),
        Case("kv_timeline_pair", call("timeline_pair", (a, b), "layer_03/kv_write"), (KV[0] + ":", KV[1] + ":"),
             kernels=True),
        Case("kv_timeline_step", (call("timeline", a),), kernels=True),
        Case("kv_summary_layer", (call("summary_bars", a, "layer"),)),
        Case("kv_summary_kernel", (call("summary_bars", b, "kernel"),)),
        Case("kv_summary_path", (call("summary_bars", b, "path", metric="kernels"),)),
        Case("hf_layer_counts", (call("layer_counts", hd, range="self_attn"),), habs),
        Case("hf_diff_bars", (call("diff_bars", hd),), habs),
        Case("hf_composition", (call("range_composition", {"eager": ha, "sdpa": hb}),), ("eager", "sdpa"), kernels=True),
        Case("hf_timeline_pair", call("timeline_pair", (ha, hb), "LlamaForCausalLM/model.layers.1/model.layers.1.self_attn"), (HF[0] + ":", HF[1] + ":"),
             kernels=True),
        Case("hf_timeline_step", (call("timeline", hb),), kernels=True),
        Case("cpu_composition", (call("range_composition", cpu),), kernels=True, cpu=True),
        Case("cpu_launches", (call("launches_per_step", cpu),), cpu=True),
        Case("cpu_timeline", (call("timeline", cpu),), kernels=True, cpu=True),
        Case("cpu_summary_kernel", (call("summary_bars", cpu, "kernel", metric="kernels"),), cpu=True),
        Case("cpu_summary_range", (call("summary_bars", cpu, "range"),), cpu=True),
        # A diff's figures know their traces' work units only when the diff carries them
        # (``TraceDiff.work_units``); test_viz.py::test_cpu_diff_figures_say_cpu waits for that.
        Case("cpu_diff_bars", (call("diff_bars", cd),), cpu=_diff_knows_units(cd)),
        Case("cpu_layer_time", (call("layer_time", cd),), cpu=_diff_knows_units(cd)),
    ]
    fp32, fp16 = _trt()
    td = wb.diff(fp32, fp16)
    cases += [
        Case("trt_diff_bars", (call("diff_bars", td, max_ranges=20),), ("A: fp32", "B: fp16")),
        Case("trt_layer_time", (call("layer_time", td),), ("A: fp32", "B: fp16")),
        Case("trt_summary_range", (call("summary_bars", fp16, "range", top=15),)),
        Case("hf_layer_time", (call("layer_time", hd),), habs),
        Case("hf_composition_counts", (call("range_composition", [ha, hb], metric="kernels"),), HF, kernels=True),
        Case("cpu4_rank_steps", (call("rank_steps", _rank_steps()),)),
    ]
    rows = [{"context": c, "variant": v, "median_ms": m, "min_ms": m * 0.95, "max_ms": m * 1.1}
            for c in (512, 2048, 8192) for v, m in (("bucketed", c / 4000), ("full", 2.0))]
    cases.append(Case("sweep_order", (call("sweep", rows, order=["full", "bucketed"], workload="decoder"),),
                      ("full", "bucketed")))
    fusion = [{"context": c, "variant": v, "median_ms": m} for c in (128, 512) for v, m in (("fused", 1.0), ("unfused", 2.0))]
    cases.append(Case("sweep_pair", (call("sweep", fusion, lo=None, hi=None, workload="decoder"),), ("unfused", "fused")))
    eng = [dict(r, engine=e, median_ms=r["median_ms"] * k) for r in rows for e, k in (("eager", 10), ("cudagraph", 1))]
    cases.append(Case("sweep_facets", (call("sweep", eng, facet="engine", order=["full", "bucketed"]),), ("full", "bucketed")))
    return cases, used


def _trt():
    fp32, fp16 = wb.import_file(TRT / "resnet18-a100-fp32"), wb.import_file(TRT / "resnet18-a100-fp16")
    fp32.name, fp16.name = "fp32", "fp16"
    return fp32, fp16


_SET_STEPS = []


def _rank_steps():
    """The steps table of the committed 4-rank CPU job (rank 2 sleeps in every layer), imported once."""
    if not _SET_STEPS:
        import tempfile

        with tempfile.TemporaryDirectory() as root:
            ts = wb.import_set("cpu4", sorted(SETS.glob("rank*.json.gz")), root=root, executor="local")
            _SET_STEPS.append(ts.steps())
    return _SET_STEPS[0]


def _diff_knows_units(d) -> bool:
    return getattr(d, "work_units", None) is not None


# One page's findings, computed in the page (see the module docstring for what is checked).
PROBE = r"""(order) => {
  const out = {figs: 0, rendered: 0, problems: [], legend: [], text: ""};
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  out.figs = plots.length;
  const within = (b, c, slack) => b.left >= c.left - slack && b.right <= c.right + slack &&
                                  b.top >= c.top - slack && b.bottom <= c.bottom + slack;
  const overlap = (p, q) => p.left < q.right - 1 && q.left < p.right - 1 && p.top < q.bottom - 1 && q.top < p.bottom - 1;
  // An element's outline on the page as a quadrilateral (its rotation kept), and whether two
  // such convex outlines overlap by more than a pixel (separating axes).
  const quad = (el) => {
    const b = el.getBBox(), m = el.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const overlaps = (P, Q) => {
    for (const poly of [P, Q]) for (let i = 0; i < poly.length; i++) {
      const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % poly.length];
      const nx = y2 - y1, ny = x1 - x2, len = Math.hypot(nx, ny) || 1;
      const pp = P.map(p => (p[0] * nx + p[1] * ny) / len), qq = Q.map(p => (p[0] * nx + p[1] * ny) / len);
      if (Math.max(...pp) <= Math.min(...qq) + 1 || Math.max(...qq) <= Math.min(...pp) + 1) return false;
    }
    return true;
  };
  let prevTop = -1;
  plots.forEach((gd, fi) => {
    const svg = gd.querySelector('svg.main-svg');
    if (!svg) { out.problems.push(`figure ${fi}: no svg.main-svg`); return; }
    out.rendered += 1;
    const box = svg.getBoundingClientRect();
    if (box.top < prevTop) out.problems.push(`figure ${fi} is above figure ${fi - 1}`);
    prevTop = box.top;
    const title = gd.querySelector('.gtitle');
    if (title && !within(title.getBoundingClientRect(), box, 1)) out.problems.push(`figure ${fi}: title clipped`);
    const bg = gd.querySelector('.legend .bg');
    const lbox = bg ? bg.getBoundingClientRect() : null;
    gd.querySelectorAll('.legend .traces').forEach(tr => {
      const t = tr.querySelector('.legendtext');
      const b = t.getBoundingClientRect();
      const sw = tr.querySelector('.legendpoints path');
      const entry = {fig: fi, text: t.textContent, fill: sw ? getComputedStyle(sw).fill : null};
      out.legend.push(entry);
      if (!(b.width > 0) || !within(b, box, 1) || (lbox && !within(b, lbox, 2)))
        out.problems.push(`figure ${fi}: legend entry clipped: ${entry.text.slice(0, 60)}`);
    });
    // Bars inside a plot area (a relayout that moves the axes must move the bars too).
    const areas = Array.from(gd.querySelectorAll('.bglayer rect.bg')).map(r => r.getBoundingClientRect());
    let stray = 0;
    gd.querySelectorAll('.barlayer .point path').forEach(bar => {
      const b = bar.getBoundingClientRect();
      if (b.width > 0 && b.height > 0 && areas.length && !areas.some(a => within(b, a, 2))) stray += 1;
    });
    if (stray) out.problems.push(`figure ${fi}: ${stray} bars outside the plot area`);
    // Bar labels drawn: inside their bar, not over each other.
    const shown = [];
    gd.querySelectorAll('.barlayer .point').forEach(pt => {
      const t = pt.querySelector('text.bartext');
      const bar = pt.querySelector('path');
      if (!t || !t.textContent) return;
      const b = t.getBoundingClientRect();
      if (!(b.width > 0) || getComputedStyle(t).opacity === '0' || getComputedStyle(t).display === 'none') return;
      const tr = pt.closest('.trace');
      const inside = tr && tr.__data__ && tr.__data__[0] && tr.__data__[0].trace.textposition === 'inside';
      if (inside && bar && !within(b, bar.getBoundingClientRect(), 1))
        out.problems.push(`figure ${fi}: label "${t.textContent}" sticks out of its bar`);
      shown.push([t.textContent, b]);
    });
    for (let i = 0; i < shown.length; i++)
      for (let j = i + 1; j < shown.length; j++)
        if (overlap(shown[i][1], shown[j][1]))
          out.problems.push(`figure ${fi}: labels overlap: "${shown[i][0]}" / "${shown[j][0]}"`);
    // Tick labels: their outlines (rotated ones included) inside the figure, off every plot
    // area, title, axis title and the legend, and off each other; bar labels off the titles.
    const ticks = Array.from(gd.querySelectorAll('.xaxislayer-above text, .yaxislayer-above text'))
      .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0);
    const titles = Array.from(gd.querySelectorAll('.gtitle, .annotation-text, .g-xtitle text, .g-ytitle text, ' +
      '[class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text'))
      .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0);
    const tq = ticks.map(quad), hq = titles.map(quad);
    const areaQ = Array.from(gd.querySelectorAll('.draglayer .nsewdrag')).map(quad);  // the plot areas
    const legendQ = bg ? [quad(bg)] : [];
    ticks.forEach((t, i) => {
      const name = t.textContent.slice(0, 40);
      if (!tq[i].every(([x, y]) => x >= box.left - 1 && x <= box.right + 1 && y >= box.top - 1 && y <= box.bottom + 1))
        out.problems.push(`figure ${fi}: tick label "${name}" sticks out of the figure`);
      if (areaQ.some(a => overlaps(tq[i], a))) out.problems.push(`figure ${fi}: tick label "${name}" runs into a plot area`);
      hq.forEach((h, j) => { if (overlaps(tq[i], h))
        out.problems.push(`figure ${fi}: tick label "${name}" runs over "${titles[j].textContent.slice(0, 40)}"`); });
      if (legendQ.some(l => overlaps(tq[i], l))) out.problems.push(`figure ${fi}: tick label "${name}" runs into the legend`);
      for (let j = i + 1; j < ticks.length; j++) if (overlaps(tq[i], tq[j]))
        out.problems.push(`figure ${fi}: tick labels overlap: "${name}" / "${ticks[j].textContent.slice(0, 40)}"`);
    });
    // Titles off the plot areas and off each other.
    const heads = Array.from(gd.querySelectorAll('.gtitle, .annotation-text')).filter(t => t.textContent.trim());
    heads.forEach((h, i) => {
      const q = quad(h);
      if (areaQ.some(a => overlaps(q, a))) out.problems.push(`figure ${fi}: title "${h.textContent.slice(0, 40)}" runs into a plot area`);
      for (let j = i + 1; j < heads.length; j++) if (overlaps(q, quad(heads[j])))
        out.problems.push(`figure ${fi}: titles overlap: "${h.textContent.slice(0, 40)}" / "${heads[j].textContent.slice(0, 40)}"`);
    });
    shown.forEach(([text, b]) => {
      const q = [[b.left, b.top], [b.right, b.top], [b.right, b.bottom], [b.left, b.bottom]];
      hq.forEach((h, j) => { if (overlaps(q, h))
        out.problems.push(`figure ${fi}: bar label "${text}" runs over "${titles[j].textContent.slice(0, 40)}"`); });
    });
    out.text += Array.from(gd.querySelectorAll('text')).map(t => t.textContent).join('\n') + '\n' +
                JSON.stringify(gd.data) + JSON.stringify(gd.layout) + '\n';
    if (!order) return;
    const [base, fix] = order;
    // Legend: the base's entry first.
    const names = Array.from(gd.querySelectorAll('.legend .legendtext')).map(t => t.textContent);
    const ia = names.findIndex(n => n.includes(base)), ib = names.findIndex(n => n.includes(fix));
    if (ia >= 0 && ib >= 0 && ia > ib) out.problems.push(`figure ${fi}: legend lists the fix before the base`);
    // Axis labels (multicategory groups, categories): the base left.
    const axisX = (label) => {
      const xs = Array.from(gd.querySelectorAll('.xaxislayer-above text, .xtick text, .x2tick text, .xtick2 text'))
        .filter(t => t.textContent.trim() === label || t.textContent.trim().startsWith(label))
        .map(t => t.getBoundingClientRect().left);
      return xs.length ? Math.min(...xs) : null;
    };
    const xa = axisX(base), xb = axisX(fix);
    if (xa !== null && xb !== null && xa > xb) out.problems.push(`figure ${fi}: the fix is left of the base on the x axis`);
    // Panels (subplot titles): the base's left of the fix's.
    const panel = (label) => {
      const t = Array.from(gd.querySelectorAll('.annotation-text')).find(a => a.textContent.includes(label));
      return t ? t.getBoundingClientRect().left : null;
    };
    const pa = panel(base), pb = panel(fix);
    if (pa !== null && pb !== null && pa > pb) out.problems.push(`figure ${fi}: the fix's panel is left of the base's`);
    // Grouped bars: the base trace's first bar left of the fix trace's, in the first subplot.
    const layer = gd.querySelector('.barlayer');
    if (layer) {
      const first = (part) => {
        const g = Array.from(layer.querySelectorAll(':scope > .trace')).find(
          el => el.__data__ && el.__data__[0] && String(el.__data__[0].trace.name).replace(/<br>/g, '').includes(part));
        const p = g && g.querySelector('.point path');
        return p ? p.getBoundingClientRect().left : null;
      };
      const ba = first(base), bb = first(fix);
      if (ba !== null && bb !== null && ba > bb) out.problems.push(`figure ${fi}: the fix's bars are left of the base's`);
    }
  });
  return out;
}"""


def _html(case: Case, path: Path) -> None:
    parts = [f.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"{case.name}-{i}",
                       config={"responsive": True}) for i, f in enumerate(case.figs)]
    path.write_text("<!doctype html><html><head><meta charset='utf-8'></head><body>" + "".join(parts)
                    + "</body></html>", encoding="utf-8")


def _check_colors(case: Case, legend: list[dict]) -> None:
    """Distinct kernels, distinct colours; one kernel, one colour (across a pair's figures)."""
    by_name: dict[str, set] = {}
    for e in legend:
        if e["fill"] and not e["text"].startswith("("):
            by_name.setdefault(e["text"], set()).add(e["fill"])
    for name, fills in by_name.items():
        if len(fills) > 1:
            case.problems.append(f"kernel {name[:60]} has colours {sorted(fills)}")
    owners: dict[str, str] = {}
    for name, fills in by_name.items():
        for f in fills:
            if f in owners and owners[f] != name:
                case.problems.append(f"kernels {owners[f][:50]} and {name[:50]} share colour {f}")
            owners[f] = name


def test_every_figure_reads_well_in_chromium(tmp_path):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    exe = _chromium()
    from workbench.viz import _API

    cases, used = _cases()
    exported = {n for n, mod in _API.items() if mod in FIGURE_MODULES}
    assert used == exported, f"figure functions not drawn here: {sorted(exported - used)}"
    for c in cases:
        _html(c, tmp_path / f"{c.name}.html")

    failed = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1000, "height": 900}, offline=True)
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            for c in cases:
                errors.clear()
                page.goto((tmp_path / f"{c.name}.html").as_uri(), wait_until="load")
                try:
                    page.wait_for_function(f"document.querySelectorAll('svg.main-svg').length >= {len(c.figs)}",
                                           timeout=20_000)
                except Exception:
                    pass
                found = page.evaluate(PROBE, list(c.order) if c.order else None)
                c.problems += errors + found["problems"]
                if found["rendered"] != len(c.figs):
                    c.problems.append(f"{found['rendered']} of {len(c.figs)} figures rendered")
                if c.kernels:
                    _check_colors(c, found["legend"])
                if c.cpu and "GPU" in found["text"]:
                    i = found["text"].index("GPU")
                    c.problems.append(f"a CPU-only trace's figure says GPU: ...{found['text'][max(i - 60, 0):i + 20]}...")
                if c.problems:
                    shot = tmp_path / f"{c.name}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"{c.name}: screenshot {shot}")
                    failed.append(c)
        finally:
            browser.close()
    assert not failed, "\n".join(f"{c.name}: {pr}" for c in failed for pr in c.problems)


# What the cross-figure checks read from a page: per figure, its legend (text, fill), its tick
# labels (text, centre), its plot areas, its kernel bars (left, right, width, height) and text.
READ = r"""() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
  const box = (el) => { const b = el.getBoundingClientRect(); return {l: b.left, r: b.right, t: b.top, b: b.bottom}; };
  const legend = Array.from(gd.querySelectorAll('.legend .traces')).map(tr => {
    const sw = tr.querySelector('.legendpoints path');
    return {text: tr.querySelector('.legendtext').textContent, fill: sw ? getComputedStyle(sw).fill : null};
  });
  const ticks = (sel) => Array.from(gd.querySelectorAll(sel)).filter(t => t.textContent.trim())
    .map(t => ({text: t.textContent, ...box(t)}));
  const bars = [];
  gd.querySelectorAll('.barlayer .trace').forEach(tr => {
    const name = tr.__data__ && tr.__data__[0] ? String(tr.__data__[0].trace.name) : '';
    tr.querySelectorAll('.point path').forEach(p => bars.push({name, fill: getComputedStyle(p).fill, ...box(p)}));
  });
  return {legend, xticks: ticks('.xaxislayer-above text'), yticks: ticks('.yaxislayer-above text'), bars,
          areas: Array.from(gd.querySelectorAll('.draglayer .nsewdrag')).map(box),
          text: Array.from(gd.querySelectorAll('text')).map(t => t.textContent).join('\n')};
})"""


def _hue(fill: str) -> float:
    import colorsys

    r, g, b = (int(v) / 255 for v in fill[fill.index("(") + 1:fill.index(")")].split(",")[:3])
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


def _pages() -> dict[str, tuple]:
    """The figures of one session, drawn in this order (one kernel colour book: the session's)."""
    a, b = (wb.open_trace(str(TRACES / n)) for n in KV)
    ha, hb = (wb.open_trace(str(TRACES / n)) for n in HF)
    full, bucketed = (wb.open_trace(str(TRACES / f"h200-cache-{v}-ctx512-eager-torch")) for v in ("full", "bucketed"))
    fp32, fp16 = _trt()
    td = wb.diff(fp32, fp16)
    return {
        "colors": (viz.timeline(a), viz.range_composition(a), viz.timeline_pair((a, b), "layer_03/kv_write")[0],
                   viz.range_composition({"unfused": a, "fused": b})),
        "layers": (viz.layer_counts(wb.diff(ha, hb), range="self_attn"), viz.diff_bars(td, max_ranges=20)),
        "trt": (viz.diff_bars(td, max_ranges=20), viz.layer_time(td), viz.launches_per_step([fp32, fp16]),
                viz.summary_bars(fp16, "range", top=15)),
        "attention": viz.timeline_pair((full, bucketed), "layer_03/attention"),
        "ranks": (viz.rank_steps(_rank_steps()),),
    }


def _agree(name: str, figs: list[dict]) -> list[str]:
    problems = []
    if name == "colors":
        # One kernel, one hue in every figure (the same colour where no figure mutes it).
        seen: dict[str, list] = {}
        for i, f in enumerate(figs):
            for e in f["legend"]:
                if e["fill"] and not e["text"].startswith("("):
                    seen.setdefault(e["text"], []).append((i, e["fill"]))
        shared = {k: v for k, v in seen.items() if len({i for i, _ in v}) > 1}
        if len(shared) < 3:
            problems.append(f"only {len(shared)} kernels drawn in more than one figure")
        for k, v in shared.items():
            hues = [_hue(fill) for _, fill in v]
            if max(hues) - min(hues) > 3:
                problems.append(f"kernel {k[:50]} changes colour between figures: {v}")
            plain = {fill for i, fill in v if i in (0, 1)}  # figures without emphasis: never muted
            if len(plain) > 1:
                problems.append(f"kernel {k[:50]} has colours {sorted(plain)} in two plain figures")
    elif name == "layers":
        xs = sorted((t["l"], t["text"]) for t in figs[0]["xticks"] if re.fullmatch(r"(layer )?\d+", t["text"].strip()))
        if [int(x.split()[-1]) for _, x in xs] != list(range(16)):
            problems.append(f"layers left to right read {[x for _, x in xs]}")
        # Engine layers in reading order (top to bottom, or left to right on an x axis).
        rows = [t["text"] for t in sorted(figs[1]["yticks"], key=lambda t: t["t"])] + \
               [t["text"] for t in sorted(figs[1]["xticks"], key=lambda t: t["l"])]
        first = [next((i for i, r in enumerate(rows) if r.startswith(n)), None) for n in ("Conv_3 +", "Conv_10 +")]
        if None in first or first[0] > first[1]:
            problems.append(f"engine layers read {rows[:8]}")
    elif name == "trt":
        for i, f in enumerate(figs):
            for word in ("step", "kernel"):
                if word in f["text"]:
                    problems.append(f"TensorRT figure {i} says {word!r}")
        if "engine layers per inference" not in figs[0]["text"] or "GPU time per inference" not in figs[0]["text"]:
            problems.append("TensorRT diff bars do not say engine layers / GPU time per inference")
    elif name == "attention":
        # One time axis: the same ticks; bucketed attention's GPU work visibly shorter.
        ends = []
        for f in figs:
            plot = f["areas"][0]
            kernels = [b for b in f["bars"] if b["name"] != "ranges"]
            ends.append((max(b["r"] for b in kernels) - plot["l"]) / (plot["r"] - plot["l"]))
            widths = sorted(b["r"] - b["l"] for b in kernels)
            if widths[len(widths) // 2] < 3:
                problems.append(f"kernels drawn as slivers: median {widths[len(widths) // 2]:.1f} px")
        if [t["text"] for t in figs[0]["xticks"]] != [t["text"] for t in figs[1]["xticks"]]:
            problems.append("full and bucketed timelines have different time axes")
        if not 0.65 < ends[1] / ends[0] < 0.8:
            problems.append(f"bucketed/full GPU extent on the page {ends[1] / ends[0]:.2f}, expected about 0.73")
    elif name == "ranks":
        f = figs[0]
        plot = f["areas"][0]
        own = [b for b in f["bars"] if b["name"].startswith("own") and plot["l"] <= b["l"] and b["r"] <= plot["r"]]
        tallest = max(b["b"] - b["t"] for b in own)
        if tallest < 0.5 * (plot["b"] - plot["t"]):
            problems.append(f"the straggler's own time is {tallest:.0f} px of a {plot['b'] - plot['t']:.0f} px plot")
        if "_ns" in " ".join(e["text"] for e in f["legend"]):
            problems.append("the legend shows raw column names")
    return problems


def test_figures_agree_across_a_session(tmp_path):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    exe = _chromium()
    pages = _pages()
    failed = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": 1000, "height": 900}, offline=True).new_page()
            for name, figs in pages.items():
                case = Case(name, tuple(figs))
                _html(case, tmp_path / f"{name}.html")
                page.goto((tmp_path / f"{name}.html").as_uri(), wait_until="load")
                page.wait_for_function(f"document.querySelectorAll('svg.main-svg').length >= {len(figs)}",
                                       timeout=20_000)
                problems = _agree(name, page.evaluate(READ))
                if problems:
                    shot = tmp_path / f"{name}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"{name}: screenshot {shot}")
                    failed += [f"{name}: {pr}" for pr in problems]
        finally:
            browser.close()
    assert not failed, "\n".join(failed)
