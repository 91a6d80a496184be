"""Capture of a workload variant that runs as several ranks, stored as one trace set.

A variant whose ``tp`` is more than 1 is a job of ``tp`` processes (one per GPU on CUDA,
``nccl``; ``gloo`` ranks on a CPU), started by :func:`workbench.capturing.distributed.launch`. Each rank
times its engine and records its own decode steps (``rank_session.py``):

* ``torch``: each rank's torch.profiler writes its own Kineto trace; one member each.
* ``nsys``: ``nsys profile`` runs the launcher and so every rank, its child; the one export
  is cut into one member per process (:mod:`workbench.sets.split`, ``process``), each given
  to its rank by the pid the rank reported.

The set ``<root>/<name>/`` holds member ``rank<r>`` per rank with roles ``rank``,
``local_rank``, ``host`` and ``variant``; each member's manifest is a single capture's
(``capture``, ``env``, ``timing`` and ``outputs`` of that rank; ``distributed``: rank, local
rank, world size, communication backend, pid, the NCCL / gloo settings it ran with), and
``set.json`` adds ``capture`` (the job: workload, variant, engine, backend, ranks, command)
and ``timing`` (each rank's median decode step). Everything is written in a hidden directory
and published whole: a failed rank is one line (the first rank to fail, by its own error;
the others are stopped) and no set.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

from ..errors import WorkbenchError
from .rank_session import kineto_path, launch_ranks, result_path


def ranks(variant: dict) -> int:
    """How many ranks a resolved variant runs as: its ``tp`` (1 without one)."""
    return int(variant.get("tp", 1))


def check(variant: dict, engine: str, device: str) -> None:
    """Refuse, before any work, a job this machine or engine cannot run."""
    from .distributed import check_world

    check_world(ranks(variant), device)
    if engine == "tensorrt":
        raise WorkbenchError("engine tensorrt", "runs one process: capture tp=1")


def capture_job(spec):
    """Run the job, record every rank and store the set ``spec.name``; returns the stored
    :class:`~workbench.TraceSet`. ``spec`` is a checked :class:`~workbench.capturing.CaptureSpec`."""
    from ..sets.store import discard, new_set_dir, publish_set
    from ..sets.trace_set import open_set

    variant, backend, argv = spec.variant, spec.backend, spec.command
    check(variant, spec.engine, spec.device)
    world = ranks(variant)
    tmp, final = new_set_dir(spec.name, spec.root, spec.overwrite)  # refuses a name in use before the job runs
    try:
        with tempfile.TemporaryDirectory(prefix="workbench-job-") as work:
            workdir = Path(work)
            session = {**spec.session(), "backend": backend, "world": world}
            spec_path = workdir / "spec.json"
            spec_path.write_text(json.dumps(session))
            if backend == "nsys":
                from .nsys_backend import profile_module, profiled_export

                done, tool_cmd = profile_module(["workbench.capturing.rank_session", "launch", str(spec_path),
                                                 str(workdir)], workdir)
                if not any(result_path(workdir, r).exists() for r in range(world)):
                    profiled_export(done, workdir)  # nsys failed before any rank ran: its own line
                results = _results(workdir, world, [done.returncode] * world, set())
                traces = _split(profiled_export(done, workdir), results)
                raws = [[workdir / "capture.nsys-rep"] if r == 0 else [] for r in range(world)]
            else:
                from ..trace import import_file

                tool_cmd = None
                results = _results(workdir, world, *launch_ranks(spec_path, workdir, session))
                traces = [import_file(kineto_path(workdir, r)) for r in range(world)]
                raws = [[kineto_path(workdir, r)] for r in range(world)]
            job = {"workload": spec.workload, "variant": variant, "engine": spec.engine, "backend": backend,
                   "ranks": world, "steps": spec.steps, "repeats": spec.repeats, "warmup": spec.warmup, "command": argv,
                   "command_line": shlex.join(argv), "tool_command": tool_cmd, "process_argv": list(sys.orig_argv)}
            members = [_store(trace, res, job, tmp, final.name, raws[r] if spec.keep_raw else None)
                       for r, (trace, res) in enumerate(zip(traces, results))]
        timing = {m["member"]: res["timing"].get("decode_step_ms", {}).get("median")
                  for m, res in zip(members, results)}
        publish_set(tmp, final, {"kind": "trace_set", "members": members, "split": "process" if backend == "nsys"
                                 else "none", "sources": sorted({m["source"] for m in members}), "capture": job,
                                 "timing": {"decode_step_ms_median": timing}}, spec.overwrite)
    except BaseException:
        discard(tmp)
        raise
    return open_set(final)


def _results(workdir: Path, world: int, codes: list[int], stopped: set[int]) -> list[dict]:
    """Every rank's result; else one line: the rank that failed first (the others' errors, a
    peer that closed its connection, follow from it), by its error, or where a rank wrote
    none, its exit status and last log line (a rank not stopped because another failed)."""
    found = {}
    for r in range(world):
        path = result_path(workdir, r)
        found[r] = json.loads(path.read_text()) if path.exists() else None
    failed = sorted((found[r]["error"].get("at", 0.0), r) for r in range(world)
                    if found[r] is not None and "error" in found[r])
    if failed:  # the first to fail: the others failed because it left
        r = failed[0][1]
        raise WorkbenchError(f"rank {r}: {found[r]['error']['where']}", found[r]["error"]["problem"])
    missing = [r for r in range(world) if found[r] is None]
    if missing:
        r = next((r for r in missing if r not in stopped), missing[0])
        log = workdir / f"rank{r}.log"
        tail = (log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []) or [""]
        raise WorkbenchError(f"rank {r}", f"exit {codes[r]} without a result: {tail[0]}"[:400])
    return [found[r] for r in range(world)]


def _split(sqlite: Path, results: list[dict]) -> list:
    """The export cut into one trace per process that ran kernels, in rank order: each part is
    the rank that reported its pid; where pids do not match (another pid namespace), the
    parts in (GPU, pid) order, which is rank order when rank r runs on GPU r."""
    from ..trace.assemble import build
    from ..trace.manifest import SOURCE
    from ..trace.options import DEFAULT
    from ..trace.readers import read
    from ..sets.split import split

    DEFAULT.apply()
    parts = split(read(sqlite, DEFAULT), "process", str(sqlite))
    if len(parts) != len(results):
        raise WorkbenchError(sqlite.name, f"{len(parts)} processes ran kernels in the capture, expected "
                                          f"{len(results)} ranks")
    rank_of = {res["pid"]: r for r, res in enumerate(results)}
    pids = [part["pid"] for part, _ in parts]
    order = sorted(range(len(parts)), key=lambda i: rank_of[pids[i]]) if set(pids) == set(rank_of) \
        else list(range(len(parts)))
    traces = []
    for i in order:
        part, raw = parts[i]
        trace = build(raw, str(sqlite), DEFAULT)
        trace.meta.setdefault(SOURCE, {}).update({"file": sqlite.name, "bytes": sqlite.stat().st_size, "part": part})
        traces.append(trace)
    return traces


def _store(trace, result: dict, job: dict, tmp: Path, set_name: str, raw: list[Path] | None) -> dict:
    """Save one rank's trace as member ``rank<r>`` of the set being written in ``tmp``, its
    manifest a single capture's; returns its record in the set's manifest."""
    import numpy as np

    from ..trace.manifest import CAPTURE, COUNTS, DISTRIBUTED, ENV, OUTPUTS, SET, SOURCE, TIMING, section, work_units
    from ..trace.store import save
    from .env import environment
    from .nsys_backend import find_nsys

    rank, device = result["rank"], result["device"]
    variant = ",".join(f"{k}={v}" for k, v in sorted(job["variant"].items()))
    trace.meta[DISTRIBUTED] = {**section(trace.meta, DISTRIBUTED), "rank": rank, "local_rank": result["local_rank"],
                               "world_size": result["world"], "backend": result["comm_backend"],
                               "pid": result["pid"], "env": result.get("comm_env", {})}
    trace.meta.update({
        CAPTURE: {**{k: v for k, v in job.items() if k != "ranks"}, "device": device, "engine_info": result["engine"],
                  "rank": rank, "ranks": job["ranks"]},
        ENV: environment(device, find_nsys() if job["backend"] == "nsys" else None),
        TIMING: result["timing"],
        OUTPUTS: result.get("outputs"),
    })
    member = f"rank{rank}"
    roles = {"rank": rank, "local_rank": result["local_rank"], "host": result["host"], "run_id": "",
             "variant": variant}
    trace.meta[SET] = {"name": set_name, **roles}  # a member opened alone still knows its place
    save(trace, member, tmp, raw=raw or None)
    devices = np.unique(trace.columns("kernels", ["device"])["device"].to_numpy())
    return {"member": member, **roles, "source": section(trace.meta, SOURCE)["file"], "pid": result["pid"],
            "device": int(devices[0]) if len(devices) == 1 and devices[0] >= 0 else -1,
            "kernels": int(section(trace.meta, COUNTS)["kernels"]), "work_units": work_units(trace.meta)}


def describe(ts) -> str:
    """One line for the command line: where the set is, its ranks, their work units and
    decode-step medians."""
    from .. import textfmt as fmt

    m = ts.members
    unit = str(m["work_units"].iloc[0]) if len(m) else "kernel"
    steps = ts.meta.get("timing", {}).get("decode_step_ms_median", {})
    per = ", ".join(f"rank {r} {fmt.ms(steps[name])} ms" for r, name in zip(m["rank"], m["member"])
                    if steps.get(name) is not None)
    return (f"{ts.path}: trace set of {len(m)} ranks, {int(m['kernels'].sum())} {unit}s"
            + (f", decode step median {per}" if per else ""))
