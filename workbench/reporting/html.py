"""Render a :class:`~workbench.reporting.model.Report` and its figures as one self-contained HTML
file: plotly.js embedded once, no network (a Content-Security-Policy forbids every fetch and
allows only the page's own scripts, by hash), every trace-supplied string escaped.

Deterministic: figure ids are hashes of the figure JSON, nothing reads the clock.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import re

from ..errors import WorkbenchError
from ..textfmt import clean
from .model import AlignGroup, Code, Mixed, Report, Table

_NEWLINES = re.compile(r"\r\n|\r|\n")


def esc(s) -> str:
    return _html.escape(clean(_NEWLINES.sub(r"\\n", str(s))), quote=True)


def cell(c) -> str:
    if isinstance(c, Code):
        return f"<code>{esc(c.text)}</code>" if c.text else "<code>(empty)</code>"
    if isinstance(c, Mixed):
        return "".join(cell(p) for p in c.parts)
    return esc(c)


def table(t: Table, cls: str = "") -> str:
    head = "".join(f"<th{' class=num' if i in t.numeric else ''}>{cell(h)}</th>" for i, h in enumerate(t.headers))
    body = []
    for row in t.rows:
        tds = "".join(f"<td{' class=num' if i in t.numeric else ''}>{cell(c)}</td>" for i, c in enumerate(row))
        body.append(f"<tr>{tds}</tr>")
    note = f'<p class="note">{esc(t.note)}</p>' if t.note else ""
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{note}')


def alignment(g: AlignGroup, unit: str) -> str:
    rows = []
    for op, name, count in g.ops:
        sign = {"removed": "−", "added": "+"}.get(op, "")
        rows.append(f'<tr class="{op}"><td class="sign">{sign}</td><td><code>{esc(name)}</code></td>'
                    f'<td class="num">{"×" + str(count) if count > 1 else ""}</td></tr>')
    if g.truncated:
        rows.append(f'<tr class="equal"><td></td><td class="muted">… {g.truncated} more lines</td><td></td></tr>')
    where = f" in {esc(g.where)}" if g.where else ""
    same = f' <span class="muted">(one instance shown; {g.count} identical)</span>' if g.count > 1 else ""
    table = f'<table class="kdiff"><tbody>{"".join(rows)}</tbody></table>'
    if len(rows) > 40:
        table = f"<details><summary>{len(rows)} lines</summary>{table}</details>"
    return (f'<div class="align"><h4><code>{esc(g.range)}</code>{where} — '
            f'<span class="removed-t">{g.removed} {esc(unit)}(s) removed</span>, '
            f'<span class="added-t">{g.added} added</span>'
            f'{same}</h4>{table}</div>')


def _json_for_script(s: str) -> str:
    """JSON text safe inside <script>: no ``<``, ``>``, ``&`` or line separators survive."""
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# What installs plotly: pyproject.toml's extra of that name.
VIZ_EXTRA = "viz"


def require_plotly():
    """``plotly.io``, or one line naming the extra to install where plotly is missing: the HTML
    report's figures and script need it, the Markdown report does not."""
    try:
        import plotly.io as pio
    except ImportError:
        raise WorkbenchError("report", f"the HTML report needs plotly: pip install 'workbench[{VIZ_EXTRA}]' (the "
                                       "Markdown report does not)") from None
    return pio


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    if "</script" in js.lower():  # pragma: no cover - the official bundle has none
        raise WorkbenchError("plotly", "plotly.min.js contains '</script': cannot embed it inline")
    return js


def _figure(title: str, fig) -> tuple[str, str]:
    """(div html, script body) for one figure, with an id derived from its content."""
    pio = require_plotly()
    spec = _json_for_script(pio.to_json(fig, validate=False, pretty=False))
    div_id = "fig-" + hashlib.sha256((title + "\0" + spec).encode()).hexdigest()[:16]
    script = (f'(function(){{var F={spec};Plotly.newPlot("{div_id}",F.data,F.layout,'
              f'{{"responsive":true,"displaylogo":false}});}})();')
    div = (f'<figure><figcaption>{esc(title)}</figcaption>'
           f'<div id="{div_id}" class="plot" style="height:{_height(fig)}px"></div></figure>')
    return div, script


def _height(fig) -> int:
    h = fig.layout.height
    return int(h) if h else 450


def _sha(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


CSS = """
:root{--fg:#1d2433;--muted:#5b6475;--line:#d9dee7;--bg:#ffffff;--soft:#f5f7fa;--rem:#fde8e8;--remfg:#a61b1b;
--add:#e4f6e7;--addfg:#17692b;--acc:#2b59c3}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
main{max-width:1180px;margin:0 auto;padding:24px 20px 60px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 10px;padding-top:8px;border-top:1px solid var(--line)}
h3{font-size:16px;margin:22px 0 8px}h4{font-size:14px;margin:14px 0 6px;font-weight:600}
code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);padding:1px 4px;
border-radius:3px;overflow-wrap:anywhere}
.sub{color:var(--muted);margin:0 0 18px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0 8px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:200px;max-width:440px;
background:var(--soft)}
.card .k{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.card.caveat{border-color:#d39b2a;background:#fff6e3}
.card .v{font-size:20px;font-weight:650}.card .c{font-size:13px;color:var(--acc)}
nav{font-size:13px;color:var(--muted);margin:10px 0}nav a{color:var(--acc);margin-right:12px;text-decoration:none}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:6px 0;font-size:14px}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.note{color:var(--muted);font-size:13px;margin:4px 0 12px}
.muted{color:var(--muted);font-weight:400}
figure{margin:14px 0;border:1px solid var(--line);border-radius:8px;padding:6px}
figcaption{font-size:13px;color:var(--muted);padding:2px 6px}
.plot{width:100%}
.kdiff td{border:none;border-bottom:1px solid #eef0f4;padding:2px 8px}
.kdiff tr.removed{background:var(--rem)}.kdiff tr.removed code{background:transparent;color:var(--remfg);
text-decoration:line-through}
.kdiff tr.added{background:var(--add)}.kdiff tr.added code{background:transparent;color:var(--addfg);font-weight:600}
.kdiff tr.equal code{background:transparent;color:var(--muted)}
.kdiff td.sign{width:1.5em;font-weight:700;text-align:center}
.removed-t{color:var(--remfg)}.added-t{color:var(--addfg)}
ul.lines{padding-left:20px}ul.lines li{margin:3px 0}
.prov code{white-space:nowrap;overflow-wrap:normal}.prov td:last-child code{white-space:normal;overflow-wrap:anywhere}
footer{margin-top:40px;color:var(--muted);font-size:13px;border-top:1px solid var(--line);padding-top:10px}
"""


def render(r: Report, figures: list[tuple[str, str, object]]) -> str:
    """The page of ``r`` with ``figures``: (section anchor, caption, figure or the reason it
    was left out), each shown in its section."""
    plotly_js = _plotly_js() if any(not isinstance(f, str) for _, _, f in figures) else ""
    placed: list[int] = []  # figure indices in page order: each figure's script follows its div
    made: dict[int, tuple[str, str]] = {}
    w = r.words

    def made_fig(k: int) -> tuple[str, str]:
        if k not in made:
            made[k] = _figure(*figures[k][1:])
        return made[k]

    def figs(*where: str) -> str:
        out = []
        for k, (anchor, title, fig) in enumerate(figures):
            if k in placed or (where and anchor not in where):
                continue
            placed.append(k)
            if isinstance(fig, str):  # a figure left out, with the reason
                out.append(f'<p class="note">{esc(title)}: {esc(fig)}</p>')
            else:
                out.append(made_fig(k)[0])
        return "".join(out)

    sections = []
    nav = []

    def section(anchor: str, title: str, body: str) -> None:
        nav.append(f'<a href="#{anchor}">{esc(title)}</a>')
        sections.append(f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>')

    cards = []
    for h in r.headline:
        card = f'<div class="card{" caveat" if h.caveat else ""}"><div class="k">{esc(h.label)}</div>'
        if h.base or h.fix:
            cards.append(f'{card}<div class="v">{esc(h.base)} → {esc(h.fix)}</div><div class="c">{esc(h.change)}</div></div>')
        else:
            cards.append(f'{card}<div class="c">{esc(h.change)}</div></div>')

    body = table(r.results, "results")
    if any(cmd for _, _, cmd in r.commands):
        body += "<h3>Commands recorded with each trace</h3><ul class=lines>" + "".join(
            f"<li>{esc(role)} <code>{esc(name)}</code>: " + (f"<code>{esc(cmd)}</code>" if cmd else "not recorded")
            + "</li>" for role, name, cmd in r.commands) + "</ul>"
    if r.variant_changes:
        body += "<p>What differs between base and fix (capture metadata): " + "; ".join(
            f"<code>{esc(k)}</code> <code>{esc(a)}</code> → <code>{esc(b)}</code>" for k, a, b in r.variant_changes) + "</p>"
    section("results", "Commands and Results", body)

    body = ""
    if r.layer_counts is not None:
        body += table(r.layer_counts)
    elif not r.changed_ranges:
        body += (f"<p>No range changed its {esc(w.unit)} count, and no range's {esc(w.time)} moved past the "
                 "threshold.</p>")
    if r.range_times is not None:
        body += f"<h3>{esc(w.time)} of the changed ranges</h3>" + table(r.range_times)
    body += figs("layers")
    section("layers", f"Per-layer {w.unit} counts and {w.time} of the ranges that changed", body)

    body = "".join(alignment(g, w.unit) for g in r.alignments) or f"<p>No {esc(w.unit)} sequence changed.</p>"
    if r.alignments_total > len(r.alignments):
        body += (f'<p class="note">{r.alignments_total - len(r.alignments)} more changed {esc(w.unit)} sequences '
                 'not shown.</p>')

    body += figs("kernels")
    section("kernels", f"Aligned {w.unit} diff of the ranges that changed", body)

    body = figs("steps")
    section("steps", f"{w.Launches} per step and range composition", body)

    if r.ranks is not None:
        section("ranks", "Ranks", table(r.ranks))

    if r.sweep is not None:
        note = "".join(f"<li>{''.join(cell(p) for p in ln)}</li>" for ln in r.sweep_note)
        body = (f"<ul class=lines>{note}</ul>" if note else "") + figs("sweep") \
            + table(r.sweep)
        section("sweep", "Sweep: latency vs context length", body)

    rest = figs()  # any figure no section claimed still gets shown
    if rest:
        section("figures", "More figures", rest)

    body = "<ul class=lines>" + ("".join(f"<li>{''.join(cell(p) for p in ln)}</li>" for ln in r.correctness)
                                 or "<li>not checked: no outputs recorded in the traces (see gaps)</li>") + "</ul>"
    section("correctness", "Correctness", body)
    section("env", "Hardware, Environment and Revisions", table(r.environment))
    section("provenance", "Trace provenance", table(r.provenance, "prov"))
    body = "<ul class=lines>" + ("".join(f"<li>{''.join(cell(p) for p in g)}</li>" for g in r.gaps)
                                 or "<li>none recorded</li>") + "</ul>"
    section("gaps", "Not run / remaining gaps", body)

    scripts = [made_fig(k)[1] for k in placed if not isinstance(figures[k][2], str)]
    csp_scripts = " ".join([_sha(plotly_js)] * bool(plotly_js) + [_sha(s) for s in scripts]) or "'none'"
    csp = (f"default-src 'none'; script-src {csp_scripts}; style-src 'unsafe-inline'; img-src data:; "
           "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="{esc(r.generator)}">'
            f"<title>{esc(r.title)}</title><style>{CSS}</style>"
            + (f"<script>{plotly_js}</script>" if plotly_js else "") + "</head>\n")
    subtitle = "".join(cell(p) for p in r.subtitle)
    page = (head + "<body><main>"
            f"<h1>{esc(r.title)}</h1><p class=sub>{subtitle}</p>"
            f'<div class="cards">{"".join(cards)}</div><nav>{"".join(nav)}</nav>'
            + "\n".join(sections) +
            f"<footer>Generated by {esc(r.generator)} from the traces listed under Trace provenance "
            f"(identified by content hash). Regenerate with <code>{esc(r.regenerate)}</code>.</footer>"
            "</main>\n" + "".join(f"<script>{s}</script>\n" for s in scripts) + "</body></html>\n")
    return page
