"""What every figure shares: layout, escaping, folding many names into "other", and the
normalization of the traces a figure is given.

Figures are deterministic: inputs are sorted, no random ids, so a regenerated report is
byte-identical (pass a fixed ``div_id`` to ``fig.to_html`` for that). Trace-supplied names are
HTML-escaped before they reach plotly's text rendering (which understands a subset of HTML).
Times are shown in microseconds; counts and times from a diff are per step.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import pandas as pd

from ..trace.schema import Trace

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13)
HEIGHT = 420
OTHER_KERNELS = "(other kernels)"
OTHER_RANGES = "(other ranges)"
OTHER_COLOR = "#b0b0b0"
# A vertical legend right of the plot, for figures with one entry per kernel.
SIDE_LEGEND = dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top")


def esc(s, limit: int | None = None) -> str:
    """Escape a trace-supplied string for plotly text; shorten it to ``limit`` characters."""
    s = str(s)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return html.escape(s, quote=False)


def top_names(weights: pd.Series, n: int) -> set:
    """The ``n`` index labels with the largest weights (ties by label): what a figure shows
    one by one; the rest are folded into one "other" entry so figures of traces with
    thousands of names stay small and fast."""
    if len(weights) <= n:
        return set(weights.index)
    w = pd.DataFrame({"k": [str(i) for i in weights.index], "w": weights.to_numpy(dtype=float)}, index=weights.index)
    w = w.sort_values(["w", "k"], ascending=[False, True], kind="stable")
    return set(w.index[:n])


def us(ns) -> float:
    """Nanoseconds as a microsecond value for an axis."""
    return float(ns) / 1000.0


def layout(fig, title: str, **kw) -> None:
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left"), font=FONT, template="plotly_white",
        height=kw.pop("height", HEIGHT), margin=dict(l=70, r=20, t=60, b=60),
        legend=kw.pop("legend", dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0, title_text="")),
        hoverlabel=dict(namelength=-1), **kw,
    )


def labelled(given) -> list[tuple[str, Trace]]:
    """``Trace`` | ``{label: Trace}`` | ``[Trace, ...]`` -> [(label, Trace)] (names and paths
    are opened with :func:`workbench.open_trace`)."""
    from ..trace import open_trace

    if isinstance(given, (Trace, str)):
        given = [given]
    items = list(given.items()) if isinstance(given, Mapping) else [(None, t) for t in given]
    out = []
    for label, t in items:
        t = t if isinstance(t, Trace) else open_trace(t)
        out.append((str(label) if label is not None else t.label, t))
    return out
