"""Text for people, once for the whole package: numbers formatted the same everywhere, and
trace-supplied text made safe to print. Number formatting: the command line, figures, widgets and
reports all print a value the same way (reports are compared byte for byte).

Microseconds are written ``µs`` wherever text is rendered (HTML, notebooks, Markdown, which is
rendered from the same report model as the HTML) and ``us`` on the terminal, whose output
stays ASCII (arrows there are ``->`` too). This module imports nothing of ``workbench``, so
any layer may use it.
"""

from __future__ import annotations

import math
import re

MICRO = "\u00b5s"
MICRO_ASCII = "us"


def num(x: float) -> str:
    """Counts that may be per-step averages: ``15``, ``15.33``, ``1,536``; enough decimals
    that a non-integer never prints as an integer (``3.997``, not ``4.00``)."""
    x = float(x)
    if not math.isfinite(x):
        return "n/a"
    if x.is_integer():
        return f"{x:,.0f}"
    for d in range(2, 7):
        if round(x, d) != round(x):
            return f"{x:,.{d}f}"
    return f"{x:,.0f}"  # an integer but for float noise (124.67 - 236.67 = -112.00000000000001)


def compact(x: float) -> str:
    """A bar label: integers whole, else one decimal from 10 up and two below."""
    x = float(x)
    if not math.isfinite(x) or x.is_integer():
        return num(x)
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:,.2f}"


def ms(x: float) -> str:
    """Milliseconds with about four significant digits."""
    x = float(x)
    if not math.isfinite(x):
        return "n/a"
    a = abs(x)
    if a >= 100:
        return f"{x:.1f}"
    if a >= 10:
        return f"{x:.2f}"
    if a >= 1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def us_from_ns(ns: float) -> str:
    """Nanoseconds shown as microseconds, one decimal, without the unit."""
    x = float(ns) / 1000.0
    return "n/a" if not math.isfinite(x) else f"{x:,.1f}"


def time_unit(max_ns: float) -> tuple[float, str]:
    """``(divisor, unit)`` for times whose largest is ``max_ns``: µs up to 10 ms, then ms up to
    10 s, then s, so a figure's axis or a table's column keeps at most four digits before the point."""
    m = abs(float(max_ns or 0))
    if m >= 1e10:
        return 1e9, "s"
    return (1e6, "ms") if m >= 1e7 else (1e3, MICRO)


def in_unit(ns: float, div: float) -> str:
    """Nanoseconds as a number of the unit of divisor ``div`` (:func:`time_unit`): µs with one
    decimal, ms and s with about four significant digits (:func:`ms`)."""
    return us_from_ns(ns) if div == 1e3 else ms(float(ns) / div)


def duration(ns: float, micro: str = MICRO) -> str:
    """Nanoseconds with the unit :func:`time_unit` picks: ``486.1 µs``, ``12.34 ms``, ``1.702 s``."""
    if not math.isfinite(float(ns)):
        return "n/a"
    div, unit = time_unit(ns)
    return f"{in_unit(ns, div)} {micro if div == 1e3 else unit}"


def time_change(a: float, b: float, arrow: str = "\u2192", micro: str = MICRO) -> str:
    """Two times in the unit of the larger: ``485.2 → 316.3 µs``, ``12.34 → 9.87 ms``."""
    div, unit = time_unit(max(abs(x) for x in (float(a), float(b), 0.0) if math.isfinite(x)))
    return f"{in_unit(a, div)} {arrow} {in_unit(b, div)} {micro if div == 1e3 else unit}"


def us(ns: float, unit: str = MICRO) -> str:
    """Nanoseconds as microseconds with the unit: ``486.1 µs`` (``unit=MICRO_ASCII`` on a terminal)."""
    return f"{us_from_ns(ns)} {unit}"


def size(nbytes: float) -> str:
    """Bytes on disk: ``512 B``, ``76.9 KiB``, ``1.2 MiB``, ``3.4 GiB``."""
    x = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024:
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:,.1f} TiB"


def pct(new: float, old: float) -> str:
    """``-85.0%``; ``n/a`` when the base is zero."""
    if not old or not math.isfinite(old) or not math.isfinite(new):
        return "n/a"
    p = 100.0 * (new - old) / old
    if abs(p) < 0.05:
        return "0.0%"
    return f"{p:+.1f}%"


def ratio(new: float, old: float) -> str:
    """``6.68x faster`` / ``1.20x slower`` for times."""
    if not old or not new or not math.isfinite(old) or not math.isfinite(new):
        return ""
    r = old / new
    if abs(r - 1) < 0.005:
        return "same"
    return f"{r:.2f}x faster" if r > 1 else f"{1 / r:.2f}x slower"


def signed(x: float) -> str:
    x = float(x)
    if x == 0:
        return "0"
    return ("+" if x > 0 else "-") + num(abs(x))


def layer_span(layers) -> str:
    """``[0,1,2,3,5]`` -> ``0–3, 5``."""
    layers = sorted(set(int(x) for x in layers))
    parts = []
    i = 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] == layers[j] + 1:
            j += 1
        parts.append(str(layers[i]) if i == j else f"{layers[i]}\u2013{layers[j]}")
        i = j + 1
    return ", ".join(parts)


_DIGITS = re.compile(r"(\d+)")


def natural_key(text) -> tuple:
    """Sort key reading the numbers in a name as numbers: ``layer 2`` before ``layer 10``,
    ``model.layers.9`` before ``model.layers.10``, ``rank-2`` before ``rank-10``, ``Conv_3``
    before ``Conv_10``. Names whose numbers read alike (``x01``, ``x1``) keep a fixed order."""
    s = str(text)
    parts = _DIGITS.split(s)  # text, number, text, ...: the same type at the same place
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), s


# Trace-supplied text made safe to print on a terminal (no escape sequences get through).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def layers_where(layers, every: bool) -> str:
    """`` in all 16 layers`` (``every``: the layers are all the trace has), `` in layers 0–3, 5``,
    `` in layer 2``, or nothing for no layer."""
    layers = sorted(set(int(x) for x in layers))
    if not layers:
        return ""
    if every:
        return f" in all {len(layers)} layers"
    return f" in layer{'s' if len(layers) > 1 else ''} {layer_span(layers)}"


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
