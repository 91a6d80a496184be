"""Importing a trace set: capture files, stored traces, folders or globs become the members of
a named set, each imported by a task (:mod:`workbench.sets.executors`) straight into the set's
hidden directory; the driver gives the members their ranks and names, writes the set's
manifest and publishes the set whole (``store.sets``). A member that fails to import fails
the set, and nothing of it is left.

Roles: ``rank`` is the trace's own (``distributedInfo``, which torch.profiler writes when
torch.distributed is initialized); where no member of a run names its rank, members are
ranked in the order given (files in that order, the parts of a split capture in (device,
process) order). ``local_rank`` is the trace's own, else the one GPU its kernels ran on (-1:
none known); ``host`` the capture's host name (``""``: not recorded); ``run_id`` and
``variant`` what the caller says (``run_id="{parent}"``: each file's folder name), else a
workbench capture's variant.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from ..errors import WorkbenchError
from ..textfmt import natural_key
from .executors import Executor, executor as as_executor
from ..trace.manifest import CAPTURE, COUNTS, DISTRIBUTED, ENV, NAME, SET, SOURCE, section, work_units
from ..trace.options import DEFAULT, ImportOptions
from ..trace.store import is_trace_dir, safe_name
from .store import ROLES, discard, new_set_dir, publish_set

PARENT = "{parent}"


def import_set(name: str, files, root: str | os.PathLike | None = None, *, executor: Executor | str | None = None,
               split: str = "auto", run_id: str = "", variant: str = "", overwrite: bool = False,
               options: ImportOptions = DEFAULT) -> Path:
    """Import ``files`` (capture files, stored trace directories, folders of them, glob
    patterns) as the trace set ``name`` under ``root`` and return its directory. ``split``:
    how a capture holding several processes or GPUs is cut into members (see
    :mod:`workbench.sets.split`). Raises :class:`WorkbenchError` for no files, a file that
    does not import, two members of one rank in a run, or a set of that name (unless
    ``overwrite``)."""
    from .split import check_split

    check_split(split)  # before any task runs
    sources = expand(files)
    ex = as_executor(executor)
    tmp, final = new_set_dir(name, root, overwrite)
    try:
        task = ex.task_options(options, len(sources))
        found = ex.map(import_member, [(str(src), str(tmp), i, split, task.threads, task.memory)
                                       for i, src in enumerate(sources)])
        members = _ranked([dict(m, run_id=_run_id(run_id, m["source_path"]), variant=variant or m["variant"])
                           for parts in found for m in parts])
        for m in members:
            _rename(tmp, m.pop("part"), m, name)
            m.pop("source_path")
        return publish_set(tmp, final, {"kind": "trace_set", "members": members, "split": split,
                                        "sources": [str(s) for s in sources]}, overwrite)
    except BaseException:
        discard(tmp)
        raise


def expand(files) -> list[Path]:
    """The sources ``files`` names, in order: a glob pattern's matches and a folder's trace
    files and stored traces in natural order (``rank-2`` before ``rank-10``), each once."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    out: list[Path] = []
    for f in files:
        text = os.fspath(f)
        if glob.has_magic(text) and not Path(text).exists():
            found = sorted(glob.glob(text), key=natural_key)
            if not found:
                raise WorkbenchError(text, "no file matches this pattern")
            out += [Path(p) for p in found]
        elif Path(text).is_dir() and not is_trace_dir(Path(text)):
            inside = sorted((p for p in Path(text).iterdir() if not p.name.startswith(".")
                             and (p.is_file() or is_trace_dir(p))), key=lambda p: natural_key(p.name))
            if not inside:
                raise WorkbenchError(text, "the folder holds no files or stored traces")
            out += inside
        elif Path(text).exists():
            out.append(Path(text))
        else:
            raise WorkbenchError(text, "no such file, folder or stored trace")
    # Absolute: a task may run in another working directory (a Ray worker's).
    seen: set[Path] = set()
    unique = [p.absolute() for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]
    if not unique:
        raise WorkbenchError("trace set", "no files given")
    return unique


def import_member(src: str, tmp: str, index: int, split: str, threads: int | None, memory: str) -> list[dict]:
    """The task: import one source (split where it holds several ranks) into ``tmp``, each part
    stored as ``part-<index>-<j>``; returns each part's record (roles as far as the trace
    knows them, counts). Runs in a worker: opens and writes only paths."""
    from ..trace.assemble import build
    from ..trace.readers import read
    from .split import split as split_parts
    from ..trace.store import load, save

    options = ImportOptions(threads=threads, memory=memory)
    path = Path(src)
    stored = is_trace_dir(path)  # a stored trace is a member as it is
    if stored:
        parts = [({}, None)]
    else:
        options.apply()
        parts = split_parts(read(path, options), split, src)
    records = []
    for j, (part, raw) in enumerate(parts):
        parts[j] = (part, None)  # each part's raw tables go once it is built
        trace = load(path) if stored else build(raw, src, options)
        if not stored:
            trace.meta.setdefault(SOURCE, {}).update({"file": path.name, "bytes": path.stat().st_size})
            if part:
                trace.meta[SOURCE]["part"] = part
        name = f"part-{index:05d}-{j:03d}"
        save(trace, name, tmp, options=options)
        records.append({"part": name, "source": path.name, "source_path": src, "pid": part.get("pid", -1),
                        "device": part.get("device", -1), **_roles(trace.meta, _one_device(trace)),
                        "kernels": int(section(trace.meta, COUNTS)["kernels"]), "work_units": work_units(trace.meta)})
    return records


def _one_device(trace) -> int:
    """The GPU all of a trace's kernels ran on (-1: none, or several)."""
    import numpy as np

    devices = np.unique(trace.columns("kernels", ["device"])["device"].to_numpy())
    return int(devices[0]) if len(devices) == 1 and devices[0] >= 0 else -1


def _roles(meta: dict, device: int) -> dict:
    """What a trace's manifest tells of its place in the job (-1 / ``""``: not known)."""
    dist = section(meta, DISTRIBUTED)
    rank = dist.get("rank")
    local = dist.get("local_rank", device)
    variant = section(meta, CAPTURE).get("variant")
    if isinstance(variant, dict):
        variant = ",".join(f"{k}={v}" for k, v in sorted(variant.items()))
    return {"rank": int(rank) if isinstance(rank, int) else -1,
            "local_rank": int(local) if isinstance(local, int) else -1,
            "host": str(section(meta, ENV).get("hostname") or ""), "variant": str(variant or "")}


def _run_id(template: str, src: str) -> str:
    return template.replace(PARENT, Path(src).resolve().parent.name)


def _ranked(members: list[dict]) -> list[dict]:
    """The members with their ranks (see the module docstring) and names, checked: one
    member per rank in each run and variant."""
    groups: dict[tuple, list[dict]] = {}
    for m in members:
        groups.setdefault((m["run_id"], m["variant"]), []).append(m)
    for (run, variant), group in groups.items():
        known = [m["rank"] >= 0 for m in group]
        if any(known) and not all(known):
            unknown = dict.fromkeys(m["source"] for m, k in zip(group, known) if not k)
            raise WorkbenchError(_where(run, variant), "some members name their rank and others do not: "
                                 f"{', '.join(unknown)} do not")
        if not any(known):
            for i, m in enumerate(group):
                m["rank"] = i
        by_rank: dict[int, str] = {}
        for m in group:
            if m["rank"] in by_rank:
                raise WorkbenchError(_where(run, variant), f"duplicate rank {m['rank']}: {by_rank[m['rank']]} and "
                                     f"{m['source']}")
            by_rank[m["rank"]] = m["source"]
    several = len(groups) > 1
    for m in members:
        parts = [m["run_id"], m["variant"]] if several else []
        m["member"] = safe_name("--".join([p for p in parts if p] + [f"rank{m['rank']}"]), "member")
    names = [m["member"] for m in members]
    if len(set(names)) < len(names):
        raise WorkbenchError("trace set", "two members would have the same name: make their run ids or variants "
                             "differ in letters and digits")
    return sorted(members, key=lambda m: (m["run_id"], m["variant"], m["rank"]))


def _where(run: str, variant: str) -> str:
    return "trace set" + (f" run {run!r}" if run else "") + (f" variant {variant!r}" if variant else "")


def _rename(tmp: Path, part: str, member: dict, set_name: str) -> None:
    """Give a stored part its member name: its directory and its manifest's ``name``, with its
    roles in the set (a member opened alone still knows its rank)."""
    from ..trace.store.read import read_manifest
    from ..trace.store.write import replace_manifest

    path = tmp / member["member"]
    os.rename(tmp / part, path)
    meta = read_manifest(path)
    meta[NAME] = member["member"]
    meta[SET] = {"name": set_name, **{k: member[k] for k in ROLES}}
    replace_manifest(path, meta, doing="store the set member's roles")
