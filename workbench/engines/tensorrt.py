"""TensorRT through ``trtexec``: ONNX export of the decode step, plan build, profiled runs.

The plan is built with ``--profilingVerbosity=detailed`` so TensorRT names its layers in the
NVTX ranges it emits at run time (what an nsys capture of ``run_command`` attributes kernels
to), and the layer information, per-layer profile and per-iteration times are exported as JSON
next to the plan, named as the trtexec importer reads them (``workbench import DIR``).
The decode step runs inside ``trtexec``, not in this process, so this engine has no
``prefill``/``decode``: it captures with the nsys backend only.

TensorRT is not installable on the machines this project was built on; without ``trtexec``
on PATH the engine refuses with a clear error before doing any work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .. import settings
from ..errors import WorkbenchError


def cache_dir() -> Path:
    return Path(settings.read(settings.CACHE) or Path.home() / ".cache" / "workbench") / "engines"


class TensorRTEngine:
    kind = "tensorrt"

    @staticmethod
    def check(device: str) -> None:
        if shutil.which("trtexec") is None:
            raise WorkbenchError("engine tensorrt", "trtexec not found on PATH (install TensorRT to use this engine)")
        if not device.startswith("cuda"):
            raise WorkbenchError("engine tensorrt", "TensorRT needs --device cuda")

    def __init__(self, instance, key: str):
        if instance.variant.get("kv_write") == "fused":
            raise WorkbenchError("engine tensorrt", "kv_write=fused is a Triton custom op that ONNX cannot express")
        self.instance = instance
        self.key = key
        self.dir = cache_dir() / key
        self.plan = self.dir / "engine.plan"
        self.info = {"engine": self.kind, "build_key": key, "artifacts": str(self.dir), **instance.info}
        if not self.plan.exists():
            self._build()

    def _build(self) -> None:
        tmp = self.dir.with_name(self.dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self._export_onnx(tmp / "decode.onnx")
        cmd = ["trtexec", f"--onnx={tmp / 'decode.onnx'}", f"--saveEngine={tmp / 'engine.plan'}",
               "--profilingVerbosity=detailed", f"--exportLayerInfo={tmp / 'engine.graph.json'}",
               f"--exportProfile={tmp / 'engine.profile.json'}", f"--exportTimes={tmp / 'engine.timing.json'}",
               "--separateProfileRun"]
        if self.instance.info["dtype"] in ("bfloat16", "float16"):
            cmd.append(f"--{'bf16' if self.instance.info['dtype'] == 'bfloat16' else 'fp16'}")
        done = subprocess.run(cmd, capture_output=True, text=True)
        (tmp / "build.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise WorkbenchError("engine tensorrt", f"trtexec failed (exit {done.returncode}); log: {tmp / 'build.log'}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.rename(tmp, self.dir)

    def _export_onnx(self, path: Path) -> None:
        import torch

        inst = self.instance
        rows = inst.rows_for(inst.ctx + 1)

        class DecodeStep(torch.nn.Module):
            def forward(self, token, positions):
                return inst.forward(token, positions, rows)

        token = inst.prompt[-1:]
        positions = torch.full((1,), inst.ctx, device=inst.device, dtype=torch.int32)
        torch.onnx.export(DecodeStep(), (token, positions), str(path), dynamo=False,
                          input_names=["token", "positions"], output_names=["logits"])

    def run_command(self, iterations: int, out_dir: Path) -> list[str]:
        """``trtexec`` running the plan ``iterations`` times with per-layer profiling; its
        artifacts in ``out_dir`` are named as ``workbench import`` reads them (TREx's naming:
        ``engine.graph.json``, ``engine.profile.json``, ``engine.timing.json``)."""
        return ["trtexec", f"--loadEngine={self.plan}", f"--iterations={iterations}", "--warmUp=0",
                "--duration=0", "--profilingVerbosity=detailed", "--dumpProfile",
                f"--exportLayerInfo={out_dir / 'engine.graph.json'}",
                f"--exportProfile={out_dir / 'engine.profile.json'}", f"--exportTimes={out_dir / 'engine.timing.json'}"]
