"""Reproducible performance-investigation reports: self-contained HTML and PR-ready Markdown.

::

    import workbench as wb
    r = wb.report("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys",
                  html="report.html", md="report.md")
    r            # shows the Markdown in a notebook
    r.markdown   # the text to paste into a PR

One job per module: ``inputs`` loads and checks traces and sweeps (``sweep`` normalizes a
results file), ``build`` assembles the report model from ``timing`` (timed phases, compared
with a confidence interval), ``results`` (launches, busy time per step, headline), ``tables``
(what changed), ``checks`` (correctness, gaps) and ``provenance`` (environment, trace
identities), all worded by ``trace.words`` (kernels, or CPU ops); ``figures`` asks
:mod:`workbench.viz` for plots, ``markdown`` and ``html`` render, ``output`` writes
atomically, ``cli`` is ``workbench report``. The same stored traces always give byte-identical
files: nothing reads the clock or the checkout, figure ids are content hashes, the bootstrap
is seeded, and every trace is named with its content hash.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["report", "Result"]


@dataclass
class Result:
    """A generated report: ``markdown`` (str), ``html`` (str, rendered on first use), the
    ``model`` both are rendered from, and the ``written`` file paths."""

    markdown: str
    model: Any
    written: list[str] = field(default_factory=list)
    _inputs: Any = field(default=None, repr=False)
    _diff: Any = field(default=None, repr=False)
    _sweep: Any = field(default=None, repr=False)
    _html: str | None = field(default=None, repr=False)

    @property
    def html(self) -> str:
        if self._html is None:
            from . import figures, html

            html.require_plotly()
            primary = [k.rsplit(".", 1)[-1] for k, _, _ in self.model.variant_changes]  # what base/fix vary
            figs = figures.build(self._inputs, self._diff, self.model.changed_ranges, self.model.words, self._sweep,
                                 primary)
            self._html = html.render(self.model, figs)
        return self._html

    def _repr_markdown_(self) -> str:
        return self.markdown


def report(base, fix, *more, html: str | os.PathLike | None = None, md: str | os.PathLike | None = None,
           sweep: str | os.PathLike | None = None, title: str | None = None, allow_mixed: bool = False,
           root: str | os.PathLike | None = None, layer_regex: str | None = None) -> Result:
    """Compare ``base`` and ``fix`` (stored trace names or directories, capture files, or
    stored :class:`~workbench.Trace` objects), plus any ``more`` traces, and optionally a
    ``sweep`` results JSON (also accepted among ``more``); write ``html`` and/or ``md`` if given.

    Raises :class:`~workbench.WorkbenchError` for a missing trace, traces of different workloads
    (unless ``allow_mixed``), an output path that is a directory or in a missing folder, or
    ``html`` where plotly (the ``viz`` extra) is not installed; nothing is written unless every
    output rendered.
    """
    from ..analysis.diff import diff
    from ..errors import WorkbenchError
    from . import build, markdown, output
    from . import ranks as ranks_mod
    from .inputs import is_sweep_file, load_sweep, load_traces

    sets = None
    if any(found := ranks_mod.find_sets((base, fix, *more), root)):
        if not all(found):
            raise WorkbenchError(next(n for n, f in zip((base, fix, *more), found) if f is not None),
                                 "is a trace set: a report compares two sets, or traces")
        sets, rank = ranks_mod.open_pair(base, fix, more, root)
        title = title or f"{sets[0].name} → {sets[1].name} (trace sets)"
        base, fix = (s.trace(rank).path for s in sets)
    targets = output.check_targets(html=html, md=md)
    if "html" in targets:  # before any trace is read
        from .html import require_plotly

        require_plotly()
    traces = []
    for m in more:  # a sweep results file may come among the traces, as on the command line
        if is_sweep_file(m):
            if sweep is not None:
                raise WorkbenchError(m, "a second sweep results file; give one (sweep= / --sweep, or positional)")
            sweep = m
        else:
            traces.append(m)
    more = tuple(traces)
    inputs = load_traces(base, fix, more, root=root, allow_mixed=allow_mixed)
    sw = load_sweep(sweep) if sweep is not None else None
    d = diff(inputs[0].trace, inputs[1].trace, layer_regex=layer_regex)
    model = build.build(inputs, d, sw, title=title, allow_mixed=allow_mixed,
                        sources=[s.name for s in sets] if sets is not None else None)
    if sets is not None:
        model.ranks = ranks_mod.ranks_table(*sets, model.words)
        model.subtitle += ranks_mod.ranks_subtitle(sets, rank)
    result = Result(markdown.render(model), model, _inputs=inputs, _diff=d, _sweep=sw)
    files = {}
    if "md" in targets:
        files[targets["md"]] = result.markdown
    if "html" in targets:
        files[targets["html"]] = result.html
    result.written = output.write_all(files)
    return result

