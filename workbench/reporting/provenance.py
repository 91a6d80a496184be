"""Where a report's traces came from: each trace's recorded environment (hardware, versions,
revisions), its capture command, profiler and content hash. Everything is read from the traces'
manifests; nothing here reads the machine the report is made on.
"""

from __future__ import annotations

import shlex

from ..trace.manifest import ENV, SOURCE, lookup, section, source_format
from .inputs import Input, Sweep
from .model import Code, Mixed, Table

NOT_RECORDED = "not recorded"


def _first(meta: dict, *paths) -> str | None:
    for p in paths:
        v = lookup(meta, *p)
        if v not in (None, "", [], {}):
            return _cuda_version(v) if p[-1] in ("cuda_runtime_version", "cuda_driver_version") else str(v)
    return None


def _cuda_version(v) -> str:
    """CUPTI/nsys report CUDA versions as 13000 -> ``13.0``."""
    if isinstance(v, int) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def command(meta: dict) -> str:
    cmd = lookup(meta, "capture", "command")
    if cmd is None:
        cmd = lookup(meta, "source", "command")
    if cmd is None:
        return ""
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    return str(cmd)


def tool(meta: dict) -> str:
    tool = lookup(meta, "source", "tool")
    ver = lookup(meta, "source", "tool_version")
    if tool and ver:
        return f"{tool} {ver}"
    return str(tool or ver or NOT_RECORDED)


# Rows of "Hardware, Environment and Revisions": label -> where to look (first hit wins).
NSYS = "Nsight Systems (ran the capture)"
PROFILER = "Profiler (wrote the trace file)"
ENV_ITEMS: list[tuple[str, tuple]] = [
    ("GPU", (("env", "gpu"), ("capture", "gpu"))),
    ("Driver", (("env", "driver"), ("env", "driver_version"))),
    ("CUDA (torch build)", (("env", "cuda"), ("env", "cuda_version"), ("env", "cuda_runtime_version"))),
    ("CUDA (driver API)", (("env", "cuda_driver_version"),)),
    ("torch", (("env", "torch"), ("env", "torch_version"))),
    ("triton", (("env", "triton"), ("env", "triton_version"))),
    # Two different things, labelled so: the nsys that ran the capture (`nsys --version`) and
    # the tool and version the trace file says wrote it (an export can be a later nsys).
    (NSYS, (("env", "nsys"), ("env", "nsys_version"))),
    (PROFILER, ()),  # from source.tool / tool_version
    ("Python", (("env", "python"), ("env", "python_version"))),
    ("OS", (("env", "os"), ("env", "platform"))),
    ("Engine", ()),  # from capture.engine and capture.engine_info
    ("Engine git revision", (("env", "engine_git"), ("env", "engine_revision"), ("capture", "engine_revision"))),
    # A capture of a user's command records the workbench's revision as ``workbench_git`` and the
    # user's working directory's as ``git`` (capturing/env.py); a workload capture has ``git`` only.
    ("Workbench git revision", (("env", "workbench_git", "revision"), ("env", "git", "revision"),
                                ("env", "workbench_revision"))),
]
PROGRAM_GIT = "Program git revision (its working directory)"
# The env keys a row above shows; every other key a manifest records gets a row of its own.
_ENV_USED = {p[1] for _, paths in ENV_ITEMS for p in paths if p[0] == "env" and len(p) > 1}


def _engine(meta: dict) -> str | None:
    kind = lookup(meta, "capture", "engine")
    if kind is None:
        return None
    info = lookup(meta, "capture", "engine_info")
    extra = ""
    if isinstance(info, dict):
        keep = [f"{k}={info[k]}" for k in sorted(info) if k not in ("engine", "build_key", "artifacts")
                and isinstance(info[k], (str, int, float, bool))]
        extra = f" ({', '.join(keep)})" if keep else ""
    return f"{kind}{extra}"


def env_value(label: str, paths: tuple, inp: Input) -> str | None:
    meta = inp.meta
    if label == PROFILER:
        return tool(meta)
    if label == "Engine":
        return _engine(meta)
    v = _first(meta, *paths)
    if label == NSYS and v is None and "nsight" in str(lookup(meta, "source", "tool") or "").lower():
        v = lookup(meta, "source", "tool_version")
        v = None if v is None else str(v)
    if label == PROGRAM_GIT:  # only where the workbench's own is recorded apart
        v = _first(meta, ("env", "git", "revision")) if lookup(meta, "env", "workbench_git") is not None else None
    if label == "Engine git revision" and v is None and lookup(meta, "capture", "engine") is not None:
        # the engines live in the workbench's repository
        v = _first(meta, ("env", "workbench_git", "revision"), ("env", "git", "revision"))
        label = "Workbench git revision"
    if label in ("Workbench git revision", PROGRAM_GIT) and v is not None:
        which = "git" if label == PROGRAM_GIT or lookup(meta, "env", "workbench_git") is None else "workbench_git"
        git = lookup(meta, "env", which)
        if isinstance(git, dict) and git.get("dirty"):
            v += " (with uncommitted changes)"
    return v


def _merge_cells(values: list[tuple[str, str | None]]) -> list:
    """One value when every trace agrees, else ``role: value`` for each."""
    shown = [(role, v if v is not None else NOT_RECORDED) for role, v in values]
    distinct = {v for _, v in shown}
    if len(distinct) == 1:
        return [Code(shown[0][1])] if shown[0][1] != NOT_RECORDED else [NOT_RECORDED]
    parts: list = []
    for i, (role, v) in enumerate(shown):
        if i:
            parts.append("; ")
        parts.append(f"{role}: ")
        parts.append(Code(v) if v != NOT_RECORDED else NOT_RECORDED)
    return [Mixed(tuple(parts))]


def _show(key: str, v) -> str | None:
    import json

    if v in (None, "", [], {}):
        return None
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    if key.endswith("_version") and isinstance(v, int):
        return _cuda_version(v)
    return str(v)


def environment(inputs: list[Input]) -> Table:
    from ..vocabulary import VERSION

    rows = []
    items = ENV_ITEMS + ([(PROGRAM_GIT, ())] if any(lookup(i.meta, "env", "workbench_git") is not None
                                                    for i in inputs) else [])
    for label, paths in items:
        vals = [(i.role, env_value(label, paths, i)) for i in inputs]
        rows.append([label, *_merge_cells(vals)])
    extra = sorted({k for i in inputs for k in section(i.meta, ENV) if k not in _ENV_USED})
    for k in extra:
        vals = []
        for i in inputs:
            v = section(i.meta, ENV).get(k)
            vals.append((i.role, _show(k, v)))
        rows.append([Code(k), *_merge_cells(vals)])
    rows.append(["Report generator", Code(f"workbench {VERSION}")])
    note = "From each trace's manifest (recorded at capture time); one value when all traces agree."
    if any(lookup(i.meta, "capture", "engine") is not None for i in inputs):
        note += (" The engines are the workbench's own code, so their revision is the workbench's; the model code"
                 " a workload runs may be a library's (its version, where recorded, is in the engine info).")
    return Table(["Item", "Value"], rows, note=note)


def provenance(inputs: list[Input], sweep: Sweep | None) -> Table:
    rows = []
    for i in inputs:
        src = section(i.meta, SOURCE)
        rows.append([i.role, Code(i.name), Code(str(src.get("file", i.name))), Code(source_format(i.meta, "?")),
                     Code(tool(i.meta)), Code(i.hash_kind), Code(i.sha256)])
    if sweep is not None:
        rows.append(["sweep", Code(sweep.source), Code(sweep.source), Code("json"), "", Code("file sha256"),
                     Code(sweep.sha256)])
    return Table(["Role", "Trace", "Captured file", "Format", "Tool", "Hash", "SHA-256"], rows)
