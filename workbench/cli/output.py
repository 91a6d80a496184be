"""What the command line prints: tables as aligned text or JSON, plain JSON values, and a CPU-only
trace's column names. Every command prints through here."""

from __future__ import annotations

import json
import math
import sys

# A CPU-only trace's work units are CPU ops timed on the host: its columns say so.
_CPU_COLUMNS = {"kernels": "cpu_ops", "gpu_time_ns": "cpu_time_ns", "kernels_per_instance": "cpu_ops_per_instance",
                "kernel": "cpu_op", "graph_kernels": "graph_cpu_ops"}


def print_table(df, as_json: bool, out=None, *, left: tuple[str, ...] = (), width: int = 200) -> None:
    """``df`` as a JSON list of rows, or as text: one terminal line per row, each text cell cut
    to about ``width`` characters, the ``left`` columns aligned left (names read down a list
    better so; pandas aligns every column right)."""
    out = out or sys.stdout
    if as_json:
        out.write(json.dumps(records(df), indent=1) + "\n")
        return
    if not len(df):
        out.write("(no rows)\n")
        return
    import pandas as pd

    from ..textfmt import one_line

    shown = df.copy()
    for c in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[c]):
            # One terminal line per row, and no 50 MB cell: pandas pads every cell to its column.
            shown[c] = shown[c].astype(object).map(lambda v: one_line(str(v), width))
    for c in left:
        cells = shown[c].astype(str)
        pad = max(len(c), *cells.map(len)) if len(cells) else len(c)
        shown[c] = cells.str.ljust(pad)
        shown = shown.rename(columns={c: c.ljust(pad)})
    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                           "display.max_colwidth", 80):
        text = shown.to_string(index=False)
    out.write(("\n".join(line.rstrip() for line in text.splitlines()) if left else text) + "\n")


def records(df) -> list[dict]:
    """``df``'s rows as plain JSON objects (numpy scalars as Python numbers, NaN as null)."""
    return [{str(k): v for k, v in finite(rec).items()} for rec in df.to_dict(orient="records")]


def finite(value):
    """Plain JSON: numpy scalars as Python numbers, a non-finite float as null."""
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def cpu_columns(trace, df):
    """``df`` with a CPU-only trace's column names (``cpu_ops``, ``cpu_time_ns``, ``cpu_op``)."""
    from ..trace.manifest import work_units

    if work_units(trace.meta) != "cpu_op":
        return df
    return df.rename(columns=_CPU_COLUMNS)


def print_source_note(meta: dict) -> None:
    """The importer's note on the source (GPU activity not imported, one process assumed), as
    one ``# ...`` line."""
    from ..textfmt import one_line
    from ..trace.manifest import source_note

    if source_note(meta):
        print(f"# {one_line(source_note(meta), 2000)}")
