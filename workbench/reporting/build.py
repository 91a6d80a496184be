"""Build the :class:`~workbench.reporting.model.Report` from loaded inputs.

Pure: the same traces (and sweep) give the same report. Nothing here reads the clock, the
working directory or the git checkout; revisions come from the traces' manifests. The parts
come from one module each: ``timing`` (timed phases and their comparison), ``results``
(launches, busy time, headline), ``words`` (kernels or CPU ops), ``tables`` (what
changed), ``checks`` (correctness, gaps), ``provenance`` (environment, trace identities).
"""

from __future__ import annotations

import shlex

from ..analysis.confounding import assess
from ..trace.manifest import lookup
from . import checks, provenance, results, tables, timing
from .inputs import Input, Sweep
from .model import Code, Headline, Report
from ..trace.words import words as words_of


def _variant_changes(base: Input, fix: Input) -> list[tuple[str, str, str]]:
    """(key, base value, fix value) for each capture setting and variant key that differs."""
    out = []
    for key in ("workload", "engine", "backend"):
        a, b = lookup(base.meta, "capture", key), lookup(fix.meta, "capture", key)
        if a is not None and b is not None and a != b:
            out.append((key, str(a), str(b)))
    va, vb = lookup(base.meta, "capture", "variant"), lookup(fix.meta, "capture", "variant")
    if isinstance(va, dict) and isinstance(vb, dict):
        for k in sorted(set(va) | set(vb), key=str):
            if va.get(k) != vb.get(k):
                out.append((f"variant.{k}", str(va.get(k, "–")), str(vb.get(k, "–"))))
    return out


def _regenerate(inputs: list[Input], sweep: Sweep | None, title: str | None, allow_mixed: bool,
                sources: list[str] | None) -> str:
    """The command that regenerates this report (trace names, or the ``sources`` given in their
    place, not the paths they were read from)."""
    regen = ["workbench", "report", *(sources or [i.name for i in inputs])]
    if sweep is not None:
        regen += ["--sweep", sweep.source]
    if title:
        regen += ["--title", title]
    if allow_mixed:
        regen.append("--allow-mixed")
    return shlex.join(regen + ["-o", "report.html", "--md", "report.md"])


def build(inputs: list[Input], d, sweep: Sweep | None = None, *, title: str | None = None,
          allow_mixed: bool = False, sources: list[str] | None = None) -> Report:
    """The report model of ``inputs`` (base, fix, extras), their diff ``d`` and a sweep;
    ``sources``: what the regenerating command names instead of the traces (two trace sets)."""
    from ..vocabulary import VERSION

    base, fix, extras = inputs[0], inputs[1], inputs[2:]
    phases = timing.phases_of([i.trace for i in inputs])
    # Each trace against the base; base against fix is the diff's own comparison.
    comps = [{}] + [timing.compare(phases[0], ph, d.timing if k == 1 else None) for k, ph in enumerate(phases) if k]
    launches = [results.launches(i) for i in inputs]
    busies = [results.busy(i) for i in inputs]
    words = words_of(i.meta for i in inputs)
    conf = assess(base.trace, fix.trace, d, tuple(b["fraction"] if b else None for b in busies[:2]))
    headline = results.headline(phases, comps, launches, busies, words, conf, tables.top_changes(d, words, by_count=any(conf.interpreted)))
    if none := d.nothing_in_common(("base", "fix")):  # first: it tells how to read every number after it
        headline.insert(0, Headline("range paths", "", "", none, caveat=True))
    correctness, corr_gaps, corr_summary = checks.correctness(inputs)
    if checks.outputs(base.meta) is not None and checks.outputs(fix.meta) is not None:
        headline.append(Headline("outputs", "", "", corr_summary[0]))
    names = tables.changed_names(d)
    aligned, n_aligned = tables.alignments(d, names) if names else ([], 0)
    return Report(
        title=title or f"{base.name} → {fix.name}",
        subtitle=["base ", Code(base.name), " → fix ", Code(fix.name)] +
                 [x for e in extras for x in (f", {e.role} ", Code(e.name))],
        headline=headline,
        commands=[(i.role, i.name, provenance.command(i.meta)) for i in inputs],
        results=results.results(inputs, phases, comps, launches, busies, words, conf.confounded),
        variant_changes=_variant_changes(base, fix),
        layer_counts=tables.layer_counts(d, names, words) if names else None,
        range_times=tables.range_times(d, names, words) if names else None,
        alignments=aligned,
        alignments_total=n_aligned,
        changed_ranges=names,
        correctness=correctness,
        environment=provenance.environment(inputs),
        provenance=provenance.provenance(inputs, sweep),
        sweep=tables.sweep_table(sweep) if sweep is not None else None,
        sweep_note=tables.sweep_note(sweep) if sweep is not None else [],
        gaps=checks.gaps(inputs, phases, d, sweep, corr_gaps, allow_mixed, words),
        regenerate=_regenerate(inputs, sweep, title, allow_mixed, sources),
        generator=f"workbench {VERSION}",
        roles=[(i.role, i.name) for i in inputs],
        words=words,
    )
