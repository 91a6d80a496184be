"""The launch join: each kernel gets the API call that launched it, matched by (process,
correlation id), with that call's thread, times and name, and whether a CUDA graph launched it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..names import code_dtype
from ..schema import DEFAULTS, set_column


def match_first(t_pid: np.ndarray | None, t_corr: np.ndarray, q_pid: np.ndarray | None, q_corr: np.ndarray) -> np.ndarray:
    """For each query (pid, correlation id), the first table row (in row order) with the same
    pair, -1 if none; with ``None`` pids, match on the correlation id alone."""
    if not len(t_corr) or not len(q_corr):
        return np.full(len(q_corr), -1, dtype=np.int64)
    pids = [None] if q_pid is None else [q_pid[0]] if q_pid.min() == q_pid.max() else pd.unique(q_pid)
    if len(pids) == 1:
        rows = _rows_of(t_pid, pids[0])
        if rows is not None and not len(rows):  # no call of that process
            return np.full(len(q_corr), -1, dtype=np.int64)
        # One process's ids, rising row after row (nsys's runtime table): a search finds
        # the only row with each id, and needs no memory beyond its answer.
        pos = _find(t_corr if rows is None else t_corr[rows], q_corr)
        if pos is not None:
            if rows is not None:
                pos = np.where(pos >= 0, rows[np.maximum(pos, 0)], -1)
            return pos
    lo = min(int(t_corr.min()), int(q_corr.min()))
    span = max(int(t_corr.max()), int(q_corr.max())) - lo + 1
    if span <= len(t_corr) + len(q_corr) + (1 << 20) and len(pids) <= 8:
        # Correlation ids are dense counters: one direct-address table per process, no sort
        # (its memory is bounded by one int64 per row).
        table = np.empty(span, dtype=np.int64)
        out = np.full(len(q_corr), -1, dtype=np.int64)
        for p in pids:
            rows = _rows_of(t_pid, p)
            rows = np.arange(len(t_corr)) if rows is None else rows
            queries = np.arange(len(q_corr)) if len(pids) == 1 else np.flatnonzero(q_pid == p)
            at = t_corr[rows] - lo
            table.fill(len(t_corr))
            table[at] = rows
            # Which row a repeated id keeps is not defined: where one did not keep its
            # first row, take the first the slower way.
            if not (table[at] <= rows).all():
                np.minimum.at(table, at, rows)
            hit = table[q_corr[queries] - lo]
            out[queries] = np.where(hit < len(t_corr), hit, -1)
        return out
    # Sparse ids or many processes: one int64 key per pair (exact: rank-compressed when the
    # raw values do not fit side by side), a stable sort and a binary search.
    if q_pid is None:
        tk, qk = t_corr, q_corr
    else:
        _, inv_p = np.unique(np.concatenate([t_pid, q_pid]), return_inverse=True)
        vals_c, inv_c = np.unique(np.concatenate([t_corr, q_corr]), return_inverse=True)
        packed = inv_p.reshape(-1).astype(np.int64) * len(vals_c) + inv_c.reshape(-1)
        tk, qk = packed[: len(t_corr)], packed[len(t_corr):]
    order = np.argsort(tk, kind="stable")
    sk = tk[order]
    pos = np.minimum(np.searchsorted(sk, qk), len(sk) - 1)
    return np.where(sk[pos] == qk, order[pos], -1)


def _rows_of(t_pid: np.ndarray | None, p) -> np.ndarray | None:
    """The table rows of process ``p``; None for all of them (no subset copied)."""
    if p is None or t_pid.min() == t_pid.max() == p:
        return None
    return np.flatnonzero(t_pid == p)


def join_launches(kernels: pd.DataFrame, api: pd.DataFrame) -> tuple[np.ndarray | None, np.ndarray] | None:
    """Fill launch_tid/start/end and pid of ``kernels`` (in place: a replaced column is
    freed at once) from the API call with the same (pid, correlation); a column the importer
    did not give is made here, or left out where nothing is joined. Returns the kernels that
    matched (None: all) and their API rows, for :func:`merge_names`; None if none did.

    Importers that already know the launch (CPU-only traces) set launch_tid themselves; those
    rows are kept.
    """
    n = len(kernels)
    if not n or not len(api):
        return
    need = kernels["launch_tid"].to_numpy() < 0 if "launch_tid" in kernels else np.ones(n, dtype=bool)
    if not need.any():
        return
    a_corr = api["correlation"].to_numpy()
    a_pid = api["pid"].to_numpy()
    k_pid = kernels["pid"].to_numpy() if "pid" in kernels else np.full(n, -1)  # Kineto's: not known
    k_corr = kernels["correlation"].to_numpy()
    # Correlation ids repeat across processes: match within the same process (the first API
    # row of that pair). A kernel whose pid is unknown (-1, Kineto puts the device there)
    # matches the first API row with its correlation id in any process.
    # (Subsets are taken only where needed: each is a copy of one or two columns.)
    valid = None if a_corr.min() >= 0 else np.flatnonzero(a_corr >= 0)
    if valid is not None and not len(valid):
        return  # no API call has a correlation id: every kernel is left unlaunched
    tp, tc = (a_pid, a_corr) if valid is None else (a_pid[valid], a_corr[valid])
    known = need & (k_pid >= 0)
    unknown = need & ~known
    any_unknown = bool(unknown.any())
    if known.all():
        match = match_first(tp, tc, k_pid, k_corr)
    elif unknown.all():  # Kineto's kernels: no pid known
        match = match_first(None, tc, None, k_corr)
    else:
        match = np.full(len(kernels), -1, dtype=np.int64)
        known = np.flatnonzero(known)
        match[known] = match_first(tp, tc, k_pid[known], k_corr[known])
        unknown = np.flatnonzero(unknown)
        match[unknown] = match_first(None, tc, None, k_corr[unknown])
    if valid is not None:
        match = np.where(match >= 0, valid[np.maximum(match, 0)], -1)
    hit = match >= 0
    found, m = (None, match) if hit.all() else (np.flatnonzero(hit), match[hit])
    # A kernel whose pid is known matched a call of that very process: only the others'
    # pids change (one column-sized gather less).
    columns = (("launch_tid", "tid"), ("launch_start", "start"), ("launch_end", "end"))
    for col, src in columns + ((("pid", "pid"),) if any_unknown else ()):
        if found is None:  # every kernel matched: no copy of the old column
            set_column(kernels, col, api[src].to_numpy()[m])
            continue
        vals = kernels[col].to_numpy().copy() if col in kernels else np.full(n, DEFAULTS["int64"])
        vals[found] = api[src].to_numpy()[m]
        set_column(kernels, col, vals)
    return found, m


def graph_launched(target: pd.Series, names: pd.Series, found: np.ndarray | None, m: np.ndarray) -> np.ndarray | None:
    """Which kernels CUDA graphs launched, by the launch API name ``merge_names`` gives them
    (an API call's name where the join matched one, else the importer's): None where no
    name is a graph launch. Tested once per distinct name, not per kernel."""
    def graph_codes(col: pd.Series) -> np.ndarray:
        # One more entry for a missing value's code (-1), which no graph launch has.
        return np.array(["GraphLaunch" in str(c) for c in col.cat.categories] + [False], dtype=bool)

    source, own = graph_codes(names), graph_codes(target)
    if not (source.any() or (found is not None and own.any())):
        return None
    graph = source[names.cat.codes.to_numpy()[m]]
    if found is None:
        return graph
    out = own[target.cat.codes.to_numpy()]
    out[found] = graph
    return out


def merge_names(target: pd.Series, source: pd.Series, rows: np.ndarray | None, src_rows: np.ndarray) -> pd.Categorical:
    """``target`` with ``target[rows] = source[src_rows]`` (``rows`` None: all of them), as a
    categorical whose categories are the values present, sorted: what ``categorical()``
    gives, without a string per row."""
    t_cats = np.asarray(target.cat.categories.astype(str), dtype=object)
    s_cats = np.asarray(source.cat.categories.astype(str), dtype=object)
    # One code space: target's categories, then source's, then "" for missing values.
    # int32: a category count never nears 2**31, and these arrays are a row each.
    missing = len(t_cats) + len(s_cats)
    s_codes = source.cat.codes.to_numpy()[src_rows].astype(np.int32)
    s_codes = np.where(s_codes >= 0, s_codes + len(t_cats), missing)
    if rows is None:
        codes = s_codes
    else:
        t_codes = target.cat.codes.to_numpy().astype(np.int32)
        codes = np.where(t_codes >= 0, t_codes, missing)
        codes[rows] = s_codes
    values = np.concatenate([t_cats, s_cats, np.array([""], dtype=object)])
    used = np.flatnonzero(np.bincount(codes, minlength=len(values)))
    uniq, inv = np.unique(values[used], return_inverse=True)
    remap = np.zeros(len(values), dtype=code_dtype(len(uniq)))  # the codes' dtype in the result
    remap[used] = inv.reshape(-1)
    return pd.Categorical.from_codes(remap[codes], categories=pd.Index(uniq), validate=False)


def _find(a: np.ndarray, q: np.ndarray) -> np.ndarray | None:
    """Each query's position in ``a`` (-1 where absent), for ``a`` rising strictly; None
    where it does not."""
    if not len(a):
        return np.full(len(q), -1, dtype=np.int64)
    if not (a[1:] > a[:-1]).all():
        return None
    pos = np.searchsorted(a, q)
    np.minimum(pos, len(a) - 1, out=pos)
    pos[a[pos] != q] = -1
    return pos
