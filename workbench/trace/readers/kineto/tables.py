"""The parts of a file gathered into its tables, in file order: names coded anew, B/E
ranges paired across parts, and at the end the frames, a CPU-only trace's work units, the
ranges of a trace without annotations (its nn.Module events, thinned) and the meta."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ....errors import TraceFormatError
from ...assemble.nesting import nest, thread_blocks
from ...manifest import DISTRIBUTED, ENV, SOURCE
from ...names import constant, short_names
from ...options import ImportOptions
from ...schema import RawTables
from . import columns as col
from .columns import Columns, Interner
from .events import NAMED, OTHER_GPU, holds_gpu
from .modules import thin


class Tables:
    """Every table's columns, part after part, and the B/E ranges still open."""

    def __init__(self, where, options: ImportOptions):
        self.where = where
        self.options = options
        self.names = {t: Interner() for t in NAMED}
        self.cols = {t: Columns() for t in (*NAMED, "memset")}
        self.open_b: dict[tuple[int, int], list] = {}
        self.counts = {"events": 0, **dict.fromkeys(OTHER_GPU, 0)}
        self.gpu_events = False

    def add(self, part: tuple):
        """Appends a part (see ``events``), its names coded anew in file order."""
        rows, begin_end, strings, counts = part
        if not self.gpu_events and holds_gpu(rows):
            # cpu_ops are work units only where there are no GPU events: from now on they
            # are not kept (in a GPU trace they are the most rows, and most of the memory).
            self.gpu_events = True
            self.cols["cpu_ops"] = Columns()
        for table, cols in rows.items():
            if table == "cpu_ops" and self.gpu_events:
                continue
            name = NAMED.get(table)
            if name in cols:
                cols[name] = self.names[table].recode(cols[name], strings[table])
            self.cols[table].add(**cols)
        if begin_end:
            self._begin_end(begin_end)
        for k, v in counts.items():
            self.counts[k] += v

    def _begin_end(self, events: list):
        """Pairs B/E user_annotation events, ``(ph, name, pid, tid, ts)``, per thread into ranges."""
        where, open_b = self.where, self.open_b
        names, starts, ends, pids, tids = [], [], [], [], []
        for ph, n, pid, tid, ts in events:
            try:
                key = (col.ident(pid), col.ident(tid))
            except TypeError as err:
                raise TraceFormatError(where, f"range begin/end: {err}") from None
            if not isinstance(ts, (int, float)) or isinstance(ts, bool):
                raise TraceFormatError(where, f"range ts is not a number: {str(ts)[:60]!r}")
            ts = int(col.ns(col.num([ts], "range ts", where))[0])
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
            self.cols["ranges"].add(
                name=self.names["ranges"].codes(names), start=np.array(starts, np.int64),
                end=np.array(ends, np.int64), pid=np.array(pids, np.int64), tid=np.array(tids, np.int64),
            )

    def raw(self, header: dict) -> RawTables:
        """The tables and meta; raises for a B/E range left open."""
        where = self.where
        for (pid, tid), stack in self.open_b.items():
            if stack:
                name, ts = stack[-1]
                raise TraceFormatError(where, f"range {name[:80]!r} begun at {ts} ns on thread {pid}/{tid} never ends")
        kern, api, rng, ops, mcpy, mset = map(self.cols.get, ("kernels", "api", "ranges", "cpu_ops", "memcpy", "memset"))
        names, options = self.names, self.options
        tables = {}
        if kern.pieces:
            k = kern.frame({"name": names["kernels"]}, options)
            k["short_name"] = short_names(k["name"])
            # Categories of dtype "string", as the column of str it replaces had once typed.
            # No pid: Kineto puts the device there; the launch join fills the process.
            k["kind"] = constant("kernel", len(k), "string")
            tables["kernels"] = k
        if api.pieces:
            a = api.frame({"name": names["api"]}, options)
            a["kind"] = pd.Categorical.from_codes(a["kind"].to_numpy(), categories=["runtime", "driver"])
            tables["api"] = a
        if rng.pieces:
            r = rng.frame({"name": names["ranges"]}, options)
            r["domain"] = constant("record_function", len(r), "string")
            tables["ranges"] = r
        modules = {}
        if self.cols["modules"].pieces:
            modules = {"module_events": len(self.cols["modules"]), "ranges_from": "user_annotation events"}
            if "ranges" not in tables:
                # A trace without annotations: its modules are the ranges (with them, the
                # ranges are as they would be without module events).
                tables["ranges"] = r = _module_ranges(self.cols["modules"].frame({"name": names["modules"]}, options))
                modules.update(ranges_from="nn.Module events", module_events_kept=len(r),
                               module_events_dropped=modules["module_events"] - len(r))
        if mcpy.pieces:
            tables["memcpy"] = mcpy.frame({"kind": names["memcpy"]}, options)
        if mset.pieces:
            tables["memset"] = mset.frame({}, options)
        if not self.gpu_events and ops.pieces:
            tables["kernels"] = _cpu_work_units(ops.frame({"name": names["cpu_ops"]}, options))
        meta = _meta(header, self.counts, self.gpu_events)
        meta[SOURCE].update(modules)
        return RawTables(tables, meta)


# The CPU ops torch.compile's runtime wraps compiled code in: not work of their own, so the
# work units are the ops inside them (generated kernels, which record themselves, and library
# calls), as they would be in eager code.
_COMPILED_WRAPPERS = re.compile(r"^(?:Torch-Compiled Region: |## .* ##$|TorchDynamo Cache Lookup$|Pregraph bytecode$"
                                r"|AOTDispatcher Runtime Wrapper|CompiledFunction$)")


def _cpu_work_units(ops: pd.DataFrame) -> pd.DataFrame:
    """A CPU-only trace's work units: its top-level cpu_op events (each launches itself), a
    compiled region's wrappers seen through."""
    cats = ops["name"].cat.categories
    wrapper = np.array([bool(_COMPILED_WRAPPERS.match(str(c))) for c in cats], dtype=bool)
    if wrapper.any():
        codes = ops["name"].cat.codes.to_numpy()
        ops = ops[~wrapper[np.maximum(codes, 0)] | (codes < 0)]
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


def _module_ranges(modules: pd.DataFrame) -> pd.DataFrame:
    """The ranges of a trace's nn.Module events: those ``modules.thin`` keeps, in file order."""
    r = modules[thin(modules)].reset_index(drop=True)
    r["name"] = r["name"].cat.remove_unused_categories()
    r["domain"] = constant("nn.Module", len(r), "string")
    return r


def _meta(header: dict, counts: dict, gpu_events: bool) -> dict:
    """What the header tells of the environment, and what the reader counted."""
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
    other = {kind: counts[kind] for kind in OTHER_GPU if counts[kind]}
    meta = {
        SOURCE: {"format": "kineto", "tool": "torch.profiler", "schema_version": header.get("schemaVersion"),
                 "events": counts["events"], "gpu_user_annotations_skipped": counts["gpu_user_annotation"],
                 "other_gpu_events": other, "work_units": "kernel" if gpu_events else "cpu_op"},
        ENV: {k: v for k, v in env.items() if v},
    }
    if other:
        meta[SOURCE]["note"] = _other_gpu_note(other, gpu_events)
    if isinstance(dist, dict):
        meta[DISTRIBUTED] = {k: v for k, v in dist.items() if isinstance(v, (int, str))}
    return meta


def _other_gpu_note(other: dict[str, int], gpu_events: bool) -> str:
    """The GPU activity a trace holds that makes no rows, in a line (a trace with none of
    kernels, copies and sets is counted in CPU ops, and the line says so)."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in other.items())
    if gpu_events:
        return f"GPU activity not imported: {kinds}"
    return f"no kernel events, so the work units are CPU ops; GPU activity not imported: {kinds}"
