"""Any trace written as a Chrome trace JSON, the format Kineto writes: for Perfetto
(ui.perfetto.dev), chrome://tracing, and the workbench's own Kineto reader.

Kernels are complete (``X``) events on a process per device (``GPU 0``) and a thread per
stream, with Kineto's ``ac2g`` flow from the API call that launched each one; ranges and API
calls are on their own process and thread; memory copies and sets on their stream. The
categories and args are Kineto's, so the file imports again with the same kernels, ranges and
per-range attribution. Except for CUDA-graph kernels an nsys capture put under the ranges open
at their graph's capture: the format has no graph nodes, so they are written as Kineto records
them, under their graph launch, and the ranges replayed for them are left out. Times stay on the source's clock: integer nanoseconds written as
microseconds with three decimals, digit for digit (no float in between).

The events are formatted a chunk of rows at a time, by Arrow's string kernels from the
columns, and written as they are made: memory stays bounded however many kernels there are.
"""

from __future__ import annotations

import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..errors import WorkbenchError
from .manifest import ENV, section
from .assemble.graph_ranges import replayed_ranges
from .readers import compression
from .schema import Trace

# Rows formatted at a time: large enough that Arrow's per-call overhead vanishes, small enough
# that a chunk of long C++ kernel names stays a few megabytes.
_ROWS = 1 << 14


def _template(text: str) -> list[str]:
    """An event's JSON with ``$field`` holes: constants and field names, alternating. Every
    event begins with the separator; the writer drops the very first one."""
    return re.split(r"\$(\w+)", ",\n" + text)


_KERNEL = _template(
    '{"ph":"X","cat":"kernel","name":$name,"pid":$gpu,"tid":$stream,"ts":$ts,"dur":$dur,'
    '"args":{"device":$device,"stream":$stream,"correlation":$correlation,'
    '"grid":[$grid_x,$grid_y,$grid_z],"block":[$block_x,$block_y,$block_z]}}')
# One arrow per kernel, from its launching call to it: an id of its own, as a CUDA graph's
# kernels share their launch's correlation id and a flow id ends at its first "f".
_FLOW = _template(
    '{"ph":"s","id":$flow,"pid":$pid,"tid":$launch_tid,"ts":$launch_ts,"cat":"ac2g","name":"ac2g"},\n'
    '{"ph":"f","id":$flow,"pid":$gpu,"tid":$stream,"ts":$ts,"cat":"ac2g","name":"ac2g","bp":"e"}')
_CPU_OP = _template('{"ph":"X","cat":"cpu_op","name":$name,"pid":$pid,"tid":$launch_tid,"ts":$ts,"dur":$dur}')
_RANGE = _template('{"ph":"X","cat":"user_annotation","name":$name,"pid":$pid,"tid":$tid,"ts":$ts,"dur":$dur}')
_API = _template('{"ph":"X","cat":$kind,"name":$name,"pid":$pid,"tid":$tid,"ts":$ts,"dur":$dur,'
                 '"args":{"correlation":$correlation}}')
_COPY = ('"pid":$gpu,"tid":$stream,"ts":$ts,"dur":$dur,'
         '"args":{"device":$device,"stream":$stream,"correlation":$correlation,"bytes":$bytes}}')
_MEMCPY = _template('{"ph":"X","cat":"gpu_memcpy","name":$kind,' + _COPY)
_MEMSET = _template('{"ph":"X","cat":"gpu_memset","name":"Memset (Device)",' + _COPY)
# Fields that are times (and ``dur``, end - start): integer ns in the columns, microseconds
# in the file.
_TIMES = {"ts": "start", "launch_ts": "launch_start"}


def export_chrome(trace: Trace, path: str | os.PathLike) -> Path:
    """Write ``trace`` as a Chrome trace JSON (gzipped where ``path`` ends in ``.gz``),
    atomically, and return the path."""
    return write_chrome(trace, path)[0]


def write_chrome(trace: Trace, path: str | os.PathLike) -> tuple[Path, int]:
    """:func:`export_chrome`, and how many events the file holds."""
    path = Path(path)
    if not path.parent.is_dir():
        raise WorkbenchError(path, f"cannot write: no directory {path.parent}")
    if path.is_dir():
        raise WorkbenchError(path, "cannot write: is a directory")
    cpu, gpu, is_op = _threads(trace)
    # Kineto puts a device's events on pid = the device index; those pids are moved past
    # every process id where one of them would land on a process of the trace.
    devices = set(gpu["device"].tolist())
    pids = set(cpu["pid"].tolist())
    shift = max(pids) + 1 - min(devices) if devices & pids else 0
    with _replacing(path) as fh:
        fh.write(orjson.dumps(_header(trace, sorted(devices)))[:-1] + b',"traceEvents":[\n')
        out = _Events(fh)
        out.write(*_names(cpu, gpu, shift))
        _write_tables(trace, out, is_op, shift)
        fh.write(b"\n]}\n")
    return path, out.count


@contextmanager
def _replacing(path: Path):
    """A file written beside ``path`` and renamed onto it once complete: a reader (or a crash)
    sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        raise WorkbenchError(path, f"cannot write: {e.strerror or e}") from None
    try:
        with open(fd, "wb", buffering=1 << 20) as fh:
            if path.name.endswith(".gz"):
                # The fastest level: the events repeat a few templates, which it packs well.
                with compression.writer(fh, 1) as gz:
                    yield gz
            else:
                yield fh
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise WorkbenchError(path, f"cannot write: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _header(trace: Trace, devices: list[int]) -> dict:
    """The top-level keys Kineto writes that its reader takes the environment from."""
    env = section(trace.meta, ENV)
    head: dict = {"schemaVersion": 1, "traceName": _utf8(str(trace.label)), "displayTimeUnit": "ms"}
    if isinstance(env.get("gpu"), str) and env["gpu"]:
        head["deviceProperties"] = [{"id": d, "name": _utf8(env["gpu"])} for d in devices if d >= 0]
    for key in ("cuda_driver_version", "cuda_runtime_version", "cupti_version"):
        if isinstance(env.get(key), (int, str)):
            head[key] = env[key]
    return head


def _utf8(text: str) -> str:
    """``text`` as JSON can hold it: a lone surrogate (a file name's undecodable byte) becomes
    ``?``, the rest stays as it was."""
    return text.encode("utf-8", "replace").decode("utf-8")


class _Events:
    """The ``traceEvents`` array being written: every event but the first after a separator."""

    def __init__(self, fh):
        self.fh, self.count, self.first = fh, 0, True

    def write(self, data, n: int) -> None:
        if not n:
            return
        view = memoryview(data)
        if self.first:
            view, self.first = view[2:], False
        self.fh.write(view)
        self.count += n

    def write_rows(self, template: list[str], rows: dict, names: dict) -> None:
        """Writes ``rows`` (column -> array) as events of ``template``."""
        import pyarrow as pa

        n = len(next(iter(rows.values())))
        if not n:
            return
        parts = [pa.scalar(p, pa.large_string()) if i % 2 == 0 else _field(p, rows, names)
                 for i, p in enumerate(template)]
        text = _join(*parts)
        offsets = np.frombuffer(text.buffers()[1], np.int64)[text.offset : text.offset + n + 1]
        per_row = sum(c.count('{"ph":') for c in template[::2])  # a flow is two events
        self.write(memoryview(text.buffers()[2])[offsets[0] : offsets[-1]], n * per_row)


def _field(name: str, rows: dict, names: dict):
    """One hole's text per row: a JSON string, a time in microseconds, or an integer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name in names:
        codes = rows[name]
        return names[name].take(pa.array(np.where(codes < 0, len(names[name]) - 1, codes)))
    if name == "dur":
        return _microseconds(rows["end"] - rows["start"])
    if name in _TIMES:
        return _microseconds(rows[_TIMES[name]])
    return pc.cast(pa.array(rows[name]), pa.large_string())


def _microseconds(ns: np.ndarray):
    """Integer nanoseconds as microseconds with three decimals, exactly."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mag = np.abs(ns)
    whole = pc.cast(pa.array(mag // 1000), pa.large_string())
    frac = pc.utf8_lpad(pc.cast(pa.array(mag % 1000), pa.large_string()), 3, "0")
    text = _join(whole, pa.scalar(".", pa.large_string()), frac)
    neg = ns < 0
    if neg.any():
        text = _join(pa.array(np.where(neg, "-", ""), pa.large_string()), text)
    return text


def _join(*parts):
    """The texts of ``parts`` (arrays, or scalars repeated) joined row by row. Large strings
    throughout: a chunk's text may pass the 2 GiB a plain string array holds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(*parts, pa.scalar("", pa.large_string()))


class _Table:
    """Columns of one table for the export, as arrays; names as codes into their categories,
    each category once as a JSON string (the last entry, ``""``, is a missing name's)."""

    def __init__(self, trace: Trace, table: str, cols: list[str], rename: dict | None = None):
        import pyarrow as pa

        df = trace.columns(table, cols)
        self.rows, self.cols, self.names = len(df), {}, {}
        for c in cols:
            s = df[c]
            if isinstance(s.dtype, pd.CategoricalDtype):
                self.cols[c] = s.cat.codes.to_numpy()
                cats = [(rename or {}).get(c, str)(str(v)) for v in s.cat.categories] + [""]
                text = [orjson.dumps(_utf8(v)).decode() for v in cats]
                self.names[c] = pa.array(text, pa.large_string())
            else:
                self.cols[c] = s.to_numpy()

    def chunks(self, mask: np.ndarray | None = None):
        """The rows ``_ROWS`` at a time (only those ``mask`` keeps, where given)."""
        for lo in range(0, self.rows, _ROWS):
            rows = {c: a[lo : lo + _ROWS] for c, a in self.cols.items()}
            if mask is not None:
                keep = mask[lo : lo + _ROWS]
                rows = {c: a[keep] for c, a in rows.items()}
            yield rows


def _threads(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The (pid, tid) of every CPU thread with events, the (device, stream) of every GPU
    stream with events, and which kernels are a CPU-only trace's work units (on their thread)."""
    kinds = trace.columns("kernels", ["kind"])["kind"]
    is_op = (kinds == "cpu_op").to_numpy()
    ops = trace.columns("kernels", ["pid", "launch_tid"]).rename(columns={"launch_tid": "tid"})[is_op]
    cpu = [trace.columns(t, ["pid", "tid"]) for t in ("ranges", "api")] + [ops]
    kern = trace.columns("kernels", ["device", "stream"])[~is_op]
    gpu = [kern] + [trace.columns(t, ["device", "stream"]) for t in ("memcpy", "memset")]
    return (*(pd.concat([f.drop_duplicates() for f in fs]).drop_duplicates().sort_values(list(fs[0].columns))
              for fs in (cpu, gpu)), is_op)


def _names(cpu: pd.DataFrame, gpu: pd.DataFrame, shift: int) -> tuple[bytes, int]:
    """Kineto's metadata events: a name for every process and thread the events are on."""
    events = [{"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": f"process {p}"}}
              for p in cpu["pid"].unique().tolist()]
    events += [{"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": f"thread {t}"}}
               for p, t in cpu.itertuples(index=False)]
    events += [{"ph": "M", "name": "process_name", "pid": d + shift, "tid": 0, "args": {"name": f"GPU {d}"}}
               for d in gpu["device"].unique().tolist()]
    events += [{"ph": "M", "name": "thread_name", "pid": d + shift, "tid": s, "args": {"name": f"stream {s}"}}
               for d, s in gpu.itertuples(index=False)]
    return b"".join(b",\n" + orjson.dumps(e) for e in events), len(events)


def _correlations(trace: Trace):
    """Correlation ids as the export writes them, by (pid, id). Kineto's reader joins a kernel
    to its launch by id alone (its kernels have no process); where ids repeat across
    processes (an nsys capture of several), each process's ids are moved into a range of
    their own, past every id there is, so every kernel still finds its own launch and an id
    that found none finds none."""
    a = trace.columns("api", ["pid", "correlation"])
    a = a[a["correlation"] >= 0].drop_duplicates()
    if a["correlation"].is_unique:
        return lambda pid, corr: corr
    pids = np.sort(a["pid"].unique())
    span = 1 + max(int(trace.columns(t, ["correlation"])["correlation"].max()) if trace.rows(t) else 0
                   for t in ("api", "kernels", "memcpy", "memset"))

    def recode(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        rank = np.minimum(np.searchsorted(pids, pid), len(pids) - 1)
        return np.where((corr >= 0) & (pids[rank] == pid), (rank + 1) * span + corr, corr)

    return recode


_KERNEL_COLS = ["name", "start", "end", "device", "stream", "pid", "correlation", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z", "launch_tid", "launch_start"]
_COPY_COLS = ["start", "end", "device", "stream", "pid", "correlation", "bytes"]


def _write_tables(trace: Trace, out: _Events, is_op: np.ndarray, shift: int) -> None:
    """Every table's events, one table after the other (each one's columns let go after it)."""
    recode = _correlations(trace)
    k = _Table(trace, "kernels", _KERNEL_COLS)
    flow = 0
    for rows in k.chunks(~is_op if is_op.any() else None):
        rows["gpu"] = rows["device"] + shift
        rows["correlation"] = recode(rows["pid"], rows["correlation"])
        out.write_rows(_KERNEL, rows, k.names)
        launched = rows["launch_tid"] >= 0
        rows = {c: v[launched] for c, v in rows.items()}
        rows["flow"] = np.arange(flow + 1, flow + 1 + len(rows["gpu"]))
        flow += len(rows["gpu"])
        out.write_rows(_FLOW, rows, k.names)
    if is_op.any():
        for rows in k.chunks(is_op):
            out.write_rows(_CPU_OP, rows, k.names)
    del k
    r = _Table(trace, "ranges", ["name", "start", "end", "pid", "tid"])
    replayed = replayed_ranges(trace)
    for rows in r.chunks(~replayed if replayed.any() else None):
        out.write_rows(_RANGE, rows, r.names)
    del r
    a = _Table(trace, "api", ["name", "kind", "start", "end", "pid", "tid", "correlation"],
               rename={"kind": lambda kind: "cuda_driver" if kind == "driver" else "cuda_runtime"})
    for rows in a.chunks():
        rows["correlation"] = recode(rows["pid"], rows["correlation"])
        out.write_rows(_API, rows, a.names)
    del a
    for table, template, extra in (("memcpy", _MEMCPY, ["kind"]), ("memset", _MEMSET, [])):
        m = _Table(trace, table, _COPY_COLS + extra)
        for rows in m.chunks():
            rows["gpu"] = rows["device"] + shift
            rows["correlation"] = recode(rows["pid"], rows["correlation"])
            out.write_rows(template, rows, m.names)
