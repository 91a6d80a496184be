"""Compiled code gets the layers and module labels of eager code (issue 36), on a decoder the
workbench did not write (``tests/user_programs/compiled_decoder.py``: nn.Modules, a static
cache, ``torch.compile(model, fullgraph=True)``), captured on the CPU by the command line with
``--modules`` and in-process by ``wb.record``: torch.profiler records the C++ kernels inductor
generates, the capture records inductor's provenance, and the import puts each compiled kernel
in the ranges of the modules it computes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench.trace.compiled import compiled_note

from helpers import REPO, USER_PROGRAMS

PROGRAM = USER_PROGRAMS / "compiled_decoder.py"
STEPS = 3
LAYERS = 3


def _capture(root: Path, name: str, *flags: str) -> wb.Trace:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "workbench", "--root", str(root), "capture", "--backend", "torch",
                           "--modules", "--name", name, "--quiet", "--", sys.executable, str(PROGRAM),
                           "--steps", str(STEPS), "--layers", str(LAYERS), "--device", "cpu", *flags],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return wb.open_trace(name, root=root)


def _structure(trace) -> dict:
    """Per decode step: {layer: the labels of the ranges its kernels ran in}."""
    p = wb.project(trace)
    decode = p[(p["phase"] == "decode") & (p["layer"] >= 0)]
    return {step: {int(layer): frozenset(g["range"]) for layer, g in s.groupby("layer")}
            for step, s in decode.groupby("step")}


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    return _capture(root, "eager"), _capture(root, "compiled", "--compile")


def test_compiled_decode_has_the_steps_layers_and_labels_of_eager(captures):
    eager, compiled = captures
    want = _structure(eager)
    assert sorted(want) == [f"step_{i}" for i in range(STEPS)]
    assert all(sorted(layers) == list(range(LAYERS)) for layers in want.values())
    assert all({"attn", "mlp"} <= labels for layers in want.values() for labels in layers.values())
    got = _structure(compiled)
    # Inductor fuses a layer's norm into the kernel before it (the residual add), and such a
    # kernel is put in the modules' common ancestor (the layer): so each compiled layer holds a
    # subset of the eager layer's labels, never another layer's or a label eager code lacks.
    assert sorted(got) == sorted(want)
    for step, layers in got.items():
        assert sorted(layers) == list(range(LAYERS))
        for layer, labels in layers.items():
            assert {"attn", "mlp"} <= labels <= want[step][layer], (step, layer)
    # The kernels are inductor's own: every decode kernel of a layer is a generated C++ kernel
    # or an extern call the provenance names, attributed from the compiled table.
    sites = compiled.sites
    assert sites is not None and len(sites) and set(sites["kind"]) <= {"generated", "library"}
    assert (sites["module"].str.startswith("layers.")).any()
    p = wb.project(compiled)
    inside = p[(p["phase"] == "decode") & (p["layer"] >= 0)]
    assert inside["name"].astype(str).str.contains("cpp_fused_").any()
    assert "compiled code" in (compiled_note(compiled.meta) or "")


def test_a_prefill_stays_eager_and_apart(captures):
    eager, compiled = captures
    for trace in captures:
        p = wb.project(trace)
        assert set(p.loc[p["phase"] == "prefill", "step"]) == {"prefill"}
    pe, pc = wb.project(eager), wb.project(compiled)
    assert (pe["phase"] == "prefill").sum() == (pc["phase"] == "prefill").sum()


def test_wb_record_of_a_compiled_model_has_its_layers(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PROGRAM.parent))
    import compiled_decoder as program

    model = program.build(LAYERS, "cpu")
    step = program.compiled(model, "cpu")
    with pytest.warns(UserWarning, match="provenance"), wb.annotate_modules(model), \
            wb.record("compiled", root=tmp_path, progress=False) as rec:
        program.decode(model, step, STEPS)
    got = _structure(rec.trace)
    assert sorted(got) == [f"step_{i}" for i in range(STEPS)]
    assert all(sorted(layers) == list(range(LAYERS)) and all({"attn", "mlp"} <= v for v in layers.values())
               for layers in got.values())
