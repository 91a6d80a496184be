"""torch.profiler / Kineto (Chrome trace JSON) importer.

The file is streamed: the ``traceEvents`` array is cut at event boundaries into pieces of
a few MB, each parsed and turned into columns at once, so memory holds columns, not millions
of events. A cut is only ever made at ``}`` ``,`` ``{`` between events; a cut that falls
inside a string or a nested object makes that piece fail to parse, and the reader then
simply takes more input before cutting again.

A piece is first decoded by msgspec into typed structs that keep only the fields read here,
several times faster than orjson building a dict per event. A piece that decoder refuses
(a field of an unusual type, bad JSON, a cut in the wrong place) is parsed again by orjson,
and both kinds of events go through the same column code, which does all value checks: the
tables and the error messages do not depend on which parser read a piece.
"""

from __future__ import annotations

import gc
import gzip
import zlib
from functools import cache
from itertools import chain as _chain
from itertools import repeat as _repeat
from operator import attrgetter
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Optional, Union

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from .model import Trace, build
from .names import short_names
from .nesting import nest

_CHUNK = 8 << 20
_KEY = b'"traceEvents"'
_WS = b" \t\r\n"


def _open(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


@cache
def _typed():
    """msgspec decoders for the fields read here; anything they refuse goes to orjson."""
    import msgspec

    # Bounded: orjson turns integers beyond 64 bits into floats, so those must take its path.
    integer = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
    ident = Optional[Union[integer, str]]
    args = msgspec.defstruct(
        "KinetoArgs",
        [(k, ident, None) for k in ("correlation", "device", "stream", "bytes")]
        + [(k, Optional[list[integer]], None) for k in ("grid", "block")],
        gc=False,
    )
    # gc=False: millions of these are alive at once and hold no reference cycles.
    event = msgspec.defstruct(
        "KinetoEvent",
        [("ph", Optional[str], None), ("cat", Optional[str], None), ("name", Optional[str], None),
         ("pid", ident, None), ("tid", ident, None), ("ts", Optional[float], None),
         ("dur", Optional[float], None), ("args", Optional[args], None)],
        gc=False,
    )
    return SimpleNamespace(
        events=msgspec.json.Decoder(list[event]), doc=msgspec.json.Decoder(dict[str, msgspec.Raw]),
        no_args=args(), refused=(msgspec.DecodeError, RecursionError),
    )


def _utf8(data: bytes) -> bool:
    """msgspec skips unread fields without checking their text; orjson rejects bad UTF-8 anywhere."""
    if data.isascii():
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


class _Dicts:
    """Events as orjson parses them: dicts holding any JSON value in any field."""

    @staticmethod
    def get(events: list, key: str) -> list:
        return list(map(dict.get, events, _repeat(key)))

    @staticmethod
    def args(events: list, where) -> list:
        a = list(map(dict.get, events, _repeat("args")))
        if set(map(type, a)) <= {dict}:
            return a
        return [_args(e, where) for e in events]


class _Structs:
    """Events as the typed decoder gives them; ``args`` is a struct or None."""

    @staticmethod
    def get(events: list, key: str) -> list:
        return list(map(attrgetter(key), events))

    @staticmethod
    def args(events: list, where) -> list:
        a = list(map(attrgetter("args"), events))
        if None in a:
            empty = _typed().no_args
            a = [empty if x is None else x for x in a]
        return a


def _decode(data: bytes):
    """``(events, accessor)`` of a JSON array of events; raises orjson's error if it is not one."""
    import orjson

    typed = _typed()
    if _utf8(data):
        try:
            return typed.events.decode(data), _Structs
        except typed.refused:
            pass
    return orjson.loads(data), _Dicts


class _Reader:
    """Yields ``(events, accessor)`` pieces; ``header`` holds the other top-level keys afterwards."""

    def __init__(self, path: Path):
        self.path = path
        self.header: dict[str, Any] = {}

    def _read(self, fh, n=_CHUNK) -> bytes:
        try:
            return fh.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(self.path, f"truncated or corrupt gzip ({e})") from None

    def _bad_json(self, e: Exception) -> TraceFormatError:
        return TraceFormatError(self.path, f"not valid JSON ({e})")

    def batches(self):
        import orjson

        with _open(self.path) as fh:
            buf = self._read(fh, 1 << 20)
            start = buf.lstrip(_WS + b"\xef\xbb\xbf")
            bare_array = start[:1] == b"["
            if bare_array:
                buf = start[1:]
            else:
                buf = start  # without the BOM, which orjson refuses
                # Find the traceEvents key; the header before it may be large (device lists).
                while True:
                    k = buf.find(_KEY)
                    if k >= 0:
                        break
                    more = self._read(fh)
                    if not more:
                        self._no_events(buf)
                    buf += more
                j = k + len(_KEY)
                while True:
                    rest = buf[j:].lstrip(_WS)
                    if len(rest) >= 2 or not (more := self._read(fh)):
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
            eof = False
            want = _CHUNK
            while True:
                if not eof and len(buf) < want:
                    more = self._read(fh)
                    if more:
                        buf += more
                        continue
                    eof = True
                if eof:
                    yield self._tail(buf, bare_array)
                    return
                cut = self._cut(buf)
                if cut > 0:
                    try:
                        batch = _decode(b"[" + buf[:cut] + b"]")
                    except orjson.JSONDecodeError:
                        batch = None
                    if batch is not None:
                        buf = buf[cut:].lstrip(_WS)[1:]  # drop the separating comma
                        want = _CHUNK
                        yield batch
                        continue
                want = len(buf) * 2  # no clean cut yet: read on

    @staticmethod
    def _cut(buf: bytes) -> int:
        """Index just past the last ``}`` that is followed by ``,`` and then ``{``."""
        end = len(buf)
        while True:
            c = buf.rfind(b"}", 0, end)
            if c < 0:
                return -1
            rest = buf[c + 1 : c + 64].lstrip(_WS)
            if rest[:1] == b"," and rest[1:].lstrip(_WS)[:1] == b"{":
                return c + 1
            end = c

    def _tail(self, buf: bytes, bare_array: bool):
        import orjson

        if bare_array:
            try:
                return _decode(b"[" + buf)
            except orjson.JSONDecodeError as e:
                raise TraceFormatError(self.path, f"not valid JSON, or truncated ({e})") from None
        data = b'{"traceEvents":[' + buf
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
                return events, _Structs
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise TraceFormatError(self.path, f"not valid JSON, or truncated ({e})") from None
        events = doc.pop("traceEvents")
        self.header.update(doc)
        return events, _Dicts

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

    def categorical(self, codes: list[np.ndarray]) -> pd.Categorical:
        c = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        return pd.Categorical.from_codes(c, categories=pd.Index(list(self), dtype=object).astype(str), validate=False)


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


def _args(e: dict, where) -> dict:
    a = e.get("args")
    if a is None:
        return {}
    if type(a) is not dict:
        raise TraceFormatError(where, f"event 'args' is not an object: {str(a)[:60]!r}")
    return a


class _Columns:
    """Per-table column pieces, one piece per batch."""

    def __init__(self):
        self.pieces: dict[str, list] = {}

    def add(self, **cols):
        for k, v in cols.items():
            self.pieces.setdefault(k, []).append(v)

    def frame(self, cats: dict[str, _Interner]) -> pd.DataFrame:
        out = {}
        for k, parts in self.pieces.items():
            out[k] = cats[k].categorical(parts) if k in cats else np.concatenate(parts)
        return pd.DataFrame(out)


def _dims_all(values: list, where) -> np.ndarray:
    """``_dims`` of each value as an (n, 3) array; one C-level pass for lists of 3 ints."""
    if (values and set(map(type, values)) == {list} and set(map(len, values)) == {3}
            and set(map(type, _chain.from_iterable(values))) == {int}):
        try:
            return np.array(values, dtype=np.int64).reshape(-1, 3)
        except OverflowError:
            pass
    return np.array([_dims(v, where) for v in values], dtype=np.int64).reshape(-1, 3)


def _classify(events: list, acc, counts: dict):
    """Route each event by category in one C-level lookup per event; None when the batch holds
    anything unusual (a non-object element, an unhashable category), which the caller then
    classifies the plain way (and reports)."""
    K, A, R, C, MC, MS, G = [], [], [], [], [], [], []
    buckets = {"kernel": K, "cuda_runtime": A, "cuda_driver": A, "cpu_op": C, "user_annotation": R,
               "gpu_memcpy": MC, "gpu_memset": MS, "gpu_user_annotation": G}
    get = buckets.get
    try:
        for e, cat in zip(events, acc.get(events, "cat")):
            b = get(cat)
            if b is not None:
                b.append(e)
    except TypeError:
        return None
    out = []
    for group in (K, A, C, MC, MS):
        # list.count, not a set: a "ph" that is a list or an object is unhashable
        if group and (phs := acc.get(group, "ph")).count("X") != len(group):
            group = [e for e, ph in zip(group, phs) if ph == "X"]
        out.append(group)
    K, A, C, MC, MS = out
    BE = []
    if R:
        phs = acc.get(R, "ph")
        if phs.count("X") != len(phs):
            BE = [e for e, ph in zip(R, phs) if ph == "B" or ph == "E"]
            R = [e for e, ph in zip(R, phs) if ph == "X"]
    if G:
        counts["gpu_user_annotation"] += acc.get(G, "ph").count("X")
    return K, A, R, C, MC, MS, BE


def _classify_plain(events: list, counts: dict, where):
    """``_classify`` one event at a time, reporting the first element that is not an object."""
    K, A, R, C, MC, MS, BE = [], [], [], [], [], [], []
    for e in events:
        if type(e) is not dict:
            raise TraceFormatError(where, f"an element of traceEvents is not an object: {str(e)[:60]!r}")
        ph = e.get("ph")
        cat = e.get("cat")
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


def read_kineto(path: str | Path) -> Trace:
    path = Path(path)
    where = path
    reader = _Reader(path)
    knames, anames, rnames, onames, mkinds = (_Interner() for _ in range(5))
    kern, api, rng, ops, mcpy, mset = (_Columns() for _ in range(6))
    open_b: dict[tuple[int, int], list] = {}
    counts = {"events": 0, "gpu_user_annotation": 0}

    # The cyclic GC would walk millions of young objects per piece for nothing: nothing made
    # here forms a cycle.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for events, acc in reader.batches():
            if not isinstance(events, list):
                raise TraceFormatError(where, "traceEvents is not an array")
            counts["events"] += len(events)
            groups = _classify(events, acc, counts)
            if groups is None:
                groups = _classify_plain(events, counts, where)
            K, A, R, C, MC, MS, BE = groups
            get = acc.get
            if K:
                a = acc.args(K, where)
                names = _names(get(K, "name"), "kernel name", where)
                ts = _num(get(K, "ts"), "kernel ts", where)
                dur = _num(get(K, "dur"), "kernel dur", where)
                grid = _dims_all(get(a, "grid"), where)
                block = _dims_all(get(a, "block"), where)
                start = _ns(ts)
                kern.add(
                    name=knames.codes(names), start=start, end=start + _ns(dur),
                    device=_ints(get(a, "device"), "kernel device", where),
                    stream=_ints(get(a, "stream"), "kernel stream", where),
                    correlation=_ints(get(a, "correlation"), "kernel correlation", where),
                    grid_x=grid[:, 0], grid_y=grid[:, 1], grid_z=grid[:, 2],
                    block_x=block[:, 0], block_y=block[:, 1], block_z=block[:, 2],
                )
            if A:
                names = _names(get(A, "name"), "API call name", where)
                start = _ns(_num(get(A, "ts"), "API call ts", where))
                api.add(
                    name=anames.codes(names), start=start,
                    end=start + _ns(_num(get(A, "dur"), "API call dur", where)),
                    pid=_ints(get(A, "pid"), "API call pid", where),
                    tid=_ints(get(A, "tid"), "API call tid", where),
                    correlation=_ints(get(acc.args(A, where), "correlation"), "API call correlation", where),
                    kind=np.array([c == "cuda_driver" for c in get(A, "cat")], dtype=np.int8),
                )
            for group, cols, interner in ((R, rng, rnames), (C, ops, onames)):
                if group:
                    what = "range" if group is R else "cpu_op"
                    names = _names(get(group, "name"), f"{what} name", where)
                    start = _ns(_num(get(group, "ts"), f"{what} ts", where))
                    cols.add(
                        name=interner.codes(names), start=start,
                        end=start + _ns(_num(get(group, "dur"), f"{what} dur", where)),
                        pid=_ints(get(group, "pid"), f"{what} pid", where),
                        tid=_ints(get(group, "tid"), f"{what} tid", where),
                    )
            for group, cols in ((MC, mcpy), (MS, mset)):
                if group:
                    a = acc.args(group, where)
                    start = _ns(_num(get(group, "ts"), "memcpy/memset ts", where))
                    extra = {}
                    if group is MC:
                        extra["kind"] = mkinds.codes(_names(get(group, "name"), "memcpy name", where))
                    cols.add(
                        start=start, end=start + _ns(_num(get(group, "dur"), "memcpy/memset dur", where)),
                        device=_ints(get(a, "device"), "memcpy/memset device", where),
                        stream=_ints(get(a, "stream"), "memcpy/memset stream", where),
                        correlation=_ints(get(a, "correlation"), "memcpy/memset correlation", where),
                        bytes=_ints(get(a, "bytes"), "memcpy/memset bytes", where),
                        **extra,
                    )
            if BE:
                _begin_end(BE, acc, open_b, rng, rnames, where)
    finally:
        if gc_was_on:
            gc.enable()

    for (pid, tid), stack in open_b.items():
        if stack:
            name, ts = stack[-1]
            raise TraceFormatError(where, f"range {name[:80]!r} begun at {ts} ns on thread {pid}/{tid} never ends")

    tables = {}
    if kern.pieces:
        k = kern.frame({"name": knames})
        k["short_name"] = short_names(k["name"])
        k["kind"] = "kernel"
        k["pid"] = -1  # Kineto puts the device in pid; the launch join fills the process
        k["launch_tid"] = -1
        tables["kernels"] = k
    if api.pieces:
        a = api.frame({"name": anames})
        a["kind"] = pd.Categorical.from_codes(a["kind"].to_numpy(), categories=["runtime", "driver"])
        tables["api"] = a
    if rng.pieces:
        r = rng.frame({"name": rnames})
        r["domain"] = "record_function"
        tables["ranges"] = r
    if mcpy.pieces:
        tables["memcpy"] = mcpy.frame({"kind": mkinds})
    if mset.pieces:
        tables["memset"] = mset.frame({})
    gpu_events = bool(kern.pieces or mcpy.pieces or mset.pieces)
    if not gpu_events and ops.pieces:
        tables["kernels"] = _cpu_work_units(ops.frame({"name": onames}))

    meta = _meta(reader.header, counts, gpu_events)
    return build(tables, meta, str(where))


def _begin_end(BE, acc, open_b, rng, rnames, where):
    """Pair B/E user_annotation events per thread into ranges."""
    names, starts, ends, pids, tids = [], [], [], [], []
    for ph, n, pid, tid, ts in zip(*(acc.get(BE, k) for k in ("ph", "name", "pid", "tid", "ts"))):
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
    bounds = np.flatnonzero((np.diff(pid) != 0) | (np.diff(tid) != 0)) + 1
    s, e = ops["start"].to_numpy(), ops["end"].to_numpy()
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(ops)]):
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
