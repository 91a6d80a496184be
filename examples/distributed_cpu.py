"""A torch.distributed job on the CPU (gloo backend), every rank recorded by the workbench: a
small stack of layers, each in a ``layer_NN`` range and ending in an ``all_reduce``, run for a
few ``step_N`` steps; one rank is slowed on purpose (it sleeps in every layer before its
all_reduce, so the other ranks wait for it there). Each rank stores its own trace
(``wb.record``; its raw Kineto file kept), and they become one trace set:

    python examples/distributed_cpu.py --root /tmp/traces --ranks 4 --slow-rank 2
    workbench --root /tmp/traces import --set cpu4 '/tmp/traces/cpu4-rank*'
    workbench --root /tmp/traces summary cpu4 --by straggler
"""

from __future__ import annotations

import argparse
import os
import socket
import time

LAYERS, DIM = 4, 64


def rank_main(rank: int, world: int, port: int, root: str, prefix: str, slow_rank: int, delay_s: float,
              steps: int) -> None:
    """One rank: join the group, warm up, record ``steps`` steps as ``<prefix>-rank<rank>``."""
    import torch
    import torch.distributed as dist

    import workbench as wb

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # four ranks share a small machine
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        layers = [torch.nn.Linear(DIM, DIM) for _ in range(LAYERS)]
        x = torch.randn(8, DIM)

        def step(x):
            for i, layer in enumerate(layers):
                with wb.annotate(f"layer_{i:02d}"):
                    x = torch.tanh(layer(x))
                    if rank == slow_rank:
                        time.sleep(delay_s)  # the straggler: the others wait in the all_reduce
                    dist.all_reduce(x)
                    x = x / world
            return x

        with torch.no_grad():
            x = step(x)  # warm-up, outside the recording
            dist.barrier()
            with wb.record(f"{prefix}-rank{rank}", root=root, keep_raw=True, progress=False, overwrite=True):
                for _ in range(steps):
                    with wb.step():
                        x = step(x)
        dist.barrier()  # every rank stored its trace before any leaves
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(root: str, prefix: str = "cpu4", ranks: int = 4, slow_rank: int = 2, delay_s: float = 0.03,
        steps: int = 3) -> list[str]:
    """Run the job (``ranks`` processes) and return the stored traces' names."""
    import torch.multiprocessing as mp

    mp.spawn(rank_main, args=(ranks, free_port(), root, prefix, slow_rank, delay_s, steps), nprocs=ranks)
    return [f"{prefix}-rank{r}" for r in range(ranks)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="traces", help="trace store the ranks write to")
    ap.add_argument("--prefix", default="cpu4", help="traces are stored as PREFIX-rankN")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--slow-rank", type=int, default=2)
    ap.add_argument("--delay-ms", type=float, default=30.0, help="the slow rank's sleep per layer")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    t0 = time.perf_counter()
    names = run(a.root, a.prefix, a.ranks, a.slow_rank, a.delay_ms / 1e3, a.steps)
    print(f"stored {', '.join(names)} under {a.root} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
