"""``workbench diff`` acceptance on the H200 reference captures (unfused vs fused KV write):
per layer ``kv_write`` 15 -> 1, 160 -> 48 kernels per step (480 -> 144 over the 3 steps), the
aligned sequence, a clear message for traces with no range in common, ``--json`` ranges and
``--fail-if`` exit codes.

The committed stored traces (``traces/ref-h200-kvwrite-*-nsys``, imported from those captures)
are always there; the raw captures under ``../shared`` are used when present.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REFERENCE, TRACES
from workbench.cli import main

STORED = (str(TRACES / "ref-h200-kvwrite-unfused-nsys"), str(TRACES / "ref-h200-kvwrite-fused-nsys"))
RAW = (str(REFERENCE / "nsys-kvwrite-unfused.sqlite.gz"), str(REFERENCE / "nsys-kvwrite-fused.sqlite.gz"))
ALIGNED = ("15 removed: vectorized_elementwise_kernel x6, unrolled_elementwise_kernel x6, "
           "index_elementwise_kernel x3; 1 added: fused_write")


def _sources():
    yield pytest.param(STORED, id="stored")
    yield pytest.param(RAW, id="raw-nsys", marks=pytest.mark.skipif(not REFERENCE.is_dir(), reason="no ../shared captures"))


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("pair", _sources())
def test_text_reports_fusion_per_layer_and_totals(capsys, pair):
    code, out, err = run(capsys, "diff", *pair)
    assert code == 0, err
    assert "3 decode step(s), 160 kernels/step" in out and "3 decode step(s), 48 kernels/step" in out
    assert "per decode step: kernels 160 -> 48" in out
    assert "total kernels 480 -> 144" in out
    assert "24 range(s) in common" in out
    for layer in range(8):
        # Counts with their time per decode step beside them.
        assert re.search(rf"^  layer {layer}: attention 4->4 \([\d.]+->[\d.]+ us\), kv_write 15->1 \(2[\d.]+->1\.[\d] us\), "
                         r"qkv 1->1 \([\d.]+->[\d.]+ us\)$", out, re.M), out
    # One change repeated in every layer is one line (before: ten lines of layer_NN/kv_write).
    assert re.search(r"^  kv_write in all 8 layers: 2[\d.]+ -> 1\.\d us each per decode step, 0\.0\dx; kernels 15 -> 1 each$",
                     out, re.M), out
    assert "layer_03/kv_write:" not in out
    # The aligned sequence: which kernels went away and what replaced them, once for the group.
    assert out.count(ALIGNED) == 1
    assert "no range in common" not in out


@pytest.mark.parametrize("pair", _sources())
def test_json_rows(capsys, pair):
    code, out, err = run(capsys, "diff", *pair, "--json")
    assert code == 0, err
    rows = json.loads(out)["ranges"]
    assert isinstance(rows, list) and len(rows) == 24
    for r in rows:
        for col in ("range", "kernels_a", "kernels_b", "gpu_time_ns_a", "gpu_time_ns_b", "status", "layer", "alignment"):
            assert col in r, col
    kv = [r for r in rows if r["range"].endswith("/kv_write")]
    assert sorted(r["range"] for r in kv) == [f"layer_{i:02d}/kv_write" for i in range(8)]
    for r in kv:
        assert (r["kernels_a"], r["kernels_b"]) == (15, 1)
        assert (r["kernels_total_a"], r["kernels_total_b"]) == (45, 3)
        assert r["gpu_time_ns_a"] > 10 * r["gpu_time_ns_b"] > 0
        assert r["status"] == "both" and r["alignment"] == ALIGNED
    others = [r for r in rows if not r["range"].endswith("/kv_write")]
    assert all(r["kernels_a"] == r["kernels_b"] for r in others)
    assert sum(r["kernels_a"] for r in rows) == 160 and sum(r["kernels_b"] for r in rows) == 48
    assert sum(r["kernels_total_a"] for r in rows) == 480 and sum(r["kernels_total_b"] for r in rows) == 144


def test_fail_if_gates(capsys):
    a, b = STORED
    assert run(capsys, "diff", a, b, "--fail-if", "kernels_per_step>0", "--fail-if", "gpu_time_per_step>5%")[0] == 0
    code, out, err = run(capsys, "diff", b, a, "--fail-if", "kernels_per_step>0")
    assert code == 1
    assert "gate failed: kernels_per_step: 48 -> 160" in err
    code, out, err = run(capsys, "diff", b, a, "--fail-if", "gpu_time_per_step>50%")
    assert code == 1 and "gpu_time_per_step" in err
    code, out, err = run(capsys, "diff", b, a, "--fail-if", "kernels_per_step>200")
    assert code == 0, err
    code, out, err = run(capsys, "diff", a, b, "--fail-if", "nonsense")
    assert code == 2 and "bad --fail-if gate" in err


def test_fail_if_exit_status_of_the_command():
    """The installed entry point (a new process) exits 1 on a failed gate."""
    a, b = STORED
    p = subprocess.run([sys.executable, "-m", "workbench", "diff", b, a, "--fail-if", "kernels_per_step>0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "per decode step: kernels 48 -> 160" in p.stdout and "gate failed" in p.stderr


def _renamed(src: str, root: Path, name: str) -> str:
    """A copy of a stored trace whose ranges are all renamed: no range path in common."""
    from workbench.trace import open_trace, save

    t = open_trace(src)
    r = t.ranges.copy()
    r["name"] = r["name"].cat.rename_categories(lambda c: c if c.startswith("step") else f"other_{c}")
    r["path"] = r["path"].str.replace(r"/", "/other_", regex=False)
    tables = dict(t.tables)
    tables["ranges"] = r
    from workbench.trace.schema import Trace

    save(Trace(tables, dict(t.meta)), name, root)
    return name


def test_no_range_in_common_says_so(capsys, tmp_path):
    root = tmp_path / "traces"
    other = _renamed(STORED[1], root, "renamed")
    code, out, err = run(capsys, "--root", root, "diff", STORED[0], other)
    assert code == 0, err
    assert "no range in common between A and B" in out
    assert "24 only in A, 24 only in B" in out
    assert "range(s) in common" not in out and "per layer" not in out
    assert "only in A (24)" in out and "only in B (24)" in out
    code, out, err = run(capsys, "--root", root, "diff", STORED[0], other, "--json")
    rows = json.loads(out)["ranges"]
    assert {r["status"] for r in rows} == {"only_a", "only_b"}


def _slashed_trace(path: Path) -> Path:
    """Kineto events whose range names hold a "/": roots "x" and "x/y" both have the path
    "x/y/z" (through "y/z" and "z"), so a step rule can strip one and not the other."""
    events = []

    def rng(name, ts, dur):
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur})

    def launch(ts, corr, kernel):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                       "dur": 0.5, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": ts + 10, "dur": 1.0,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})

    rng("x", 0, 100), rng("y/z", 10, 20), launch(12, 1, "k1"), launch(14, 2, "k2")
    rng("x/y", 200, 100), rng("z", 210, 20), launch(212, 3, "k3")
    rng("ProfilerStep#1", 400, 100), rng("layer_1", 410, 20), launch(412, 4, "k4"), launch(440, 5, "k5")
    launch(600, 6, "k6")
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_range_keys_strip_the_step_of_each_kernel(tmp_path):
    """The step level is cut by each kernel's own step, also where two steps give one path."""
    from workbench.analysis import diff
    from workbench.trace import import_file

    t = import_file(_slashed_trace(tmp_path / "slashed.json"))

    def kernels(**kw):
        d = diff(t, t, **kw)
        return dict(zip(d.ranges["range"], d.ranges["kernels_total_a"])), d.totals["steps_a"], d.alignments

    assert kernels() == ({"(no range)": 1, "(step)": 1, "layer_1": 1, "x/y/z": 3}, 1, kernels()[2])
    keys, steps, aligned = kernels(step_regex="^x$")  # "x" is a step, "x/y" is not: one path, two keys
    assert (keys, steps) == ({"(no range)": 1, "ProfilerStep#1": 1, "ProfilerStep#1/layer_1": 1, "x/y/z": 1,
                              "y/z": 2}, 1)
    assert aligned["y/z"].ops == [("equal", ["k1", "k2"])] and aligned["x/y/z"].ops == [("equal", ["k3"])]
    keys, steps, _ = kernels(step_regex="^x")
    assert (keys, steps) == ({"(no range)": 1, "ProfilerStep#1": 1, "ProfilerStep#1/layer_1": 1, "y/z": 3}, 2)
