"""How the workbench's objects and tables show themselves: in a notebook as compact HTML, on a
terminal as short text, by one set of rules:

- times (columns named ``..._ns``: ``gpu_time_ns``, ``gpu_time_ns_a``, ``delta_gpu_time_ns``,
  ``wall_ns``) in µs, ms or s by the typical magnitude of the column's family (``gpu_time_ns_a``,
  ``_b`` and ``delta_gpu_time_ns`` share one unit, so they read against each other), the unit in
  the header; columns named ``..._ms`` in ms; a single time (a headline's) in the unit
  ``textfmt.time_unit`` picks, as figures' axes;
- counts whole where they are whole (``15``, not ``15.0``), thousands separated, never in
  scientific notation; changes (``delta_...``) signed, ``..._pct`` as ``+12.3%``, fractions and
  shares (``..._fraction``, ``..._share``) as percentages, ``ratio`` as ``0.28x``; identifiers
  (``rank``, ``pid``, ``..._id``) as they are; layer -1 (outside every layer) as a dash;
- no row index unless it is named (``set_index("range")``): a filtered table's leftover row
  numbers (3, 7, 11, ...) are not shown;
- the headline first, then its lines, then the tables; changed rows highlighted (``*`` on a
  terminal); long tables cut, with the number of rows left out;
- trace-supplied text (kernel names hold ``<``, ``>``, ``&``) escaped and kept on one line, cut
  around an ellipsis where long, the whole name in the cell's tooltip.

:class:`Table` is a DataFrame whose display follows these rules; :func:`page_html` and
:func:`page_text` lay out an object's display (a headline, lines, :class:`Part` tables). Terminal
text stays ASCII (``us``, ``->``) as the command line's does. Nothing here imports plotly or
IPython: a display costs only the formatting of the rows it shows.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from .. import textfmt as fmt

HTML_ROWS = 30  # rows a notebook display shows; the rest are counted
TEXT_ROWS = 20  # rows a terminal display shows
HTML_CHARS, TEXT_CHARS = 160, 48  # characters of a name in a cell (head and tail around an ellipsis)

_STYLE = """<style>
.wb-display{font-size:13px;line-height:1.4;overflow-x:auto}
.wb-display .wb-headline{font-weight:600;font-size:14px;margin:2px 0 4px}
.wb-display .wb-line{margin:1px 0}
.wb-display .wb-title{font-weight:600;margin:8px 0 2px}
.wb-display .wb-more{opacity:.7;font-size:12px;margin:0 0 4px}
.wb-display table.wb-table{border-collapse:collapse;margin:2px 0 6px;font-size:12.5px;table-layout:auto}
.wb-display table.wb-table th{font-weight:600;text-align:left;padding:2px 8px;white-space:nowrap;
border:none;border-bottom:1px solid rgba(127,127,127,.5)}
.wb-display table.wb-table td{text-align:left;padding:1px 8px;white-space:nowrap;border:none;
border-bottom:1px solid rgba(127,127,127,.15)}
.wb-display table.wb-table td.t{white-space:normal;max-width:40em;overflow-wrap:break-word}
.wb-display table.wb-table .n{text-align:right;font-variant-numeric:tabular-nums}
.wb-display table.wb-table tr.wb-changed td{background:rgba(255,186,0,.2)}
.wb-display table.wb-table tr.wb-removed td{background:rgba(220,50,50,.13)}
.wb-display table.wb-table tr.wb-added td{background:rgba(40,160,70,.15)}
</style>"""

_TIME = re.compile(r"(?:^|_)ns(?=_|$)")
_MS = re.compile(r"(?:^|_)ms(?=_|$)")
_IDS = {"id", "pid", "tid", "rank", "local_rank", "device", "stream", "correlation", "parent", "depth"}
_WORDS = {"gpu": "GPU", "cpu": "CPU", "api": "API", "proj": "projection", "pct": "%", "ns": "", "ms": ""}


@dataclass(frozen=True)
class Part:
    """One table of a display: the frame, its ``title`` (none for a table shown alone), which of
    its rows changed (one bool per row, in order; None: a :class:`Table`'s own, else its
    ``changed`` column's, where it has one), ``row_classes`` (a CSS class per row instead:
    ``removed``, ``added``, ...) and whether a notebook shows it folded (``collapsed``; a
    terminal then names it only)."""

    table: pd.DataFrame
    title: str = ""
    changed: tuple[bool, ...] | None = None
    collapsed: bool = False
    row_classes: tuple[str, ...] | None = None

    def marks(self) -> list[str]:
        """Per row: its CSS class without the ``wb-`` prefix, ``""`` for none."""
        n = len(self.table)
        if self.row_classes is not None and len(self.row_classes) == n:
            return list(self.row_classes)
        flags = self.changed if self.changed is not None else getattr(self.table, "_shown", (None,) * 3)[2]
        if flags is None or len(flags) != n:  # a table edited since: its own column, if any
            col = self.table.get("changed") if isinstance(self.table, pd.DataFrame) else None
            flags = [not _is_missing(v) and bool(v) for v in col] if col is not None else [False] * n
        return ["changed" if f else "" for f in flags]


class Table(pd.DataFrame):
    """A DataFrame whose notebook display and text are formatted by this module's rules, with a
    ``headline`` first and its ``notes`` after it, ``changed`` rows highlighted (one bool per row;
    default: where a ``changed`` column is true). It computes as any DataFrame (``.values``,
    arithmetic, indexing, ``.equals`` are pandas'); what pandas derives from it (a slice, a copy,
    a merge) is a plain DataFrame, shown as pandas shows one: ``Table(frame)`` shows that
    formatted."""

    _metadata = ["_shown"]
    _shown: tuple = ("", (), None)

    def __init__(self, data=None, *args, headline: str = "", notes=(), changed=None, **kwargs):
        super().__init__(data, *args, **kwargs)
        flags = None if changed is None else tuple(bool(x) for x in changed)
        object.__setattr__(self, "_shown", (headline, tuple(notes), flags))

    @property
    def _constructor(self):
        return pd.DataFrame

    def _page(self) -> tuple[str, tuple, list[Part]]:
        headline, notes, _ = self._shown
        return headline, notes, [Part(self)]

    def _repr_html_(self) -> str:
        return page_html(*self._page())

    def __repr__(self) -> str:
        return page_text(*self._page())

    __str__ = __repr__


# ---------------------------------------------------------------------------- cells

def _family(name: str) -> str:
    """The columns that share a time unit: ``gpu_time_ns_a``, ``_b`` and ``delta_gpu_time_ns``."""
    return re.sub(r"_[ab]$", "", name.removeprefix("delta_"))


def _signed(s: str, x: float) -> str:
    """A change as shown: ``+0.1``, ``-20.8``, and ``0.0`` for one that rounds to nothing."""
    if not s.strip("-0.,"):
        return s.lstrip("-")
    return ("+" + s) if x > 0 else s


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT


@dataclass(frozen=True)
class _Column:
    html_header: str
    text_header: str
    numeric: bool
    cell: Callable[[object], str]  # value -> text (as HTML shows it: page_text makes it ASCII)


def _time_column(name: str, div: float, unit: str) -> _Column:
    def cell(v) -> str:
        x = float(v)
        s = fmt.in_unit(x, div)
        return _signed(s, x) if name.startswith("delta_") else s

    text = _TIME.sub(lambda m: m.group(0).replace("ns", ascii_text(unit)), name)
    return _Column(f"{_words(name)} ({unit})", text, True, cell)


def _words(name: str) -> str:
    """A column's header in words: ``delta_gpu_time_ns`` -> ``Δ GPU time``, ``kernels_a`` -> ``kernels A``."""
    parts = name.split("_")
    out = []
    for i, w in enumerate(parts):
        if i == 0 and w == "delta" and len(parts) > 1:
            out.append("\u0394")
        elif i == len(parts) - 1 and w in ("a", "b") and i:
            out.append(w.upper())
        else:
            out.append(_WORDS.get(w, w))
    return " ".join(w for w in out if w)


def _numbers(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _column(name: str, s: pd.Series, families: dict[str, tuple[float, str]]) -> _Column:
    """How column ``name`` (values ``s``) is shown; ``families``: each time family's unit."""
    head = _words(name)
    if pd.api.types.is_bool_dtype(s):
        return _Column(head, name, False, lambda v: "\u2713" if v else "")
    if not _numbers(s):
        return _Column(head, name, False, _other)
    if _TIME.search(name):
        return _time_column(name, *families[_family(name)])
    if _MS.search(name):
        return _Column(f"{head} (ms)", name, True, fmt.ms)
    if name.endswith("_pct"):
        return _Column(head, name, True, lambda v: f"{float(v):+.1f}%")
    if name.endswith("_fraction") or "share" in name.split("_"):
        return _Column(head, name, True, lambda v: f"{float(v):.1%}")
    if name == "ratio" or name.endswith("_ratio"):
        return _Column(head, name, True, lambda v: f"{float(v):.2f}x")
    if name == "layer":
        return _Column(head, name, True, lambda v: "\u2013" if v < 0 else str(int(v)))
    if name in _IDS or name.endswith("_id"):
        return _Column(head, name, True, lambda v: str(int(v)) if float(v).is_integer() else fmt.num(v))
    return _Column(head, name, True, fmt.signed if name.startswith("delta_") else fmt.num)


def _other(v) -> str:
    """A cell of text, or of a list: layers as spans (``0–3, 5``), else the items."""
    if isinstance(v, (list, tuple, np.ndarray)):
        items = list(v)
        if items and all(isinstance(x, (int, np.integer)) for x in items):
            return fmt.layer_span(items)
        return ", ".join(str(x) for x in items)
    return str(v)


def _families(df: pd.DataFrame) -> dict[str, tuple[float, str]]:
    """Each time family's (divisor, unit), by the typical value of the whole table's columns of
    it (their median magnitude): µs below 1 ms, ms below 10 s, else s. A column of 2 µs layers
    beside one 39 ms row reads in µs (``39,190.0``), not as ``0.0021`` ms."""
    found: dict[str, list[np.ndarray]] = {}
    for c in df.columns:
        name, s = str(c), df[c]
        if _TIME.search(name) and _numbers(s):
            found.setdefault(_family(name), []).append(np.abs(s.to_numpy(dtype=float, na_value=np.nan)))
    out = {}
    for family, columns in found.items():
        values = np.concatenate(columns)
        values = values[np.isfinite(values) & (values > 0)]
        typical = float(np.median(values)) if len(values) else 0.0
        out[family] = (1e9, "s") if typical >= 1e10 else (1e6, "ms") if typical >= 1e6 else (1e3, fmt.MICRO)
    return out


def _visible(df: pd.DataFrame) -> pd.DataFrame:
    """The frame as displayed: a named index becomes columns; an unnamed one is not shown."""
    if any(n is not None for n in df.index.names):
        return pd.DataFrame(df).reset_index()
    return df


def _cells(df: pd.DataFrame, rows: int, limit: int) -> tuple[list[_Column], list[list[tuple[str, str]]]]:
    """The columns and the first ``rows`` rows' cells, each as (text shown, whole text): a
    name is cut to one line of about ``limit`` characters."""
    df = _visible(df)
    families = _families(df)
    cols = [_column(str(c), df[c], families) for c in df.columns]
    body = []
    for row in df.iloc[:rows].itertuples(index=False, name=None):
        cells = []
        for c, v in zip(cols, row):
            text = "\u2013" if _is_missing(v) else c.cell(v)
            cells.append((text, text) if c.numeric else (fmt.one_line(text, limit), fmt.one_line(text)))
        body.append(cells)
    return cols, body


# ---------------------------------------------------------------------------- layout

def esc(s) -> str:
    """Trace-supplied text as HTML: escaped, its control characters made visible."""
    return html.escape(fmt.clean(str(s)), quote=True)


def _more(n: int, shown: int) -> str:
    return f"\u2026 {n - shown:,} more row{'s' if n - shown != 1 else ''} ({n:,} in all)"


def table_html(part: Part) -> str:
    """The part's table as HTML: a header (the column's name in its tooltip), then its first
    :data:`HTML_ROWS` rows, marked as :meth:`Part.marks` says."""
    df = part.table
    n = len(df)
    cols, body = _cells(df, HTML_ROWS, HTML_CHARS)
    marks = part.marks()
    names = [str(c) for c in _visible(df).columns]
    head = "".join(f'<th{" class=n" if c.numeric else ""} title="{esc(name)}">{esc(c.html_header)}</th>'
                   for c, name in zip(cols, names))
    rows = []
    for mark, row in zip(marks, body):
        tds = "".join(f'<td class={"n" if c.numeric else "t"}' + (f' title="{esc(whole)}"' if whole != text else "")
                      + f">{esc(text)}</td>" for c, (text, whole) in zip(cols, row))
        rows.append(f'<tr{f" class=wb-{mark}" if mark else ""}>{tds}</tr>')
    more = ('<div class="wb-more">(no rows)</div>' if not n else
            f'<div class="wb-more">{esc(_more(n, HTML_ROWS))}</div>' if n > HTML_ROWS else "")
    return f'<table class="wb-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>{more}'


def table_text(part: Part, rows: int = TEXT_ROWS) -> list[str]:
    """The table as aligned terminal lines: a header, then a row a line (``*``: changed)."""
    df = part.table
    if not len(df):
        return ["  (no rows)"]
    cols, body = _cells(df, rows, TEXT_CHARS)
    marks = part.marks()
    grid = [[c.text_header for c in cols], *[[ascii_text(text) for text, _ in row] for row in body]]
    widths = [max(len(r[i]) for r in grid) for i in range(len(cols))]

    def line(cells: list[str], mark: str) -> str:
        out = [t.rjust(w) if c.numeric else t.ljust(w) for c, t, w in zip(cols, cells, widths)]
        return (mark + " " + "  ".join(out)).rstrip()

    lines = [line(grid[0], " ")]
    lines += [line(row, "*" if mark else " ") for mark, row in zip(marks, grid[1:])]
    if len(df) > rows:
        lines.append("  " + ascii_text(_more(len(df), rows)))
    return lines


def _folded(p: Part) -> str:
    return f"{p.title} ({len(p.table):,} row{'s' if len(p.table) != 1 else ''})"


def page_html(headline: str, lines=(), parts=()) -> str:
    """A display in a notebook: the headline first, then its lines, then each part's table
    (under its title; folded where ``collapsed``)."""
    out = ['<div class="wb-display">', _STYLE]
    if headline:
        out.append(f'<div class="wb-headline">{esc(headline)}</div>')
    out += [f'<div class="wb-line">{esc(x)}</div>' for x in lines if x]
    for p in parts:
        body = table_html(p)
        if p.collapsed:
            out.append(f'<details><summary class="wb-title">{esc(_folded(p))}</summary>{body}</details>')
        else:
            out.append((f'<div class="wb-title">{esc(p.title)}</div>' if p.title else "") + body)
    out.append("</div>")
    return "".join(out)


def page_text(headline: str, lines=(), parts=(), rows: int = TEXT_ROWS) -> str:
    """The same display as terminal text: a folded part is named, not shown."""
    out = [headline] if headline else []
    out += [x for x in lines if x]
    for p in parts:
        if p.collapsed:
            out.append(_folded(p))
            continue
        if p.title:
            out.append(f"{p.title}:")
        out += table_text(p, rows)
    return "\n".join(ascii_text(fmt.clean(x)) for x in out)


# What HTML shows that a terminal writes in ASCII, as the command line does.
_ASCII = {fmt.MICRO: fmt.MICRO_ASCII, "\u2192": "->", "\u2013": "-", "\u2212": "-", "\u2026": "...",
          "\u2713": "yes", "\u00d7": "x"}
_TO_ASCII = re.compile("|".join(map(re.escape, _ASCII)))


def ascii_text(s: str) -> str:
    """``s`` as the terminal writes it: ``us``, ``->``, ``-``, ``...``."""
    return _TO_ASCII.sub(lambda m: _ASCII[m.group()], s)
