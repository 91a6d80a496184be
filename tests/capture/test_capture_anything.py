"""Capturing the user's own program, block and callable on the CPU (torch backend), and the
one-line failures: a user program written for these tests (tests/user_programs/mlp_steps.py),
run as a real child process through the real CLI."""

import json
import os
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from helpers import REPO, USER_PROGRAMS, cli_outcome
import workbench as wb
from workbench.errors import WorkbenchError

PROGRAM = USER_PROGRAMS / "mlp_steps.py"
CPU = ["--device", "cpu"]  # the counts below are of CPU ops, on any machine
ELAPSED: dict[str, float] = {}  # what each capture below took, measured around the CLI


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def whole(root):
    started = time.perf_counter()
    code, out, err = cli_outcome("capture", "--backend", "torch", "--name", "whole", "--", sys.executable, str(PROGRAM),
                                 *CPU, root=root)
    ELAPSED["whole"] = time.perf_counter() - started
    assert code == 0, err
    return wb.open_trace(root / "whole"), out, err


def test_a_command_capture_reports_its_real_wall_time(whole):
    """Before: "exit 0 after 0.08 s" for a run of 7.8 s (the bootstrap's clock, which starts
    after torch's import and stops before the profiler writes its trace)."""
    trace, out, err = whole
    cap = trace.meta["capture"]
    # The command's run as the parent measured it: longer than the program's own body, and within
    # what the whole `workbench capture` took, storing included.
    assert 0 < cap["program_s"] < cap["wall_s"] < ELAPSED["whole"]
    assert trace.meta["timing"]["wall_ms"]["median"] == pytest.approx(cap["wall_s"] * 1e3, rel=1e-3)
    assert f"exit 0 after {cap['wall_s']:.2f} s" in out + err


def test_whole_run_capture_of_a_user_script(whole, root):
    trace, out, err = whole
    assert "checksum" in out  # the program's own output reaches the user
    assert "Traceback" not in err and "USDT" not in err
    cap = trace.meta["capture"]
    assert cap["kind"] == "command" and cap["backend"] == "torch" and cap["exit_status"] == 0
    assert cap["command"] == [sys.executable, str(PROGRAM), *CPU] and cap["cwd"] == str(REPO)
    assert cap["windows"] == {"mode": "whole", "opened": 1, "recorded": None}
    assert trace.meta["env"]["torch"] == torch.__version__ and trace.meta["env"]["git"]["revision"]
    assert trace.meta["timing"]["wall_ms"]["n"] == 1 and trace.meta["timing"]["wall_ms"]["median"] > 0
    layers = wb.summary(trace, by="layer")
    # Each layer runs once in the warm-up outside the window and once in each of 2 steps
    # inside it, as 3 top-level ops (linear, tanh, add).
    per_layer = layers[layers["layer"] >= 0].groupby("layer")["kernels"].sum().to_dict()
    assert per_layer == {0: 3 * 3, 1: 3 * 3, 2: 3 * 3}


def test_windows_record_only_the_window(root):
    code, out, err = cli_outcome("capture", "--windows", "--name", "win", "--quiet", "--", sys.executable, str(PROGRAM),
                                 "--steps", "3", *CPU, root=root)
    assert code == 0, err
    trace = wb.open_trace(root / "win")
    assert trace.meta["capture"]["windows"] == {"mode": "windows", "opened": 1, "recorded": 1}
    paths = set(wb.summary(trace, by="path")["path"].astype(str))
    assert paths == {f"decode/step_{s}/layer_{i:02d}" for s in range(3) for i in range(3)}
    assert wb.summary(trace, by="layer")["kernels"].sum() == 3 * 3 * 3
    assert err == ""  # --quiet: no progress lines, and the profiler's own chatter is held back


def test_python_program_forms(root, tmp_path):
    """`-m module` and a console script (a #! file on PATH) run the same program."""
    (tmp_path / "usermod.py").write_text(PROGRAM.read_text())
    code, _, err = cli_outcome("capture", "--name", "as-module", "--quiet", "--", sys.executable, "-m", "usermod", *CPU,
                               root=root, cwd=tmp_path)
    assert code == 0, err
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "my-model"
    script.write_text(f"#!{sys.executable}\n" + PROGRAM.read_text())
    script.chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    code, _, err = cli_outcome("capture", "--name", "as-script", "--quiet", "--", "my-model", "--steps", "1", *CPU,
                               root=root, env=env)
    assert code == 0, err
    a, b = wb.open_trace(root / "as-module"), wb.open_trace(root / "as-script")
    assert a.meta["capture"]["command"][1:] == ["-m", "usermod", *CPU]
    assert wb.summary(a, by="layer")["kernels"].sum() > wb.summary(b, by="layer")["kernels"].sum() > 0


def test_record_block_and_profile_call_diff_and_report(root, tmp_path):
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 16)
    x = torch.randn(4, 16)
    with wb.record("block", root=root, progress=False) as rec:
        for _ in range(2):
            with wb.step():
                lin(x)
    assert rec.trace.meta["capture"]["kind"] == "record" and rec.wall_s > 0
    assert len(wb.launches_per_step(rec.trace)) == 2

    def plain(h):
        with wb.annotate("layer_00"):
            return torch.relu(lin(h))

    def scaled(h):
        with wb.annotate("layer_00"):
            return torch.relu(lin(h)) * 1.0

    a = wb.profile_call(plain, x, name="call-a", root=root, repeats=3, steps=2, progress=False)
    b = wb.profile_call(scaled, x, name="call-b", root=root, repeats=3, steps=2, progress=False)
    t = a.meta["timing"]
    assert t["timer"] == "host" and t["call_ms"]["n"] == 3 and t["steps"] == 2
    assert a.meta["outputs"]["items"][0]["shape"] == [4, 16]
    assert wb.outputs_equal(a, b)["equal"]
    assert list(wb.launches_per_step(a)["kernels"]) == [int(k) for k in wb.launches_per_step(a)["kernels"]]
    d = wb.diff(a, b)
    added = d.alignments["layer_00"].describe()
    assert "aten::mul" in added
    md = tmp_path / "r.md"
    wb.report(a, b, md=md)
    text = md.read_text()
    assert "wb.profile_call(" in text and "call" in text


def test_a_record_block_keeps_the_ranges_of_every_thread(root):
    # nsys records every thread; torch.profiler, by default, only the one that started it. A
    # serving loop or a graph capture on a worker thread keeps its ranges.
    import threading

    lin = torch.nn.Linear(8, 8)

    def worker():
        with wb.annotate("worker_step"):
            lin(torch.randn(2, 8))

    with wb.record("threads", root=root, progress=False) as rec:
        with wb.annotate("main_step"):
            lin(torch.randn(2, 8))
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    ranges = rec.trace.ranges
    names = set(ranges["name"].astype(str))
    assert {"main_step", "worker_step"} <= names
    tids = dict(zip(ranges["name"].astype(str), ranges["tid"]))
    assert tids["main_step"] != tids["worker_step"]
    layers = wb.summary(rec.trace, by="range")
    assert int(layers.loc[layers["range"] == "worker_step", "kernels"].iloc[0]) > 0  # its ops, as work units


def test_failures_are_one_line_and_store_nothing(root):
    before = set(os.listdir(root))
    cases = [
        (["--", "no-such-command-xyz"], 2, "no-such-command-xyz: command not found"),
        (["--", sys.executable, str(PROGRAM), "--exit", "3"], 1, "exited with 3"),
        (["--windows", "--", sys.executable, str(PROGRAM), "--leave-window-open"], 2, "opened and never closed"),
        (["--", sys.executable, "missing_script.py"], 2, "missing_script.py: no such file"),
        (["--", "ls", "-l"], 2, "use --backend nsys"),
        (["nosuchpkg.mod:WORKLOAD"], 2, "nosuchpkg"),
    ]
    for args, status, message in cases:
        code, _, err = cli_outcome("capture", "--quiet", *args, root=root)
        lines = [ln for ln in err.splitlines() if ln.startswith("workbench:")]
        assert code == status, (args, err)
        assert len(lines) == 1 and message in lines[0], (args, err)
        assert "Traceback" not in err, (args, err)
    assert set(os.listdir(root)) == before


def test_record_refuses_nsys_and_keeps_the_users_exception(root):
    with pytest.raises(WorkbenchError, match="profile_call"):
        wb.record("x", backend="nsys", root=root)
    with pytest.raises(ZeroDivisionError):
        with wb.record("raises", root=root, progress=False):
            1 / 0
    assert not (root / "raises").exists()


def test_window_is_a_plain_range_when_nothing_records():
    from workbench.instrument import marks as window

    before = window.state()

    @wb.window
    def f():
        return 1

    assert f() == 1
    with wb.window("w"):
        with wb.step() as _:
            pass
    after = window.state()
    assert after["opened"] == before["opened"] + 2 and after["recorded"] == before["recorded"]
    assert after["unclosed"] == []


def test_manifest_is_json(whole):
    trace, _, _ = whole
    json.dumps(trace.meta)


def test_the_readme_ways_in_on_the_example_model(root):
    """docs/your-own-model.md: the example program captured as a command, a block and a
    callable (by object and by module:function reference)."""
    example = REPO / "examples" / "my_model.py"
    code, out, err = cli_outcome("capture", "--windows", "--name", "ex-cmd", "--quiet", "--", sys.executable,
                                 str(example), root=root, env={"CUDA_VISIBLE_DEVICES": ""})
    assert code == 0, err
    by_layer = wb.summary(wb.open_trace(root / "ex-cmd"), by="layer")
    assert sorted(by_layer.loc[by_layer["layer"] >= 0, "layer"]) == [0, 1, 2, 3]
    sys.path.insert(0, str(REPO))
    try:
        from examples.my_model import TinyLM, generate
    finally:
        sys.path.remove(str(REPO))
    torch.manual_seed(0)
    model = TinyLM().eval()
    prompt = torch.randint(256, (1, 8))
    with torch.inference_mode(), wb.record("ex-block", root=root, progress=False):
        generate(model, prompt, 3)
    assert len(wb.launches_per_step(wb.open_trace(root / "ex-block"))) == 3
    t = wb.profile_call(model, prompt, name="ex-call", repeats=3, steps=2, root=root, progress=False)
    assert t.meta["timing"]["call_ms"]["n"] == 3
    code, _, err = cli_outcome("capture", "--call", "examples.my_model:one_step", "--repeats", "3", "--name", "ex-ref",
                               "--quiet", root=root, env={"CUDA_VISIBLE_DEVICES": ""})
    assert code == 0, err
    ref = wb.open_trace(root / "ex-ref")
    assert ref.meta["capture"]["target"] == "examples.my_model:one_step"
    assert wb.outputs_equal(ref, t)["equal"]  # the same model and prompt, called two ways
