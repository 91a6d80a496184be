"""Values of decoded events checked and turned into columns, names interned, and a table's
columns joined piece after piece.

A problem with a value is worded by these checks whichever backend read its piece: the C
scanner declines any piece holding a value that would fail one, and that piece's events
come here.
"""

from __future__ import annotations

import zlib
from itertools import chain

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...names import code_dtype
from ...options import ImportOptions

# Times beyond 2**62 ns (~146 years) cannot be held as int64 nanoseconds with room for start + dur.
_MAX_US = float(2**62) / 1000.0
# What an event without args reads as.
_NO_ARGS: dict = {}


class Interner(dict):
    """String -> code, codes given in first-seen order."""

    def codes(self, values: list) -> np.ndarray:
        # New strings get the next codes in first-seen order (dict.fromkeys keeps it), then
        # one C-level lookup per value.
        for v in dict.fromkeys(values):
            if v not in self:
                self[v] = len(self)
        return np.fromiter(map(self.__getitem__, values), dtype=np.int64, count=len(values))

    def recode(self, codes: np.ndarray, strings: list) -> np.ndarray:
        """Another interner's codes (into its ``strings``) as this one's, given piece by piece
        in order: then its codes of strings new here rise in first-seen order, as codes do."""
        table = np.empty(len(strings), np.int64)
        # The codes used, rising, found by counting them (a piece's codes are dense and
        # few, so no sort is needed).
        for c in np.flatnonzero(np.bincount(codes, minlength=len(strings))).tolist():
            table[c] = self.setdefault(strings[c], len(self))
        return table[codes]

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=pd.Index(list(self), dtype=object).astype(str), validate=False)


class Columns:
    """A table's column pieces, one piece per part of the file."""

    def __init__(self):
        self.pieces: dict[str, list] = {}

    def add(self, **cols):
        for k, v in cols.items():
            self.pieces.setdefault(k, []).append(v)

    def __len__(self) -> int:
        """Rows added so far (every column has as many)."""
        return sum(map(len, next(iter(self.pieces.values()), [])))

    def frame(self, cats: dict[str, Interner], options: ImportOptions) -> pd.DataFrame:
        """The table, each column its pieces joined into one new array, two columns at a time
        (numpy copies without the GIL, and the first touch of the new memory goes on in both
        threads), the columns of ``cats`` as categoricals. The pieces are let go with the
        table made, so what they held is free again for the arrays made after it."""
        pieces, self.pieces = self.pieces, {}

        def join(k: str) -> np.ndarray:
            parts = pieces[k]
            dtype = code_dtype(len(cats[k])) if k in cats else np.result_type(*parts)
            return np.concatenate(parts, dtype=dtype, casting="same_kind")

        with options.pool(2, "workbench-columns") as pool:
            out = dict(zip(pieces, pool.map(join, pieces)))
        for k in out.keys() & cats.keys():
            out[k] = cats[k].categorical(out[k])
        return pd.DataFrame(out, copy=False)  # the columns are new arrays: no second copy


def ident(v) -> int:
    """Kineto pids/tids are ints, but some writers put strings ("Spans", "stream 7")."""
    if isinstance(v, bool) or v is None:
        raise TypeError(f"pid/tid {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("-").isdigit():
            return int(s)
        return -1 - (zlib.crc32(s.encode("utf-8", "replace")) & 0x7FFFFFFF)
    raise TypeError(f"pid/tid {v!r}")


def num(values: list, what: str, where) -> np.ndarray:
    """Finite microseconds as float64; JSON integers become the floats Python's float() makes."""
    try:
        a = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        bad = next((v for v in values if not isinstance(v, (int, float)) or isinstance(v, bool)), None)
        raise TraceFormatError(where, f"{what} has a non-numeric value {str(bad)[:60]!r}") from None
    if a.ndim != 1:
        raise TraceFormatError(where, f"{what} has a non-numeric value")
    if not np.isfinite(a).all():
        raise TraceFormatError(where, f"{what} is missing or not finite in {int((~np.isfinite(a)).sum())} event(s)")
    if bool in set(map(type, values)):  # True/False are the only bools
        raise TraceFormatError(where, f"{what} has a non-numeric value (true/false)")
    if len(a) and np.abs(a).max() >= _MAX_US:
        raise TraceFormatError(where, f"{what} out of range: {a[np.argmax(np.abs(a))]:.6g} us (more than 140 years)")
    return a


def ns(us: np.ndarray) -> np.ndarray:
    """Microseconds (3 decimals) to integer ns, exact for epoch-sized values.

    ``us * 1000`` would pass 2**53 for epoch timestamps and lose up to 256 ns, so whole
    microseconds and the fraction are converted apart. Monotonic: nothing reorders.
    """
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def ints(values: list, what: str, where, default: int = -1) -> np.ndarray:
    """Ids as int64 (``default`` where missing; pid/tid strings as :func:`ident` codes them)."""
    if values and set(map(type, values)) == {int}:  # the usual case: plain ints, no None
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass  # the general path below reports it
    try:
        return np.fromiter((default if v is None else ident(v) for v in values), dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError) as e:
        raise TraceFormatError(where, f"{what}: {e}") from None


def names(values: list, what: str, where) -> list:
    """``values``, each checked to be a string."""
    if set(map(type, values)) <= {str}:
        return values
    for v in values:
        if type(v) is not str:
            if v is None:
                raise TraceFormatError(where, f"{what} missing in an event")
            raise TraceFormatError(where, f"{what} is not a string: {str(v)[:60]!r}")
    return values


def dims(values: list, where) -> np.ndarray:
    """Kernel grids or blocks as an (n, 3) array: a missing one is -1s, a short one padded
    with 1s, a long one cut to 3. One C-level pass where all are lists of 3 ints."""
    if (values and set(map(type, values)) == {list} and set(map(len, values)) == {3}
            and set(map(type, chain.from_iterable(values))) == {int}):
        try:
            return np.fromiter(chain.from_iterable(values), np.int64, 3 * len(values)).reshape(-1, 3)
        except OverflowError:
            pass
    return np.array([_dim(v, where) for v in values], dtype=np.int64).reshape(-1, 3)


def _dim(v, where) -> tuple[int, int, int]:
    if v is None:
        return (-1, -1, -1)
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise TraceFormatError(where, f"kernel grid/block is not a list of integers: {str(v)[:60]!r}")
    return tuple((v + [1, 1, 1])[:3])


def args(group: list[dict], where) -> list[dict]:
    """Each event's args object (an empty one where it has none)."""
    a = [e.get("args") for e in group]
    if set(map(type, a)) == {dict}:
        return a
    return [_args(x, where) for x in a]


def _args(a, where) -> dict:
    if a is None:
        return _NO_ARGS
    if type(a) is not dict:
        raise TraceFormatError(where, f"event 'args' is not an object: {str(a)[:60]!r}")
    return a
