"""torch.profiler capture: in this process, Kineto JSON out (CPU ops; kernels on a GPU)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .session import execute


def capture(spec: dict, workdir: Path) -> tuple[Path, dict, list[str] | None]:
    from torch.profiler import ProfilerActivity, profile

    out = workdir / "kineto.json"
    activities = [ProfilerActivity.CPU]
    if spec["device"].startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)

    @contextlib.contextmanager
    def window():
        with profile(activities=activities) as prof:
            yield
        prof.export_chrome_trace(str(out))

    result = execute(spec, window())
    return out, result, None

