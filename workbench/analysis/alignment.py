"""Aligned kernel-name sequences of one range in two traces: which kernels went away and
which came, in launch order."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

from ..trace.display import Part, page_html, page_text


@dataclass
class Alignment:
    """Aligned kernel-name sequences of one range: ``ops`` is a list of
    (``equal``|``removed``|``added``, [kernel names]) in order. Shown as its :meth:`describe`
    line, then its :meth:`runs`, removed and added ones marked."""

    ops: list[tuple[str, list[str]]]

    @property
    def removed(self) -> list[str]:
        return [k for op, ks in self.ops if op == "removed" for k in ks]

    @property
    def added(self) -> list[str]:
        return [k for op, ks in self.ops if op == "added" for k in ks]

    def runs(self) -> list[tuple[str, str, int]]:
        """Each op's names as runs of one name: (op, name, times in a row), in order."""
        out: list[tuple[str, str, int]] = []
        for op, names in self.ops:
            start = 0
            for i in range(1, len(names) + 1):
                if i == len(names) or names[i] != names[start]:
                    out.append((op, names[start], i - start))
                    start = i
        return out

    def part(self, title: str = "") -> Part:
        """The runs as a display's table (:mod:`workbench.trace.display`), removed and added
        ones marked."""
        import pandas as pd

        runs = self.runs()
        shown = [op if op != "equal" else "" for op, _, _ in runs]
        table = pd.DataFrame({"change": shown, "kernel": [n for _, n, _ in runs], "times": [c for _, _, c in runs]})
        return Part(table, title, row_classes=tuple(shown))

    def _page(self) -> tuple:
        return self.describe(), (), [self.part()]

    def _repr_html_(self) -> str:
        return page_html(*self._page())

    def __repr__(self) -> str:
        return page_text(*self._page())

    def describe(self, limit: int = 6) -> str:
        """``15 removed: vectorized_elementwise_kernel x6, ...; 1 added: kv_write_fused``."""
        parts = []
        for label, names in (("removed", self.removed), ("added", self.added)):
            if names:
                counts = Counter(names).most_common()
                shown = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in counts[:limit])
                more = f", +{len(counts) - limit} more kinds" if len(counts) > limit else ""
                parts.append(f"{len(names)} {label}: {shown}{more}")
        return "; ".join(parts) if parts else "unchanged"


# Above this many cell comparisons, alignment (quadratic in the worst case) gives way to a
# multiset comparison: still which kernels went away and which came, without their order.
_ALIGN_LIMIT = 4_000_000


def align(seq_a: list[str], seq_b: list[str]) -> Alignment:
    """Align two kernel-name sequences (longest matching blocks, as difflib does)."""
    ops: list[tuple[str, list[str]]] = []
    if len(seq_a) * len(seq_b) > _ALIGN_LIMIT:
        ca, cb = Counter(seq_a), Counter(seq_b)
        common = sorted((ca & cb).elements())
        for op, names in (("equal", common), ("removed", sorted((ca - cb).elements())),
                          ("added", sorted((cb - ca).elements()))):
            if names:
                ops.append((op, names))
        return Alignment(ops)
    sm = SequenceMatcher(a=seq_a, b=seq_b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            ops.append(("equal", seq_a[i1:i2]))
        else:
            if i2 > i1:
                ops.append(("removed", seq_a[i1:i2]))
            if j2 > j1:
                ops.append(("added", seq_b[j1:j2]))
    return Alignment(ops)
