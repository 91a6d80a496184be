"""Make trace-supplied text safe to print on a terminal (no escape sequences get through)."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(s: str) -> str:
    """Replace control characters (ESC, BEL, C1, bidi overrides) with visible escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", s)


def one_line(s: str, limit: int | None = None) -> str:
    """``clean`` that also keeps the text on one line (newline and tab shown as ``\\n``, ``\\t``),
    cut to about ``limit`` characters (head and tail around ``…``) when given."""
    if limit is not None and len(s) > limit:
        half = max(1, limit // 2)
        s = s[:half] + "…" + s[-half:]
    return clean(s).replace("\n", "\\n").replace("\t", "\\t")
