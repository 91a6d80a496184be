"""The processes of a ``torch.distributed`` job on one machine: starting its ranks, and each
rank joining the group.

:func:`launch` starts ``world`` copies of a command, each with the environment
``torch.distributed``'s ``env://`` rendezvous reads (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT``: a port free when the job starts), as ``torchrun``
would on one node. The ranks are plain child processes (fork and exec), so a profiler that
follows a process's children (``nsys profile`` around the launcher) records every rank. When
a rank exits with an error the others are stopped: they would wait for it in their next
collective until the group's timeout.

:func:`init` is the rank's side: the default group on ``nccl`` with the rank's own GPU
(``cuda:LOCAL_RANK``) on CUDA, ``gloo`` on a CPU, and a second, ``gloo`` group for barriers
that must launch nothing on a GPU (:func:`host_barrier`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from .. import settings

ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# gloo ranks on one machine (each a process): enough to try a split, few enough to run.
MAX_CPU_RANKS = 16
_HOST_GROUP = None


def check_world(world: int, device: str) -> None:
    """One line when ``world`` ranks cannot run on ``device`` (``cpu``, ``cuda``): a GPU named
    (rank r runs on ``cuda:r``), more ranks than visible GPUs, or than :data:`MAX_CPU_RANKS`."""
    import torch

    from ..errors import WorkbenchError

    if device.startswith("cuda"):
        if ":" in device:
            raise WorkbenchError(f"device {device}", f"tp={world} runs rank r on cuda:r: give --device cuda")
        visible = torch.cuda.device_count()
        if world > visible:
            raise WorkbenchError("variant tp", f"{world} ranks need {world} GPUs, {visible} visible")
    elif world > MAX_CPU_RANKS:
        raise WorkbenchError("variant tp", f"{world} ranks: at most {MAX_CPU_RANKS} gloo ranks on a CPU")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port)}


def launch(argv: list[str], world: int, logs: Path, *, env: dict | None = None, shown: int | None = None,
           grace_s: float = 5.0) -> tuple[list[int], set[int]]:
    """Run ``argv`` as ranks 0..world-1 and wait for them: each rank's exit status, and the
    ranks stopped because another failed. Rank ``r``'s output goes to ``logs/rank<r>.log``,
    except rank ``shown``'s, which is this process's."""
    port = free_port()
    procs: list[subprocess.Popen] = []
    stopped: set[int] = set()
    try:
        for rank in range(world):
            log = None if rank == shown else open(Path(logs) / f"rank{rank}.log", "w")
            try:
                procs.append(subprocess.Popen(argv, env={**(env or os.environ), **rank_env(rank, world, port)},
                                              stdout=log, stderr=None if log is None else subprocess.STDOUT))
            finally:
                if log is not None:
                    log.close()  # the child holds its own descriptor
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs):
                stopped = {r for r, p in enumerate(procs) if p.poll() is None}
                break
            time.sleep(0.05)
    finally:
        _stop([p for p in procs if p.poll() is None], grace_s)
    return [p.returncode for p in procs], stopped


def _stop(procs: list[subprocess.Popen], grace_s: float) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def rank_info() -> tuple[int, int, int]:
    """(rank, local rank, world size) from the environment :func:`launch` sets."""
    rank = settings.read(settings.RANK)
    return int(rank), int(settings.read(settings.LOCAL_RANK) or rank), int(settings.read(settings.WORLD_SIZE))


def init(device: str) -> str:
    """Join the job's default group (see the module docstring); returns the rank's device
    (``cuda:LOCAL_RANK`` or ``cpu``)."""
    import torch
    import torch.distributed as dist

    global _HOST_GROUP
    rank, local, world = rank_info()
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
        mine = f"cuda:{local}"
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device(mine))
    else:
        # The ranks share the machine's cores.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        mine = "cpu"
        dist.init_process_group("gloo", rank=rank, world_size=world)
    _HOST_GROUP = dist.new_group(backend="gloo")
    return mine


def host_barrier() -> None:
    """Wait for every rank, through the ``gloo`` group: no GPU work, nothing in a GPU trace."""
    import torch.distributed as dist

    dist.barrier(group=_HOST_GROUP)


def finish() -> None:
    """Leave the group once every rank got here (rank 0 holds the rendezvous store)."""
    import torch.distributed as dist

    global _HOST_GROUP
    if dist.is_initialized():
        host_barrier()
        dist.destroy_process_group()
    _HOST_GROUP = None
