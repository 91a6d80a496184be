"""What a :class:`~.schema.Trace` shows of itself, in a notebook and on a terminal: a headline
of what it holds (its work units and their time, its ranges), then where it came from (the
source and its tool, the machine, how the workbench captured it, the timing it recorded) and the
notes every view of it carries (CUDA graphs, compiled code, the Triton interpreter, the
importer's own). Read from the manifest and the tables' row counts only: showing a stored trace
reads no table."""

from __future__ import annotations

from collections.abc import Mapping

from .. import textfmt as fmt
from .compiled import compiled_note
from .manifest import (ATTRIBUTION, CAPTURE, DISTRIBUTED, ENV, SOURCE, graph_note, inferred_note, interpreter_note,
                       recorded_timing, section, source_note)
from .words import trace_words

_LINE = 300  # characters of a line of settings (a variant, a command) before it is cut


def _joined(pairs) -> str:
    return ", ".join(f"{k} {v}" for k, v in pairs if v not in (None, ""))


def _source(meta) -> str:
    s = section(meta, SOURCE)
    tool = " ".join(str(s[k]) for k in ("tool", "tool_version") if s.get(k))
    where = ": ".join(str(s[k]) for k in ("format", "file") if s.get(k))
    return f"source: {tool or 'unknown tool'}" + (f" ({where})" if where else "")


def _machine(meta) -> str | None:
    e = section(meta, ENV)
    found = _joined((label, e.get(k)) for k, label in (("cuda", "CUDA"), ("driver", "driver"), ("torch", "torch")))
    return f"machine: {e.get('gpu') or e.get('device') or 'unknown device'}" + (f"; {found}" if found else "") \
        if e else None


def _capture(meta) -> str | None:
    c = section(meta, CAPTURE)
    if not c:
        return None
    how = _joined((k, c.get(k)) for k in ("workload", "engine", "backend", "device"))
    variant = c.get("variant")
    if isinstance(variant, Mapping) and variant:
        how += "; variant " + ", ".join(f"{k}={v}" for k, v in variant.items())
    elif c.get("command_line"):
        how += f"; {c['command_line']}"
    return fmt.one_line(f"captured: {how}", _LINE)


def _ms(x: float) -> str:
    """A wall time in ms, in s from 10 s up."""
    return f"{fmt.ms(x)} ms" if abs(x) < 1e4 else f"{fmt.ms(x / 1e3)} s"


def _timing(meta) -> str | None:
    """The recorded phases' medians: ``decode step 3.691 ms (n = 90)``."""
    key, timing = recorded_timing(meta)
    found = [f"{k.removesuffix('_ms').replace('_', ' ')} {_ms(v['median'])} (n = {v.get('n', '?')})"
             for k, v in timing.items() if k.endswith("_ms") and isinstance(v, Mapping)
             and isinstance(v.get("median"), (int, float))]
    return f"{'bench timing' if key != 'timing' else 'timing'} (medians): " + ", ".join(found) if found else None


def trace_page(t) -> tuple[str, list[str], list]:
    """The trace's display as :func:`~.display.page_html` takes it."""
    meta, w = t.meta, trace_words(t.meta)
    attribution = {k: v for k, v in section(meta, ATTRIBUTION).items() if isinstance(v, Mapping)}
    time = sum(int(v.get("gpu_time_ns", 0) or 0) for v in attribution.values())
    head = (f"{t.label}: {fmt.num(t.rows('kernels'))} {w.units}" + (f", {fmt.duration(time)} {w.time}" if time else "")
            + f", {fmt.num(t.rows('ranges'))} ranges")
    apart = [(int(attribution.get(k, {}).get("kernels", 0) or 0), what)
             for k, what in (("no_range", "launched outside every range"), ("no_launch", "with no launch record"))]
    rank = section(meta, DISTRIBUTED)
    lines = [_source(meta), _machine(meta), _capture(meta), _timing(meta),
             f"rank {rank.get('rank')} of {rank.get('world_size', '?')}" if "rank" in rank else None,
             "; ".join(f"{fmt.num(n)} {w.units} {what}" for n, what in apart if n) or None,
             graph_note(meta), compiled_note(meta), inferred_note(meta), interpreter_note(meta), source_note(meta),
             "tables: " + ", ".join(f"{name} {fmt.num(t.rows(name))}" for name in ("kernels", "ranges", "api", "memcpy",
                                                                              "memset")),
             f"stored: {t.path}" if t.path else None]
    return head, [fmt.one_line(x, 600) for x in lines if x], []
