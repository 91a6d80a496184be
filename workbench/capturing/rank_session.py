"""What runs in the processes of a multi-rank capture (``multirank.py``).

    python -m workbench.capturing.rank_session rank SPEC WORKDIR     (one rank: RANK, ... set)
    python -m workbench.capturing.rank_session launch SPEC WORKDIR   (start every rank, wait)

A rank joins the group (:func:`workbench.capturing.distributed.init`), then runs the single-process
session (``session.execute``: build, time, record the decode steps) on its own device and
writes ``WORKDIR/rank<r>.json``: its timing, outputs, engine info, pid and device, or the
error that stopped it and when. The recording window is opened by every rank together (a barrier on
the host group first): ``torch`` writes ``WORKDIR/rank<r>.kineto.json``; ``nsys`` calls
``cudaProfilerStart/Stop``, with a barrier before the stop too, so the first rank to stop
(which may end the collection for all of them) stops only once every rank's steps are done.

``launch`` is the process ``nsys profile`` runs: every rank is its child. The torch backend
launches from the capturing process itself (:func:`launch_ranks`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

from ..errors import WorkbenchError

# The settings of the collectives' libraries a rank ran with (NCCL_NVLS_ENABLE=0 and the like),
# kept in its manifest.
COMM_ENV = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_", "GLOO_")


def result_path(workdir: Path, rank: int) -> Path:
    return Path(workdir) / f"rank{rank}.json"


def kineto_path(workdir: Path, rank: int) -> Path:
    return Path(workdir) / f"rank{rank}.kineto.json"


def launch_ranks(spec_path: Path, workdir: Path, spec: dict) -> tuple[list[int], set[int]]:
    """Start ``spec["world"]`` ranks of this module and wait (``distributed.launch``); rank 0's
    output is shown when the spec shows progress."""
    from .distributed import launch
    from .program import child_env

    argv = [sys.executable, "-m", "workbench.capturing.rank_session", "rank", str(spec_path), str(workdir)]
    return launch(argv, spec["world"], Path(workdir), env=child_env(), shown=0 if spec.get("progress") else None)


@contextlib.contextmanager
def _window(backend: str, out: Path, cuda: bool):
    import torch

    from .distributed import host_barrier
    from .torch_backend import TorchRecorder

    recorder = TorchRecorder(out, cuda=cuda) if backend == "torch" else None
    if cuda:
        torch.cuda.synchronize()
    host_barrier()
    if recorder is not None:
        recorder.start()
    else:
        torch.cuda.profiler.start()
    try:
        yield
    finally:
        if recorder is not None:
            recorder.stop()
        else:
            torch.cuda.synchronize()
            host_barrier()
            torch.cuda.profiler.stop()


def run_rank(spec: dict, workdir: Path) -> int:
    """One rank (see the module docstring); exit status 0, or 2 with the error in its result."""
    from . import distributed
    from .session import execute

    rank, local, world = distributed.rank_info()
    out = result_path(workdir, rank)
    try:
        device = distributed.init(spec["device"])
        mine = {**spec, "device": device, "progress": bool(spec.get("progress")) and rank == 0}
        result = execute(mine, _window(spec["backend"], kineto_path(workdir, rank), device.startswith("cuda")))
        result.update(rank=rank, local_rank=local, world=world, device=device, pid=os.getpid(),
                      host=socket.gethostname(), comm_backend=str(distributed_backend()),
                      comm_env={k: v for k, v in os.environ.items() if k.startswith(COMM_ENV)})
        distributed.finish()
        code = 0
    # When it failed: a rank failing on its own fails first; the others see it leave after.
    except WorkbenchError as e:
        result, code = {"error": {"where": e.where, "problem": e.problem, "at": time.time()}}, 2
    except Exception as e:  # joining the group, or the profiler: one line, not a traceback
        result, code = {"error": {"where": f"rank {rank}", "problem": f"{type(e).__name__}: {e}",
                                  "at": time.time()}}, 2
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(out)  # a result is whole or absent
    return code


def distributed_backend() -> str:
    import torch.distributed as dist

    return dist.get_backend() if dist.is_initialized() else ""


def main(argv: list[str]) -> int:
    what, spec_path, workdir = argv
    spec = json.loads(Path(spec_path).read_text())
    if what == "rank":
        return run_rank(spec, Path(workdir))
    codes, _ = launch_ranks(Path(spec_path), Path(workdir), spec)
    return 0 if all(c == 0 for c in codes) else 2


if __name__ == "__main__":
    from .child import run_child

    run_child(main, sys.argv[1:])
