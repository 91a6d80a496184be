"""Render a :class:`~workbench.reporting.model.Report` as Markdown ready to paste into a PR.

Escaping: trace-supplied identifiers go into code spans (backtick fences longer than any
backtick run inside, pipes escaped inside tables, newlines and control characters made
visible); other text is backslash-escaped for every character Markdown (and GitHub's
extensions: tables, strikethrough, math, mentions) would interpret.
"""

from __future__ import annotations

import re

from ..textfmt import clean
from .model import AlignGroup, Code, Mixed, Report, Table

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&$@])")
_NEWLINES = re.compile(r"\r\n|\r|\n")


def _line(s: str) -> str:
    """One visible line: control characters escaped, line breaks shown as ``\\n``."""
    return clean(_NEWLINES.sub(r"\\n", s))


def text(s: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", _line(str(s)))


def code(s: str, in_table: bool = False) -> str:
    s = _line(str(s))
    if not s:
        return "(empty)"
    if in_table:
        s = s.replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if (s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" "))) else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(c, in_table: bool = False) -> str:
    if isinstance(c, Code):
        return code(c.text, in_table)
    if isinstance(c, Mixed):
        return "".join(cell(p, in_table) for p in c.parts)
    return text(c)


def line(parts: list) -> str:
    return "".join(cell(p) for p in parts)


def table(t: Table) -> str:
    out = ["| " + " | ".join(cell(h, True) for h in t.headers) + " |",
           "|" + "|".join("---:" if i in t.numeric else "---" for i in range(len(t.headers))) + "|"]
    for row in t.rows:
        cells = [cell(c, True) for c in row] + [""] * (len(t.headers) - len(row))
        out.append("| " + " | ".join(cells) + " |")
    if t.note:
        out += ["", f"_{text(t.note)}_"]
    return "\n".join(out)


def alignment(g: AlignGroup, unit: str) -> str:
    body = []
    for op, name, count in g.ops:
        sign = {"removed": "-", "added": "+"}.get(op, " ")
        body.append(f"{sign} {_line(name)}" + (f"  x{count}" if count > 1 else ""))
    if g.truncated:
        body.append(f"  ... {g.truncated} more lines")
    content = "\n".join(body)
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    head = (f"{code(g.range)}{' in ' + text(g.where) if g.where else ''}: {g.removed} {text(unit)}(s) removed, "
            f"{g.added} added" + (f" (one range instance shown; {g.count} identical)" if g.count > 1 else ""))
    block = f"{fence}diff\n{content}\n{fence}"
    if len(body) > 40:  # long sequences fold away on GitHub
        return f"{head}\n\n<details><summary>{len(body)} lines</summary>\n\n{block}\n\n</details>"
    return f"{head}\n\n{block}"


def render(r: Report) -> str:
    w = r.words
    out: list[str] = [f"# {text(r.title)}", "", line(r.subtitle), ""]
    if r.headline:
        items = []
        for h in r.headline:
            if h.base or h.fix:
                items.append(f"{text(h.label)} **{text(h.base)} → {text(h.fix)}**, {text(h.change)}")
            else:
                items.append(f"{text(h.label)}: {cell(h.change) if not isinstance(h.change, str) else text(h.change)}")
        out += ["**Headline:** " + "; ".join(items), ""]

    out += ["## Commands and Results", "", table(r.results), ""]
    if any(cmd for _, _, cmd in r.commands):
        out += ["Commands recorded with each trace:", ""]
        for role, name, cmd in r.commands:
            out.append(f"- {text(role)} {code(name)}: " + (code(cmd) if cmd else "not recorded"))
        out.append("")
    if r.variant_changes:
        out.append("What differs between base and fix (capture metadata): " + "; ".join(
            f"{code(k)} {code(a)} → {code(b)}" for k, a, b in r.variant_changes))
        out.append("")

    out += [f"## Per-layer {text(w.unit)} counts and {text(w.time)} of the ranges that changed", ""]
    if r.layer_counts is not None:
        out += [table(r.layer_counts), ""]
    elif r.changed_ranges:
        out += ["No per-layer ranges changed; see the range table below.", ""]
    else:
        out += [text(f"No range changed its {w.unit} count, and no range's {w.time} moved past the threshold."), ""]
    if r.range_times is not None:
        out += [f"### {text(w.time)} of the changed ranges", "", table(r.range_times), ""]
    if r.alignments:
        out += [f"### Aligned {text(w.unit)} sequences", ""]
        for g in r.alignments:
            out += [alignment(g, w.unit), ""]
        if r.alignments_total > len(r.alignments):
            out += [f"_{r.alignments_total - len(r.alignments)} more changed {text(w.unit)} sequences not shown._", ""]

    if r.ranks is not None:
        out += ["## Ranks", "", table(r.ranks), ""]

    if r.sweep is not None:
        out += ["## Sweep: latency vs context length", ""]
        if r.sweep_note:
            out += [f"- {line(ln)}" for ln in r.sweep_note] + [""]
        out += [table(r.sweep), ""]

    out += ["## Correctness", ""]
    if r.correctness:
        out += [f"- {line(ln)}" for ln in r.correctness]
    else:
        out.append("- not checked: no outputs recorded in the traces (see gaps)")
    out.append("")

    out += ["## Hardware, Environment and Revisions", "", table(r.environment), ""]
    out += ["## Traces used", "", table(r.provenance), ""]

    out += ["## Not run / remaining gaps", ""]
    out += [f"- {line(g)}" for g in r.gaps] if r.gaps else ["- none recorded"]
    out += ["", "---", "",
            f"Generated by {text(r.generator)} from the stored traces listed above (identified by content hash). "
            f"Regenerate with {code(r.regenerate)}.", ""]
    return "\n".join(out)
