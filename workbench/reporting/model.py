"""The report as data: tables of cells, lists of lines, kernel alignments.

Renderers (``markdown.py``, ``html.py``) only escape and lay out what is here, so the two
outputs always say the same thing. A cell is plain text (``str``) or an identifier that came
from a trace or a command line (:class:`Code`, shown in a code span); both are escaped by the
renderer, never here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..trace.words import GPU, Words


@dataclass(frozen=True)
class Code:
    """Verbatim text from a trace or a command (kernel and range names, commands, hashes)."""

    text: str


@dataclass(frozen=True)
class Mixed:
    """A cell made of text and code parts, e.g. ``fix`` + Code(name)."""

    parts: tuple


Cell = Union[str, Code, Mixed]


def listing(items, sep: str = ", ") -> Mixed:
    """One cell listing ``items`` (cells, or tuples of cells read as one item) between ``sep``s."""
    parts: list = []
    for j, item in enumerate(items):
        parts += ([sep] if j else []) + list(item if isinstance(item, tuple) else (item,))
    return Mixed(tuple(parts))


@dataclass
class Table:
    headers: list[Cell]
    rows: list[list[Cell]]
    note: str = ""
    # columns whose cells are numbers (right-aligned)
    numeric: tuple[int, ...] = ()


@dataclass
class AlignGroup:
    """Ranges of one name whose kernel sequences changed the same way."""

    range: str  # innermost range name
    where: str  # "layers 0–7 (8 ranges)" or the range key
    count: int
    ops: list[tuple[str, str, int]]  # (equal|removed|added, kernel name, consecutive repeats)
    removed: int
    added: int
    truncated: int = 0  # lines of ops left out


@dataclass
class Headline:
    label: str
    base: str
    fix: str
    change: str
    caveat: bool = False  # it tells how to read the others (host/launch-bound): the HTML marks it


@dataclass
class Report:
    title: str
    subtitle: list[Cell]  # e.g. "base", Code(name), "→", "fix", Code(name)
    headline: list[Headline]
    commands: list[tuple[str, str, str]]  # (role, trace name, command or "")
    results: Table
    variant_changes: list[tuple[str, str, str]]  # (key, base value, fix value)
    layer_counts: Table | None
    range_times: Table | None
    alignments: list[AlignGroup]
    alignments_total: int
    changed_ranges: list[str]
    correctness: list[list[Cell]]  # lines
    environment: Table
    provenance: Table
    sweep: Table | None
    sweep_note: list[list[Cell]]  # lines
    gaps: list[list[Cell]]
    regenerate: str
    generator: str
    roles: list[tuple[str, str]] = field(default_factory=list)  # (role, name)
    words: Words = GPU  # what the traces' work units are called (kernels, or CPU ops)
    ranks: Table | None = None  # a report of two trace sets: every rank, base -> fix
