"""torch.profiler / Kineto (Chrome trace JSON) importer.

The file is streamed: the ``traceEvents`` array is cut at event boundaries into pieces of
a few MB, each parsed and turned into columns at once, so memory holds columns, not millions
of events. A cut is only ever made at ``}`` ``,`` ``{`` between events; a cut that falls
inside a string or a nested object makes that piece fail to parse, and the reader then
simply takes more input before cutting again.

A piece is first read by a C scanner (``_kineto_scan.c``) straight into columns, without
the GIL and without a Python object per event. It declines anything it does not vouch for (a
field of an unusual type, bad JSON, a cut in the wrong place); such a piece is decoded by
msgspec into typed structs that keep only the fields read here, or where that decoder refuses
it too, by orjson, and both kinds of events go through the same column code, which does all
value checks: the tables and the error messages do not depend on which parser read a piece.

A large uncompressed file is read by several threads, each a range of pieces (see
``kineto_parallel``), with the same result.
"""

from __future__ import annotations

import gzip
import mmap
import os
import re
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from itertools import chain as _chain
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Optional, Union

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...options import DEFAULT, ImportOptions
from ...schema import RawTables
from ...names import code_dtype, constant, short_names
from ...build.nesting import nest, thread_blocks

_HEAD = 1 << 20  # the first read, which holds the header of most files
_CHUNK = 8 << 20
_SLICE = 2048  # events turned into rows at a time
# The least a thread's range is worth its start (the header read again, a window before the
# range, a piece cut short at its end): below two of them, the file is read in one pass.
_RANGE_MIN = 64 << 20
# Ranges per thread: a thread that is done early takes the next range, so threads end together
# although some parts of a file read faster than others (CPU ops, then GPU events).
_RANGES_PER_THREAD = 4
_WINDOW = 1 << 20  # bytes before a range's start searched for the cut the one-pass reader makes
_KEY = b'"traceEvents"'
_PREFIX = b'{"traceEvents":['
_WS = b" \t\r\n"
_WS_RUN = re.compile(rb"[ \t\r\n]*")


def _gzipped(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _open(path: Path):
    return gzip.open(path, "rb") if _gzipped(path) else open(path, "rb")


_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
_ARGS = ("correlation", "device", "stream", "bytes", "grid", "block")


@cache
def _typed():
    """msgspec decoders for the fields read here; anything they refuse goes to orjson."""
    import msgspec

    # Bounded: orjson turns integers beyond 64 bits into floats, so those must take its path.
    integer = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
    ident = Optional[Union[integer, str]]
    dims = Optional[list[integer]]
    args = msgspec.defstruct("KinetoArgs", [(k, dims if k in ("grid", "block") else ident, None) for k in _ARGS],
                             gc=False)
    # ts and dur as floats, which their columns are: msgspec and numpy round integers alike.
    types = {"ph": str, "cat": str, "name": str, "pid": ident, "tid": ident, "ts": float, "dur": float, "args": args}
    # gc=False: a piece's structs are many and hold no reference cycles.
    event = msgspec.defstruct("KinetoEvent", [(k, Optional[types[k]], None) for k in _FIELDS], gc=False)
    return SimpleNamespace(
        events=msgspec.json.Decoder(list[event]), doc=msgspec.json.Decoder(dict[str, msgspec.Raw]),
        args=args, no_args=args(), refused=(msgspec.DecodeError, RecursionError),
    )


class _Loose:
    """An event parsed by orjson, read through the same attributes as the typed structs; its
    values may be any JSON value, for the column checks to report."""

    __slots__ = _FIELDS

    def __init__(self, e: dict):
        for k in _FIELDS:
            setattr(self, k, e.get(k))


class _LooseArgs:
    __slots__ = _ARGS

    def __init__(self, a: dict):
        for k in _ARGS:
            setattr(self, k, a.get(k))


def _loose(events: list, where) -> list[_Loose]:
    for e in events:
        if type(e) is not dict:
            raise TraceFormatError(where, f"an element of traceEvents is not an object: {str(e)[:60]!r}")
    return list(map(_Loose, events))


def _utf8(data: memoryview) -> bool:
    """msgspec skips unread fields without checking their text; orjson rejects bad UTF-8 anywhere."""
    if np.frombuffer(data, np.uint8).max(initial=0) < 0x80:
        return True
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


@cache
def _scanner():
    """The C scanner (``scan`` and its ``TABLES``: name, name column, columns); None where
    the extension is not built, and the msgspec/orjson path reads every piece."""
    try:
        from . import _kineto_scan
    except ImportError:
        return None
    return _kineto_scan


# Columns _rows makes narrower than the scanner's int64.
_NARROW = {("api", "kind"): np.int8}

# The tables of GPU events: with any of them, cpu_ops are not kept (see _Tables.add).
_GPU = {"kernels", "memcpy", "memset"}


def _gpu_rows(rows: dict) -> bool:
    """Whether a piece's rows hold GPU events."""
    return not rows.keys().isdisjoint(_GPU)


def _scan(data, *bounds: int, cpu_ops: bool = True):
    """``(end, part)`` for the JSON array of events that ``data`` begins with, read by the C
    scanner, ``end`` being the offset just past the array; None where the scanner declines it.
    With ``start, stop``: the events ``data[start:stop]`` holds, the inside of such an array;
    there ``cpu_ops`` false has cpu_op events checked as ever but make no rows (``_Tables.add``
    would drop them)."""
    scanner = _scanner()
    if scanner is None:
        return None
    out = scanner.scan(data, *bounds, cpu_ops) if bounds else scanner.scan(data)
    if out is None:
        return None
    end, events, annotations, tables, begin_end = out
    rows, strings = {}, {}
    for (table, named, columns), (names, data) in zip(scanner.TABLES, tables):
        if data:
            rows[table] = _scanned_rows(table, np.frombuffer(data, np.int64).reshape(len(columns), -1), columns)
            if named:
                strings[table] = names
    return end, (rows, begin_end, strings, {"events": events, "gpu_user_annotation": annotations})


def _scanned_rows(table: str, values: np.ndarray, columns: tuple) -> dict:
    """A table's columns from the scanner's (one row of ``values`` per column), as ``_rows``
    makes them (same order too; the scanner gives start and end in ns as ``_ns`` makes them)."""
    return {c: v.astype(_NARROW[table, c]) if (table, c) in _NARROW else v for c, v in zip(columns, values)}


def _after_events(rest: memoryview, bare_array: bool) -> dict | None:
    """The top-level keys after the events (``rest`` follows their array), or None to leave the
    whole document to the other path, which also words any problem."""
    import orjson

    rest = bytes(rest).lstrip(_WS)
    if bare_array:
        return None if rest else {}
    if rest[:1] == b",":
        rest = rest[1:].lstrip(_WS)
        if rest[:1] != b'"':
            return None
    elif rest[:1] != b"}":
        return None
    try:
        extra = orjson.loads(b"{" + rest)
    except orjson.JSONDecodeError:
        return None
    return None if "traceEvents" in extra else extra  # a second array: the other path's case


def _decoded_part(events: list, typed: bool, where) -> tuple:
    """``_part`` of decoded events, its names coded piece by piece as the scanner codes them."""
    names = {t: _Interner() for t in _NAMED}
    counts = {"events": 0, "gpu_user_annotation": 0}
    rows, begin_end = _part(events, typed, names, counts, where)
    return rows, begin_end, {t: list(n) for t, n in names.items()}, counts


def _decode(data: memoryview) -> tuple[list, bool]:
    """The events of a JSON array and whether they are typed structs (else orjson's values);
    raises orjson's error if it is not valid JSON."""
    import orjson

    typed = _typed()
    if _utf8(data):
        try:
            return typed.events.decode(data), True
        except typed.refused:
            pass
    return orjson.loads(data), False


class _OnePass(Exception):
    """Ranges read apart would not give the one-pass result (a piece crosses a range's end, a
    worker failed): read the file in one pass instead."""


def _cut(buf, lo: int, hi: int) -> int:
    """Index just past the last ``}`` in ``buf[lo:hi]`` that is followed by ``,`` and then ``{``."""
    end = hi
    while True:
        c = buf.rfind(b"}", lo, end)
        if c < 0:
            return -1
        rest = buf[c + 1 : min(c + 64, hi)].lstrip(_WS)
        if rest[:1] == b"," and rest[1:].lstrip(_WS)[:1] == b"{":
            return c + 1
        end = c


class _Mapped:
    """An uncompressed file mapped in memory, its unread events ``data[at:end]``: pieces are
    read where they lie (copying them out took as long as scanning them)."""

    def __init__(self, data: mmap.mmap, at: int, end: int):
        self.data, self.at, self.end = data, at, end
        self.released = at - at % mmap.PAGESIZE

    def read(self, n: int) -> int:
        """Takes up to ``n`` more bytes of the file; how many."""
        got = min(n, len(self.data) - self.end)
        self.end += got
        return got

    def consume(self, at: int):
        """Drops the events before ``at``; read pages leave the process (the file stays
        cached), so its resident memory holds the pieces being read, not the whole file."""
        self.at = at
        done = at - at % mmap.PAGESIZE
        if done > self.released:
            self.data.madvise(mmap.MADV_DONTNEED, self.released, done - self.released)
            self.released = done


class _Buffered:
    """A gzip stream read into a buffer, its unread events ``data[at:end]``. The buffer is
    reused, as fresh 8 MB objects for every piece cost more in page faults than parsing some
    of them."""

    def __init__(self, path: Path, fh, head: bytes):
        self.path, self.fh = path, fh
        self.data, self.at, self.end = bytearray(head), 0, len(head)

    def read(self, n: int) -> int:
        """Reads up to ``n`` more bytes; how many."""
        buf, end = self.data, self.end
        if len(buf) < end + n:
            buf.extend(bytes(end + n - len(buf)))
        got = 0
        try:
            while got < n:
                k = self.fh.readinto(memoryview(buf)[end + got : end + n])
                if not k:
                    break
                got += k
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(self.path, f"truncated or corrupt gzip ({e})") from None
        self.end += got
        return got

    def consume(self, at: int):
        """Drops the events before ``at``: the rest moves to the front (the buffer is reused)."""
        rest = self.data[at : self.end]
        self.data[: len(rest)] = rest
        self.at, self.end = 0, len(rest)


class _Reader:
    """Yields the file's pieces as parts ``(rows, begin_end, strings, counts)``, each piece's
    rows with names as codes into its ``strings``; ``header`` holds the other top-level keys
    afterwards.

    The pieces are cut where the bytes read so far end after each read of ``chunk`` bytes, and
    all reads but the first (``_HEAD``) are of ``chunk`` bytes, so where a piece ends depends
    only on the bytes just before ``_HEAD + k * chunk``. That lets ``batches(start, stop)``
    yield exactly the one-pass reader's pieces between two such offsets.
    """

    def __init__(self, path: Path, chunk: int, gpu: threading.Event | None = None):
        self.path = path
        self.chunk = chunk
        self.header: dict[str, Any] = {}
        # Set once a piece of the file held GPU events (shared by the readers of its ranges):
        # from then on cpu_op rows would be dropped by _Tables.add, so they are not made.
        self.gpu = gpu or threading.Event()

    def _read(self, fh, n: int) -> bytes:
        try:
            return fh.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(self.path, f"truncated or corrupt gzip ({e})") from None

    def _bad_json(self, e: Exception) -> TraceFormatError:
        return TraceFormatError(self.path, f"not valid JSON ({e})")

    def batches(self, start: int | None = None, stop: int | None = None):
        """The pieces of the whole file, or of those that begin after ``start`` and end by
        ``stop`` (offsets ``_HEAD + k * chunk``; raises ``_OnePass`` if that cannot be)."""
        import orjson

        with _open(self.path) as fh:
            buf = self._read(fh, _HEAD)
            text = buf.lstrip(_WS + b"\xef\xbb\xbf")
            bare_array = text[:1] == b"["
            if bare_array:
                buf = text[1:]
            else:
                buf = text  # without the BOM, which orjson refuses
                # Find the traceEvents key; the header before it may be large (device lists).
                while True:
                    k = buf.find(_KEY)
                    if k >= 0:
                        break
                    more = self._read(fh, self.chunk)
                    if not more:
                        self._no_events(buf)
                    buf += more
                j = k + len(_KEY)
                while True:
                    rest = buf[j:].lstrip(_WS)
                    if len(rest) >= 2 or not (more := self._read(fh, self.chunk)):
                        break
                    buf += more
                if rest[:1] != b":" or rest[1:].lstrip(_WS)[:1] != b"[":
                    self._no_events(buf + fh.read())
                head = buf[:k].rstrip(_WS).rstrip(b",")
                try:
                    self.header = orjson.loads(head + b"}")
                except orjson.JSONDecodeError as e:
                    raise self._bad_json(e) from None
                if not isinstance(self.header, dict):
                    raise TraceFormatError(self.path, "top-level JSON is not an object")
                buf = rest[1:].lstrip(_WS)[1:]
            pos = fh.tell()
            if start is not None:
                # The one-pass reader's cut before `start`, from the bytes just before it.
                if start - _WINDOW < pos - len(buf):
                    raise _OnePass
                fh.seek(start - _WINDOW)
                window = self._read(fh, _WINDOW)
                cut = _cut(window, 0, len(window))
                if cut < 0:
                    raise _OnePass
                buf, pos = window[cut:].lstrip(_WS)[1:], start
            if isinstance(fh, gzip.GzipFile):
                yield from self._pieces(_Buffered(self.path, fh, buf), bare_array, pos, stop)
                return
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                yield from self._pieces(_Mapped(data, pos - len(buf), pos), bare_array, pos, stop)

    def _pieces(self, src, bare_array: bool, pos: int, stop: int | None):
        """The pieces of the unread events of ``src`` (``_Mapped`` or ``_Buffered``), ``pos``
        being how far the file is read."""
        want = self.chunk
        while True:
            if src.end - src.at < want:
                if stop is not None and pos >= stop:
                    raise _OnePass
                n = src.read(self.chunk)
                if n:
                    pos += n
                    continue
                head = b"[" if bare_array else _PREFIX
                yield self._tail(memoryview(head + src.data[src.at : src.end]), bare_array)
                return
            cut = _cut(src.data, src.at, src.end)
            if cut > 0:
                batch = self._piece(src.data, src.at, cut)
                if batch is not None:
                    src.consume(_WS_RUN.match(src.data, cut).end() + 1)  # past the separating comma
                    want = self.chunk
                    yield batch
                    if stop is not None and pos == stop:
                        return
                    continue
            want = (src.end - src.at) * 2  # no clean cut yet: read on

    def _piece(self, data, start: int, stop: int) -> tuple | None:
        """The part of the events ``data[start:stop]`` holds; None if they are not valid JSON."""
        import orjson

        scanned = _scan(data, start, stop, cpu_ops=not self.gpu.is_set())
        if scanned is not None:
            part = scanned[1]
        else:
            try:
                part = _decoded_part(*_decode(memoryview(b"[" + data[start:stop] + b"]")), self.path)
            except orjson.JSONDecodeError:
                return None
        if _gpu_rows(part[0]):
            self.gpu.set()
        return part

    def _tail(self, data: memoryview, bare_array: bool) -> tuple:
        """The last piece: the events up to the end of the file (``[`` first), or the rest
        of the document (``_PREFIX`` first), whose other keys join the header."""
        start = 0 if bare_array else len(_PREFIX) - 1
        scanned = _scan(data[start:])
        if scanned is not None:
            end, part = scanned
            extra = _after_events(data[start + end :], bare_array)
            if extra is not None:
                self.header.update(extra)
                return part
        return _decoded_part(*self._tail_decoded(data, bare_array), self.path)

    def _tail_decoded(self, data: memoryview, bare_array: bool) -> tuple[list, bool]:
        import orjson

        if bare_array:
            try:
                return _decode(data)
            except orjson.JSONDecodeError as e:
                raise TraceFormatError(self.path, f"not valid JSON, or truncated ({e})") from None
        typed = _typed()
        if _utf8(data):
            # The typed decoder takes the events; the few other keys get orjson's values.
            try:
                doc = typed.doc.decode(data)
                events = typed.events.decode(doc.pop("traceEvents"))
                extra = {k: orjson.loads(memoryview(v)) for k, v in doc.items()}
            except (*typed.refused, orjson.JSONDecodeError):
                pass
            else:
                self.header.update(extra)
                return events, True
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise TraceFormatError(self.path, f"not valid JSON, or truncated ({e})") from None
        events = doc.pop("traceEvents")
        self.header.update(doc)
        return events, False

    def _no_events(self, buf: bytes):
        import orjson

        try:
            doc = orjson.loads(buf)
        except orjson.JSONDecodeError as e:
            raise self._bad_json(e) from None
        if isinstance(doc, dict):
            raise TraceFormatError(self.path, "JSON has no traceEvents array: not a torch.profiler/Chrome trace")
        raise TraceFormatError(self.path, "JSON is neither an object with traceEvents nor an array of events")


class _Interner(dict):
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
        # The codes used, rising: a count, a tenth of the time of np.unique's sort per piece.
        for c in np.flatnonzero(np.bincount(codes, minlength=len(strings))).tolist():
            table[c] = self.setdefault(strings[c], len(self))
        return table[codes]

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=pd.Index(list(self), dtype=object).astype(str), validate=False)


def _ident(v) -> int:
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


# Times beyond 2**62 ns (~146 years) cannot be held as int64 nanoseconds with room for start + dur.
_MAX_US = float(2**62) / 1000.0


def _num(values: list, what: str, where) -> np.ndarray:
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


def _ns(us: np.ndarray) -> np.ndarray:
    """Microseconds (3 decimals) to integer ns, exact for epoch-sized values.

    ``us * 1000`` would pass 2**53 for epoch timestamps and lose up to 256 ns, so whole
    microseconds and the fraction are converted apart. Monotonic: nothing reorders.
    """
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def _ints(values: list, what: str, where, default: int = -1) -> np.ndarray:
    if values and set(map(type, values)) == {int}:  # the usual case: plain ints, no None
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass  # the general path below reports it
    try:
        return np.fromiter((default if v is None else _ident(v) for v in values), dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError) as e:
        raise TraceFormatError(where, f"{what}: {e}") from None


def _names(values: list, what: str, where) -> list:
    if set(map(type, values)) <= {str}:
        return values
    for v in values:
        if type(v) is not str:
            if v is None:
                raise TraceFormatError(where, f"{what} missing in an event")
            raise TraceFormatError(where, f"{what} is not a string: {str(v)[:60]!r}")
    return values


def _args(a, where):
    if a is None:
        return _typed().no_args
    if type(a) is dict:
        return _LooseArgs(a)
    if type(a) is not _typed().args:
        raise TraceFormatError(where, f"event 'args' is not an object: {str(a)[:60]!r}")
    return a


def _all_args(group: list, where) -> list:
    """Each event's args, as typed structs or ``_LooseArgs``; one pass when all are typed."""
    a = [e.args for e in group]
    if set(map(type, a)) == {_typed().args}:
        return a
    return [_args(x, where) for x in a]


class _Columns:
    """Per-table column pieces, one piece per batch."""

    def __init__(self):
        self.pieces: dict[str, list] = {}

    def add(self, **cols):
        for k, v in cols.items():
            self.pieces.setdefault(k, []).append(v)

    def frame(self, cats: dict[str, _Interner]) -> pd.DataFrame:
        """The table, each column its pieces joined into one new array, two columns at a time
        (numpy copies without the GIL, and the first touch of the new memory, which costs
        about as much as the copy here, goes on in both threads). The pieces are let go with
        the table made, so what they held is free again for the arrays made after it."""
        pieces, self.pieces = self.pieces, {}

        def join(k: str) -> np.ndarray:
            parts = pieces[k]
            dtype = code_dtype(len(cats[k])) if k in cats else np.result_type(*parts)
            return np.concatenate(parts, dtype=dtype, casting="same_kind")

        with ThreadPoolExecutor(2, thread_name_prefix="workbench-columns") as pool:
            out = dict(zip(pieces, pool.map(join, pieces)))
        for k in out.keys() & cats.keys():
            out[k] = cats[k].categorical(out[k])
        return pd.DataFrame(out, copy=False)  # the columns are new arrays: no second copy



def _dims_all(values: list, where) -> np.ndarray:
    """``_dims`` of each value as an (n, 3) array; one C-level pass for lists of 3 ints."""
    if (values and set(map(type, values)) == {list} and set(map(len, values)) == {3}
            and set(map(type, _chain.from_iterable(values))) == {int}):
        try:
            return np.fromiter(_chain.from_iterable(values), np.int64, 3 * len(values)).reshape(-1, 3)
        except OverflowError:
            pass
    return np.array([_dims(v, where) for v in values], dtype=np.int64).reshape(-1, 3)


def _classify(events: list, counts: dict):
    """Route each event by category in one dict lookup per event; None when a category is
    unhashable (a list or an object), which the caller then classifies the plain way."""
    K, A, R, C, MC, MS, G = [], [], [], [], [], [], []
    buckets = {"kernel": K, "cuda_runtime": A, "cuda_driver": A, "cpu_op": C, "user_annotation": R,
               "gpu_memcpy": MC, "gpu_memset": MS, "gpu_user_annotation": G}
    get = buckets.get
    try:
        for e in events:
            b = get(e.cat)
            if b is not None:
                b.append(e)
    except TypeError:
        return None
    out = []
    for group in (K, A, C, MC, MS):
        # list.count, not a set: a "ph" that is a list or an object is unhashable
        if group and (phs := [e.ph for e in group]).count("X") != len(group):
            group = [e for e, ph in zip(group, phs) if ph == "X"]
        out.append(group)
    K, A, C, MC, MS = out
    BE = []
    if R:
        phs = [e.ph for e in R]
        if phs.count("X") != len(phs):
            BE = [e for e, ph in zip(R, phs) if ph == "B" or ph == "E"]
            R = [e for e, ph in zip(R, phs) if ph == "X"]
    if G:
        counts["gpu_user_annotation"] += [e.ph for e in G].count("X")
    return K, A, R, C, MC, MS, BE


def _classify_plain(events: list, counts: dict):
    K, A, R, C, MC, MS, BE = [], [], [], [], [], [], []
    for e in events:
        ph, cat = e.ph, e.cat
        if ph == "X":
            if cat == "kernel":
                K.append(e)
            elif cat == "cuda_runtime" or cat == "cuda_driver":
                A.append(e)
            elif cat == "cpu_op":
                C.append(e)
            elif cat == "user_annotation":
                R.append(e)
            elif cat == "gpu_memcpy":
                MC.append(e)
            elif cat == "gpu_memset":
                MS.append(e)
            elif cat == "gpu_user_annotation":
                counts["gpu_user_annotation"] += 1
        elif (ph == "B" or ph == "E") and cat == "user_annotation":
            BE.append(e)
    return K, A, R, C, MC, MS, BE


def _dims(v, where) -> tuple[int, int, int]:
    if v is None:
        return (-1, -1, -1)
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise TraceFormatError(where, f"kernel grid/block is not a list of integers: {str(v)[:60]!r}")
    v = (v + [1, 1, 1])[:3]
    return tuple(v)


# The table each group of events fills, and its column of interned names.
_NAMED = {"kernels": "name", "api": "name", "ranges": "name", "cpu_ops": "name", "memcpy": "kind"}


def _part(events: list, typed: bool, names: dict[str, _Interner], counts: dict, where):
    """One piece's rows: ``{table: {column: array}}`` with names as codes of ``names``, and
    its B/E range events as ``(ph, name, pid, tid, ts)``, which pair across pieces."""
    if not isinstance(events, list):
        raise TraceFormatError(where, "traceEvents is not an array")
    if not typed:
        events = _loose(events, where)
    counts["events"] += len(events)
    # Slice by slice, an event's fields are read while it is still in the CPU cache: a third
    # less time than column by column over the whole piece.
    try:
        slices = [_rows(events[i : i + _SLICE], names, counts, where) for i in range(0, len(events), _SLICE)]
    except TraceFormatError:
        # The same problem as before slicing: the order of the checks over the whole piece
        # decides which one is reported first.
        _rows(events, names, counts, where)
        raise
    tables: dict[str, list] = {}
    for rows, _ in slices:
        for table, cols in rows.items():
            tables.setdefault(table, []).append(cols)
    rows = {t: {c: np.concatenate([p[c] for p in parts]) for c in parts[0]} for t, parts in tables.items()}
    return rows, [e for _, begin_end in slices for e in begin_end]


def _rows(events: list, names: dict[str, _Interner], counts: dict, where):
    """``_part`` of a slice."""
    groups = _classify(events, counts)
    if groups is None:
        groups = _classify_plain(events, counts)
    K, A, R, C, MC, MS, BE = groups
    rows = {}
    if K:
        a = _all_args(K, where)
        kernel_names = _names([e.name for e in K], "kernel name", where)
        ts = _num([e.ts for e in K], "kernel ts", where)
        dur = _num([e.dur for e in K], "kernel dur", where)
        grid = _dims_all([x.grid for x in a], where)
        block = _dims_all([x.block for x in a], where)
        start = _ns(ts)
        rows["kernels"] = dict(
            name=names["kernels"].codes(kernel_names), start=start, end=start + _ns(dur),
            device=_ints([x.device for x in a], "kernel device", where),
            stream=_ints([x.stream for x in a], "kernel stream", where),
            correlation=_ints([x.correlation for x in a], "kernel correlation", where),
            grid_x=grid[:, 0], grid_y=grid[:, 1], grid_z=grid[:, 2],
            block_x=block[:, 0], block_y=block[:, 1], block_z=block[:, 2],
        )
    if A:
        api_names = _names([e.name for e in A], "API call name", where)
        start = _ns(_num([e.ts for e in A], "API call ts", where))
        rows["api"] = dict(
            name=names["api"].codes(api_names), start=start,
            end=start + _ns(_num([e.dur for e in A], "API call dur", where)),
            pid=_ints([e.pid for e in A], "API call pid", where),
            tid=_ints([e.tid for e in A], "API call tid", where),
            correlation=_ints([x.correlation for x in _all_args(A, where)], "API call correlation", where),
            kind=np.array([e.cat == "cuda_driver" for e in A], dtype=np.int8),
        )
    for group, table, what in ((R, "ranges", "range"), (C, "cpu_ops", "cpu_op")):
        if group:
            group_names = _names([e.name for e in group], f"{what} name", where)
            start = _ns(_num([e.ts for e in group], f"{what} ts", where))
            rows[table] = dict(
                name=names[table].codes(group_names), start=start,
                end=start + _ns(_num([e.dur for e in group], f"{what} dur", where)),
                pid=_ints([e.pid for e in group], f"{what} pid", where),
                tid=_ints([e.tid for e in group], f"{what} tid", where),
            )
    for group, table in ((MC, "memcpy"), (MS, "memset")):
        if group:
            a = _all_args(group, where)
            start = _ns(_num([e.ts for e in group], "memcpy/memset ts", where))
            extra = {}
            if group is MC:
                extra["kind"] = names["memcpy"].codes(_names([e.name for e in group], "memcpy name", where))
            rows[table] = dict(
                start=start, end=start + _ns(_num([e.dur for e in group], "memcpy/memset dur", where)),
                device=_ints([x.device for x in a], "memcpy/memset device", where),
                stream=_ints([x.stream for x in a], "memcpy/memset stream", where),
                correlation=_ints([x.correlation for x in a], "memcpy/memset correlation", where),
                bytes=_ints([x.bytes for x in a], "memcpy/memset bytes", where),
                **extra,
            )
    return rows, [(e.ph, e.name, e.pid, e.tid, e.ts) for e in BE]


class _Tables:
    """Every table's columns, piece after piece, and the B/E ranges still open."""

    def __init__(self, where):
        self.where = where
        self.names = {t: _Interner() for t in _NAMED}
        self.cols = {t: _Columns() for t in (*_NAMED, "memset")}
        self.open_b: dict[tuple[int, int], list] = {}
        self.counts = {"events": 0, "gpu_user_annotation": 0}
        self.gpu_events = False

    def add(self, part: tuple):
        """Appends a piece (see ``_Reader``), its names coded anew in file order."""
        rows, begin_end, strings, counts = part
        if not self.gpu_events and _gpu_rows(rows):
            # cpu_ops are work units only where there are no GPU events: from now on they
            # are not kept (in a GPU trace they are the most rows, and most of the memory).
            self.gpu_events = True
            self.cols["cpu_ops"] = _Columns()
        for table, cols in rows.items():
            if table == "cpu_ops" and self.gpu_events:
                continue
            col = _NAMED.get(table)
            if col in cols:
                cols[col] = self.names[table].recode(cols[col], strings[table])
            self.cols[table].add(**cols)
        if begin_end:
            _begin_end(begin_end, self.open_b, self.cols["ranges"], self.names["ranges"], self.where)
        for k, v in counts.items():
            self.counts[k] += v

    def raw(self, header: dict) -> RawTables:
        where = self.where
        for (pid, tid), stack in self.open_b.items():
            if stack:
                name, ts = stack[-1]
                raise TraceFormatError(where, f"range {name[:80]!r} begun at {ts} ns on thread {pid}/{tid} never ends")
        kern, api, rng, ops, mcpy, mset = map(self.cols.get, ("kernels", "api", "ranges", "cpu_ops", "memcpy", "memset"))
        names = self.names
        tables = {}
        if kern.pieces:
            k = kern.frame({"name": names["kernels"]})
            k["short_name"] = short_names(k["name"])
            # Categories of dtype "string", as the column of str it replaces had once typed.
            # No pid: Kineto puts the device there; the launch join fills the process.
            k["kind"] = constant("kernel", len(k), "string")
            tables["kernels"] = k
        if api.pieces:
            a = api.frame({"name": names["api"]})
            a["kind"] = pd.Categorical.from_codes(a["kind"].to_numpy(), categories=["runtime", "driver"])
            tables["api"] = a
        if rng.pieces:
            r = rng.frame({"name": names["ranges"]})
            r["domain"] = constant("record_function", len(r), "string")
            tables["ranges"] = r
        if mcpy.pieces:
            tables["memcpy"] = mcpy.frame({"kind": names["memcpy"]})
        if mset.pieces:
            tables["memset"] = mset.frame({})
        if not self.gpu_events and ops.pieces:
            tables["kernels"] = _cpu_work_units(ops.frame({"name": names["cpu_ops"]}))

        return RawTables(tables, _meta(header, self.counts, self.gpu_events))


def read_kineto(path: str | Path, options: ImportOptions = DEFAULT) -> RawTables:
    """Imports a torch.profiler trace (``.json`` or ``.json.gz``).

    An uncompressed file is read by ``options.threads`` threads, in ranges that shrink along
    it (see ``kineto_parallel``). The result does not depend on how many.
    """
    path = Path(path)
    threads = _threads(path, options)
    stops = _range_stops(path, _CHUNK, threads * _RANGES_PER_THREAD) if threads > 1 else []
    tables, header = _read(path, _CHUNK, stops, threads, options)
    return tables.raw(header)


def _read(path: Path, chunk: int, stops: list[int], threads: int, options: ImportOptions) -> tuple[_Tables, dict]:
    if stops:
        from .parallel import read_parallel

        try:
            return read_parallel(path, chunk, stops, threads, options)
        except _OnePass:
            pass
    tables = _Tables(path)
    reader = _Reader(path, chunk)
    for part in reader.batches():
        tables.add(part)
    return tables, reader.header


def _threads(path: Path, options: ImportOptions) -> int:
    """How many threads read the file: 1 for one pass; no more than ranges of ``_RANGE_MIN``
    bytes."""
    if _gzipped(path):
        return 1  # a gzip stream cannot be entered in the middle
    return options.workers(path.stat().st_size // _RANGE_MIN)


def _range_stops(path: Path, chunk: int, ranges: int) -> list[int]:
    """Where each of ``ranges`` ranges ends but the last (fewer where the file has fewer
    chunks), or [] for one. Threads take the ranges in the order ``read_parallel`` submits
    them, the file's last range first: that one is n parts long, and the k-th of the others
    n - 1 - k. Taken longest first, the ranges leave every thread about the same work, the
    ranges taken last being the shortest."""
    chunks = (path.stat().st_size - _HEAD) // chunk
    ranges = min(ranges, chunks)
    parts = ranges * (ranges + 1) // 2
    done = np.cumsum(np.arange(ranges - 1, 0, -1))  # parts before each stop
    return sorted({_HEAD + chunk * int(chunks * d // parts) for d in done} - {_HEAD})


def _begin_end(rows: list, open_b, rng, rnames, where):
    """Pair B/E user_annotation events, ``(ph, name, pid, tid, ts)``, per thread into ranges."""
    names, starts, ends, pids, tids = [], [], [], [], []
    for ph, n, pid, tid, ts in rows:
        try:
            key = (_ident(pid), _ident(tid))
        except TypeError as err:
            raise TraceFormatError(where, f"range begin/end: {err}") from None
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            raise TraceFormatError(where, f"range ts is not a number: {str(ts)[:60]!r}")
        ts = int(_ns(_num([ts], "range ts", where))[0])
        stack = open_b.setdefault(key, [])
        if ph == "B":
            if type(n) is not str:
                raise TraceFormatError(where, f"range name is not a string: {str(n)[:60]!r}")
            stack.append((n, ts))
        else:
            if not stack:
                raise TraceFormatError(where, f"range end at {ts} ns on thread {key[0]}/{key[1]} has no matching begin")
            n, t0 = stack.pop()
            names.append(n), starts.append(t0), ends.append(ts), pids.append(key[0]), tids.append(key[1])
    if names:
        rng.add(
            name=rnames.codes(names), start=np.array(starts, np.int64), end=np.array(ends, np.int64),
            pid=np.array(pids, np.int64), tid=np.array(tids, np.int64),
        )


def _cpu_work_units(ops: pd.DataFrame) -> pd.DataFrame:
    """A CPU-only trace's work units: its top-level cpu_op events (each launches itself)."""
    ops = ops.sort_values(["pid", "tid", "start"], kind="stable").reset_index(drop=True)
    keep = np.zeros(len(ops), dtype=bool)
    pid, tid = ops["pid"].to_numpy(), ops["tid"].to_numpy()
    s, e = ops["start"].to_numpy(), ops["end"].to_numpy()
    for lo, hi in thread_blocks(pid, tid):
        parent, _, _ = nest(s[lo:hi], e[lo:hi])
        keep[lo:hi] = parent < 0
    top = ops[keep].reset_index(drop=True)
    return pd.DataFrame({
        "name": top["name"], "short_name": top["name"], "kind": "cpu_op",
        "start": top["start"], "end": top["end"], "device": -1, "stream": -1,
        "pid": top["pid"], "correlation": -1,
        "launch_tid": top["tid"], "launch_start": top["start"], "launch_end": top["end"],
        "launch_api": "cpu_op",
    })


def _meta(header: dict, counts: dict, gpu_events: bool) -> dict:
    gpus = []
    devices = header.get("deviceProperties")
    for d in devices if isinstance(devices, list) else []:
        if isinstance(d, dict) and isinstance(d.get("name"), str):
            gpus.append(d["name"])
    env = {"gpu": sorted(set(gpus)) and ", ".join(sorted(set(gpus)))}
    for key in ("cuda_driver_version", "cuda_runtime_version", "cupti_version"):
        if isinstance(header.get(key), (int, str)):
            env[key] = header[key]
    dist = header.get("distributedInfo")
    meta = {
        "source": {"format": "kineto", "tool": "torch.profiler", "schema_version": header.get("schemaVersion"),
                   "events": counts["events"], "gpu_user_annotations_skipped": counts["gpu_user_annotation"],
                   "work_units": "kernel" if gpu_events else "cpu_op"},
        "env": {k: v for k, v in env.items() if v},
    }
    if isinstance(dist, dict):
        meta["distributed"] = {k: v for k, v in dist.items() if isinstance(v, (int, str))}
    return meta
