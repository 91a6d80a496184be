"""Figures of a trace set (:func:`workbench.open_set`): what each rank did per step.

A job's first step is its warm-up (allocations, compilation, the first collective's set-up):
it can last ten times the others and, drawn on the same axis, flatten them. It is left out
(``warmup``), and the title says what it was.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..textfmt import natural_key
from .colors import SIDE
from .common import OTHER_COLOR, esc, fmt_ns, layout, time_unit

WARMUP_RATIO = 2.0  # a leading step this many times the median step (median over ranks) is a warm-up
PARTS = (("own_ns", "own time (outside collectives)", SIDE["B"]),
         ("collective_ns", "in collectives (waiting included)", OTHER_COLOR))


def _steps(ts) -> pd.DataFrame:
    df = ts.steps() if hasattr(ts, "steps") else pd.DataFrame(ts)
    missing = {"rank", "step", "wall_ns", "own_ns", "collective_ns"} - set(df.columns)
    if missing:
        raise ValueError("rank_steps needs a TraceSet or its steps() table; missing column(s) "
                         + ", ".join(sorted(missing)))
    return df


def warmup_steps(steps: pd.DataFrame, warmup="auto") -> list[str]:
    """The leading steps to leave out: ``warmup`` of them (an int), or with ``"auto"`` each
    leading step whose wall time (median over ranks) is ``WARMUP_RATIO`` times the median step's."""
    order = sorted(steps["step"].astype(str).unique(), key=natural_key)
    if warmup != "auto":
        return order[:int(warmup)]
    wall = steps.groupby(steps["step"].astype(str))["wall_ns"].median()
    typical = float(np.median(wall.to_numpy()))
    out = []
    for s in order[:-1]:  # the last step is never a warm-up: something is left to draw
        if wall[s] < WARMUP_RATIO * typical:
            break
        out.append(s)
    return out


def rank_steps(ts, warmup="auto", max_steps: int = 6):
    """Per rank and step, its own time (outside collectives) and its time in collectives
    (stacked: the step's wall time on that rank), one panel per step on one time axis, the
    rank the others waited for (the step's straggler, :func:`workbench.analysis.ranks.stragglers`)
    outlined. ``ts``: a :class:`~workbench.TraceSet` or its ``steps()`` table. ``warmup``:
    leading steps left out (see :func:`warmup_steps`; ``0`` keeps every step); ``max_steps``:
    the panels drawn at most (the first ones)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..analysis.ranks import stragglers

    every = _steps(ts).assign(step=lambda x: x["step"].astype(str))
    left_out = warmup_steps(every, warmup)
    order = [s for s in sorted(every["step"].unique(), key=natural_key) if s not in left_out]
    shown = order[:max_steps]
    df = every[every["step"].isin(shown)]
    # A member: its rank, with the run and variant where the set holds several.
    roles = [c for c in ("run_id", "variant") if c in df and df[c].nunique() > 1]
    keys = roles + ["rank"]
    st = stragglers(df) if len(df) else pd.DataFrame(columns=[*roles, "step", "straggler"])
    slow = {(*(r[c] for c in roles), str(r["step"]), r["straggler"]) for r in st.to_dict(orient="records")}
    div, unit = time_unit(df["wall_ns"].max() if len(df) else 0)
    members = sorted({tuple(m) for m in df[keys].itertuples(index=False)}, key=lambda m: tuple(map(natural_key, m)))
    labels = [" ".join([*(esc(v, 20) for v in m[:-1]), f"rank {m[-1]}"]) for m in members]
    fig = make_subplots(rows=1, cols=max(len(shown), 1), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[esc(s, 30) for s in shown] or [""])
    for col, step in enumerate(shown, start=1):
        at = {tuple(r[k] for k in keys): r for r in df[df["step"] == step].to_dict(orient="records")}
        sub = pd.DataFrame([at.get(m, {}) for m in members], columns=[p[0] for p in PARTS] + ["wall_ns"])
        waited = [(*m[:-1], step, m[-1]) in slow for m in members]
        edge = ["#111111" if w else "rgba(0,0,0,0)" for w in waited]
        for part, name, color in PARTS:
            fig.add_trace(go.Bar(
                name=name, legendgroup=part, showlegend=col == 1, x=labels,
                y=[float(v) / div for v in sub[part]], marker=dict(color=color, line=dict(color=edge, width=2)),
                customdata=[[fmt_ns(o), fmt_ns(c), fmt_ns(w), " (the one the others waited for)" if slowest else ""]
                            for o, c, w, slowest in zip(sub["own_ns"], sub["collective_ns"], sub["wall_ns"], waited)],
                hovertemplate=f"%{{x}}, {esc(step, 40)}%{{customdata[3]}}<br>own %{{customdata[0]}}, in collectives "
                              "%{customdata[1]}<br>step %{customdata[2]}<extra></extra>"), row=1, col=col)
    notes = []
    if left_out:
        longest = every.loc[every["step"].isin(left_out), "wall_ns"].max()
        notes.append(f"{', '.join(esc(s, 30) for s in left_out)} left out: warm-up, up to {fmt_ns(longest)}")
    if len(order) > len(shown):
        notes.append(f"the first {len(shown)} of {len(order)} steps")
    note = f" ({'; '.join(notes)})" if notes else ""
    layout(fig, f"Per rank and step: own time and time in collectives ({unit}), straggler outlined{note}",
           barmode="stack", height=440, extra_top=20, legend_entries=[p[1] for p in PARTS])
    fig.update_yaxes(title_text=f"wall time of the step ({unit})", col=1, rangemode="tozero")
    fig.update_xaxes(type="category")
    return fig
