"""torch.profiler capture: in this process, Kineto JSON out (CPU ops; kernels on a GPU)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..annotation import torch_ranges
from .session import execute


def capture(spec: dict, workdir: Path) -> tuple[Path, dict, list[str] | None]:
    from torch.profiler import ProfilerActivity, profile

    out = workdir / "kineto.json"
    activities = [ProfilerActivity.CPU]
    if spec["device"].startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)

    @contextlib.contextmanager
    def window():
        # Ranges open record_function only inside the window: the timed runs before it pay
        # for NVTX ranges alone, as an unprofiled program would.
        with profile(activities=activities) as prof, torch_ranges():
            yield
        prof.export_chrome_trace(str(out))

    result = execute(spec, window())
    return out, result, None
