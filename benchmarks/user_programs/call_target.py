"""A ``module:function`` target for ``workbench capture --call`` / ``wb.profile_call`` under
nsys: the function runs in a child process, so the model is built at import."""

import torch

import workbench as wb

torch.manual_seed(0)
_dev = "cuda" if torch.cuda.is_available() else "cpu"
_mlp = [torch.nn.Linear(512, 512).to(_dev) for _ in range(4)]
_x = torch.randn(8, 512, device=_dev)


@torch.inference_mode()
def decode_step():
    h = _x
    for i, lin in enumerate(_mlp):
        with wb.annotate(f"layer_{i:02d}"):
            h = torch.nn.functional.gelu(lin(h)) + h
    return h
