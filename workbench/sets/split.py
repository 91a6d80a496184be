"""One capture that holds several ranks, split into one reader result per rank, before
``build``: an nsys export of a ``torchrun`` job holds every process and GPU of a node.

- ``process``: one part per process that launched kernels (processes that launched none, a
  launcher, are left out); every table keeps that process's rows. Correlation ids repeat
  across processes, so each part's launches are joined within it, as they must be.
- ``device``: one part per GPU that ran kernels, for one process driving several GPUs: the
  kernels, copies and sets of that GPU, and all the host side (ranges, API calls), so every
  kernel keeps its launch and its ranges.
- ``auto``: ``process`` where kernels of several processes are in the file, else ``device``
  where kernels of several GPUs are, else the capture is one part.
- ``none``: one part.

Each part is returned with what tells it apart (``pid``, ``device``), in (device, pid) order:
the order ranks get where the capture does not name them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import WorkbenchError
from ..trace.schema import RawTables

SPLITS = ("auto", "process", "device", "none")
_DEVICE_TABLES = ("kernels", "memcpy", "memset")


def split(raw: RawTables, how: str, where: str) -> list[tuple[dict, RawTables]]:
    """``raw`` as ``[(part, RawTables), ...]``; ``part`` holds ``pid`` and/or ``device`` (an
    empty dict for a capture kept whole). ``raw`` itself is left as it was."""
    check_split(how)
    kernels = raw.tables.get("kernels", pd.DataFrame())
    pids = _distinct(kernels, "pid")
    devices = _distinct(kernels, "device")
    if how == "auto":
        how = "process" if len(pids) > 1 else "device" if len(devices) > 1 else "none"
    if how == "none":
        return [({}, raw)]
    if how == "process":
        if "pid" not in kernels:
            raise WorkbenchError(where, "cannot split by process: its kernels carry no process id (split by device)")
        owners = {p: _distinct(kernels[kernels["pid"] == p], "device") for p in pids}
        order = sorted(pids, key=lambda p: (min(owners[p], default=-1), p))
        return [({"pid": int(p), "device": int(owners[p][0]) if len(owners[p]) == 1 else -1},
                 _rows(raw, lambda table, df, p=p: df["pid"].to_numpy() == p if "pid" in df else None))
                for p in order]
    return [({"device": int(d)}, _rows(raw, lambda table, df, d=d: (df["device"].to_numpy() == d)
                                       if table in _DEVICE_TABLES and "device" in df else None))
            for d in devices]


def check_split(how: str) -> None:
    if how not in SPLITS:
        raise WorkbenchError(f"split {how!r}", f"unknown split; choose one of {', '.join(SPLITS)}")


def _distinct(df: pd.DataFrame, col: str) -> list[int]:
    return sorted(int(v) for v in pd.unique(df[col].to_numpy())) if col in df and len(df) else []


def _rows(raw: RawTables, keep) -> RawTables:
    """The rows ``keep(table, df)`` selects of each table (None: all of them)."""
    tables = {}
    for table, df in raw.tables.items():
        mask = keep(table, df)
        tables[table] = df if mask is None else df[np.asarray(mask, dtype=bool)].reset_index(drop=True)
    return RawTables(tables, {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.meta.items()})
