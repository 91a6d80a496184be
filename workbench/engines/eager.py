"""The eager engine, and the interface every Python engine keeps."""

from __future__ import annotations

from ..devices import require_device
from ..errors import WorkbenchError


class EagerEngine:
    kind = "eager"

    @staticmethod
    def check(device: str) -> None:
        require_device(device)

    def __init__(self, instance, key: str):
        import torch

        self.instance = instance
        self.key = key
        dev = instance.device
        self.prefill_positions = torch.arange(instance.ctx, device=dev, dtype=torch.int32)
        # Decode positions live on the device so a captured graph can read them.
        self.positions = torch.zeros(1, device=dev, dtype=torch.int32)
        self.info = {"engine": self.kind, "build_key": key, **instance.info}

    def prefill(self):
        inst = self.instance
        return inst.forward(inst.prompt, self.prefill_positions, inst.rows_for(inst.ctx))

    def decode(self, token, pos: int):
        """Logits for ``token`` (a device tensor of one id) at position ``pos``."""
        inst = self.instance
        if pos >= inst.rows:
            raise WorkbenchError("decode", f"position {pos} is past the {inst.rows}-row KV allocation")
        self.positions.fill_(pos)
        return self._decode(token, inst.rows_for(pos + 1))

    def _decode(self, token, rows: int):
        return self.instance.forward(token, self.positions, rows)

    def rebuild(self, positions) -> None:
        """Build again what decoding at ``positions`` replays, so that a recording opened just
        before shows how it was built. The eager engine replays nothing."""
