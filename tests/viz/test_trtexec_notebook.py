"""``notebooks/tensorrt.ipynb`` executed headless (CPU only) as ``test_notebooks`` runs the others,
from the committed trtexec artifacts: the same numbers on every machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import TRACES
from test_notebooks import MARKER, NOTEBOOKS, PLOTLY, WIDGET, _RUNNER, nbformat

NAME = "tensorrt"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    dst = tmp_path_factory.mktemp("executed") / f"{NAME}.ipynb"
    p = subprocess.run([sys.executable, "-c", _RUNNER, str(NOTEBOOKS / f"{NAME}.ipynb"), str(dst), str(NOTEBOOKS)],
                       cwd=NOTEBOOKS, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "WORKBENCH_TRACES": str(TRACES)})
    nb = nbformat.read(dst, as_version=4) if dst.exists() else None
    assert nb is not None and p.returncode == 0, p.stderr[-3000:]
    return nb


def _outputs(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            yield from cell.get("outputs", [])


def test_committed_without_outputs():
    nb = nbformat.read(NOTEBOOKS / f"{NAME}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")


def test_tensorrt_notebook(executed):
    errors = [o.get("evalue") for o in _outputs(executed) if o.get("output_type") == "error"]
    assert not errors, errors
    lines = [line for o in _outputs(executed) if o.get("output_type") == "stream"
             for line in o.get("text", "").splitlines() if line.startswith(MARKER)]
    assert len(lines) == 1
    r = json.loads(lines[0][len(MARKER):])
    assert r["layers"] == [32, 36]
    assert r["total_ms"] == [2.123776, 1.016832]
    assert r["convs"] == 21 and r["convs_fp32_to_fp16"] is True
    assert r["only_fp16_reformats"] == ["Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1",
                                        "Reformatting CopyNode for Output Tensor 0 to reshape_after_Gemm_48"]
    assert r["only_fp32_reformats"] == ["Reformatting CopyNode for Output Tensor 0 to MaxPool_2"]
    assert r["biggest_change"] == ["Conv_0 + Relu_1", 0.52224, 0.111616]
    assert r["timing_verdict"] == {"call_ms": "faster"}
    assert r["precision_changed"] == 26 and r["widget_scopes"] > 36
    mimes = [m for o in _outputs(executed) for m in o.get("data", {})]
    assert mimes.count(PLOTLY) >= 2 and WIDGET in mimes
