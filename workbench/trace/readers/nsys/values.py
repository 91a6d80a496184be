"""Columns as read (int64, nullable integers, sqlite3's objects, categoricals) turned into
the trace's values: exact integers, names looked up in StringIds, pids and tids, with an
error naming the column for any value that cannot be one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...names import categorical


def pid(global_id: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # nsys packs (vm, pid, tid) into globalTid/globalPid: pid lives in bits 24..55.
    p = np.right_shift(global_id, 24, out=out)
    p &= 0xFFFFFFFF  # in place: no second temporary
    return p


def own_pid(global_pid: np.ndarray) -> np.ndarray:
    """pid made in place of ``global_pid``, a private column read from the file."""
    return pid(global_pid, out=global_pid)


def tid(global_tid: np.ndarray) -> np.ndarray:
    return global_tid & 0xFFFFFF


def pid_tid(global_tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pid and tid, the tid made in place of ``global_tid`` (a private column read from the
    file), so that no temporary of the table's length is made for it."""
    p = pid(global_tid)
    global_tid &= 0xFFFFFF
    return p, global_tid


def ints(df: pd.DataFrame, col: str, where: Path, table: str, default: int | None = None) -> np.ndarray:
    """Column ``col`` as int64; an absent column, and with a ``default`` NULLs and
    non-numbers, read as it (-1 where an absent column has none)."""
    if col not in df:
        return np.full(len(df), -1 if default is None else default, dtype=np.int64)
    if df[col].dtype == np.int64:  # INTEGERs only: nothing to convert or refuse
        # The array itself, not to_numpy()'s read-only view: ``df`` is a private intermediate
        # whose columns are handed on to the trace's frames without a copy.
        return np.asarray(df[col].array)
    # Nullable dtypes: ints beside NULLs stay exact (through float64, 2**53 + 1 would not).
    s = pd.to_numeric(pd.Series(df[col]), errors="coerce", dtype_backend="numpy_nullable")
    if s.isna().any():
        if default is None:
            raise TraceFormatError(where, f"{table}.{col}: {int(s.isna().sum())} NULL or non-numeric value(s)")
        s = s.fillna(default)
    return int64(s.to_numpy(), where, f"{table}.{col}")


def int64(a: np.ndarray, where: Path, what: str) -> np.ndarray:
    """Cast to int64, refusing values (REAL in an INTEGER column) that int64 cannot hold."""
    if a.dtype.kind == "f" and len(a) and np.nanmax(np.abs(a)) >= 2.0**63:
        raise TraceFormatError(where, f"{what}: value out of range ({a[np.nanargmax(np.abs(a))]:.6g})")
    return a.astype(np.int64)


def names(ids: np.ndarray, strings: dict[int, str], where: Path, what: str, clean=None) -> pd.Categorical:
    """``categorical(clean(strings[ids]))``: strings are looked up (and cleaned) once per
    distinct id, and the rows get their codes in one pass over the ids."""
    ids = np.asarray(ids, dtype=np.int64)
    uniq, take = distinct_ids(ids)
    vals = np.empty(len(uniq), dtype=object)
    for j, v in enumerate(uniq.tolist()):
        s = strings.get(v)
        if s is None:
            missing = {u for u in uniq.tolist() if strings.get(u) is None}  # absent, or a NULL value
            first = next(x for x in ids.tolist() if x in missing)  # report the first in row order
            raise TraceFormatError(where, f"{what} refers to string id {first} missing from StringIds")
        vals[j] = s if clean is None else clean(s)
    return spread_distinct(vals, take)


def spread_distinct(values: np.ndarray, take) -> pd.Categorical:
    """``categorical(take(values))`` for a value per distinct id and :func:`distinct_ids`'s
    ``take``: the values are factorized, and only their codes spread over the rows."""
    if not all(isinstance(v, str) for v in values.tolist()):  # a number in StringIds: unsortable,
        return categorical(take(values))  # so categories in order of first appearance in rows
    # Every distinct value is some row's: all of them are categories.
    small = categorical(values)
    return pd.Categorical.from_codes(take(small.codes), dtype=small.dtype, validate=False)


def distinct_ids(ids: np.ndarray):
    """The distinct ``ids``, sorted, and a function taking a value per distinct id to the
    value of each row (``pd.factorize(ids, sort=True)``'s uniques, and ``values[codes]``).
    StringIds ids are small and dense: a table indexed by id instead of a hash, which maps
    each row straight to its value (one pass over the rows, not one for codes and one more
    for values)."""
    if len(ids):
        lo, hi = int(ids.min()), int(ids.max())
        if lo >= 0 and hi < max(1 << 16, 4 * len(ids)):
            seen = np.zeros(hi + 1, dtype=bool)
            seen[ids] = True
            uniq = np.flatnonzero(seen)

            def take(values: np.ndarray) -> np.ndarray:
                table = np.zeros(hi + 1, dtype=values.dtype)
                table[uniq] = values
                return table[ids]

            return uniq, take
    codes, uniq = pd.factorize(ids, sort=True)
    return uniq, lambda values: values[codes]


def text_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A text column's distinct values (bytes decoded; non-UTF-8 with replacement characters)
    and each row's index into them as int32 (-1: NULL), from the page reader's categorical
    or from sqlite3's values."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return np.asarray(col.cat.categories, dtype=object), col.cat.codes.to_numpy().astype(np.int32)
    codes, uniq = pd.factorize(col.to_numpy(dtype=object))
    values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in uniq.tolist()]  # BLOBs
    return np.array(values, dtype=object), codes.astype(np.int32)
