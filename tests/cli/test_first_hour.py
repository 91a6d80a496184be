"""The first hour at the command line, as a new user meets it from a fresh clone: each thing
that tripped one up (issue 38), run for real in a child process, on the committed traces and
small real programs.

- ``capture --call examples.my_model:one_step`` from the checkout, through the console script;
- a ``--fail-if`` gate pasted into bash unquoted;
- Ctrl-C during a capture: one line, exit 130, nothing stored;
- a taken name's hint in the words of the caller (``overwrite=True`` / ``--force``);
- a capture without ranges names ``--modules``; a program without ``--`` names the ``--``;
- ``report A`` says what report needs; ``--root`` before or after any command;
- ``workbench list`` as a table of kind, size, date and source.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CPU_TRACE, DATA, REPO, TRACES, assert_one_line, run_cli, store_entries

# The console script pip installed beside this interpreter (``workbench = workbench.cli:main``).
CONSOLE = Path(sys.executable).parent / "workbench"
# A pair of committed traces: the unfused KV write has 160 kernels per decode step, the fused 48.
UNFUSED, FUSED = str(TRACES / "ref-h200-kvwrite-unfused-nsys"), str(TRACES / "ref-h200-kvwrite-fused-nsys")
# A torch program with work but no range of its own.
PLAIN = """import torch
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(2, 16)
for _ in range(3):
    y = model(x)
"""
# A program Ctrl-C finds asleep: it says when it sleeps, so the test interrupts it then.
SLEEPER = """import time
print("ready", flush=True)
time.sleep(120)
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


# ---------------------------------------------------------------- 1. --call from the working directory

def test_console_script_imports_the_call_from_the_working_directory(tmp_path):
    """docs/your-own-model.md's ``workbench capture --call examples.my_model:one_step``, run where
    ``examples/`` is, through the installed console script (whose ``sys.path`` starts at its
    own ``bin/``): the working directory is searched, as under ``python -m``."""
    if not CONSOLE.is_file():
        pytest.skip(f"no console script at {CONSOLE}")
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "my_model.py", tmp_path / "examples")
    env = _env()
    assert str(tmp_path) not in env["PYTHONPATH"].split(os.pathsep)  # only the checkout's package is on it
    r = subprocess.run([str(CONSOLE), "--root", str(tmp_path / "store"), "capture", "--call",
                        "examples.my_model:one_step", "--steps", "1", "--repeats", "1", "--warmup", "1", "--quiet"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.match(r"\S+/call-examples\.my_model-one_step-torch: \d+ \w+s, \d+ ranges, call ", r.stdout), r.stdout
    meta = json.loads((tmp_path / "store" / "call-examples.my_model-one_step-torch" / "manifest.json").read_text())
    assert meta["capture"]["target"] == "examples.my_model:one_step"


def test_finding_a_reference_leaves_sys_path_as_it_was(tmp_path, monkeypatch):
    """From the API (a notebook, a script) the working directory is on the path only while the
    module imports."""
    from workbench.capturing.calls import resolve_callable

    (tmp_path / "first_hour_target.py").write_text("def run():\n    return 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.abspath(p or os.curdir) != str(tmp_path)])
    before = list(sys.path)
    try:
        assert resolve_callable("first_hour_target:run")() == 7
    finally:
        sys.modules.pop("first_hour_target", None)
    assert sys.path == before


# ---------------------------------------------------------------- 2. gates bash takes unquoted

def _bash(line: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)


def test_gate_pasted_into_bash(tmp_path):
    wb = f"{sys.executable} -m workbench"
    # The old form unquoted: bash redirects to a file named 0 and passes the bare metric.
    r = _bash(f"{wb} diff {FUSED} {UNFUSED} --fail-if kernels_per_step>0", tmp_path)
    line = assert_one_line(r.stderr, "kernels_per_step")
    assert r.returncode == 2 and (tmp_path / "0").is_file()
    assert "bad --fail-if gate: kernels_per_step has no limit" in line
    assert "'kernels_per_step>N'" in line and "write kernels_per_step+N, which needs no quotes" in line
    # The new form needs no quotes: B has 112 more kernels per step, and more GPU time.
    r = _bash(f"{wb} diff {FUSED} {UNFUSED} --fail-if kernels_per_step+0 --fail-if gpu_time_per_step+5%", tmp_path)
    assert r.returncode == 1, r.stderr
    assert "gate failed: kernels_per_step: 48 -> 160 (+112, limit +0)" in r.stderr
    assert "gate failed: gpu_time_per_step: " in r.stderr
    r = _bash(f"{wb} diff {UNFUSED} {FUSED} --fail-if kernels_per_step+0 --fail-if gpu_time_per_step+5%", tmp_path)
    assert r.returncode == 0, r.stderr
    # The old form quoted still works.
    r = _bash(f"{wb} diff {FUSED} {UNFUSED} --fail-if 'kernels_per_step>0'", tmp_path)
    assert r.returncode == 1 and "gate failed: kernels_per_step: 48 -> 160" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0"]


def test_bare_time_gate_names_the_percent_form():
    from workbench.analysis.gates import parse_gate
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError) as e:
        parse_gate("decode_step")
    assert "write decode_step+N%, which needs no quotes, or quote the gate: 'decode_step>N%'" in str(e.value)
    assert parse_gate("decode_step+5%") == parse_gate("decode_step>5%") == ("decode_step", 5.0, True)
    assert parse_gate("kernels+2") == parse_gate("kernels>+2") == ("kernels", 2.0, False)


# ---------------------------------------------------------------- 3. Ctrl-C

def _gone(pgid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("options", [[], ["--quiet", "--modules"]], ids=["progress", "quiet-modules"])
def test_ctrl_c_during_a_capture_is_one_line(tmp_path, options):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it, while the program
    sleeps: exit 130, ``workbench: interrupted`` and no traceback (nor the --modules warning of
    a program that called no module yet), nothing left in the store."""
    program, root = tmp_path / "sleeper.py", tmp_path / "store"
    program.write_text(SLEEPER)
    p = subprocess.Popen([sys.executable, "-m", "workbench", "--root", str(root), "capture", *options, "--",
                          sys.executable, str(program)], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n"
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    expected = ["workbench: interrupted"]
    if not options:  # the one progress line, said before the program started
        expected.insert(0, f"workbench capture: running {sys.executable} {program}")
    assert err.splitlines() == expected, err
    assert out == ""
    assert _gone(p.pid), "a process of the capture outlived it"
    assert store_entries(root) == []


# ---------------------------------------------------------------- 4. a taken name, in the caller's words

def test_taken_name_hint_names_the_fix_where_it_was_called(tmp_path):
    import torch

    import workbench as wb
    from workbench.errors import WorkbenchError

    root = tmp_path / "store"
    for attempt in range(2):  # a notebook cell run twice
        try:
            with wb.record("tiny-block", root=root, progress=False):
                torch.ones(4) + 1
        except WorkbenchError as e:
            assert attempt == 1
            assert "a trace with this name exists (choose another name, or pass overwrite=True to replace it)" \
                in str(e) and "--force" not in str(e)
    with wb.record("tiny-block", root=root, overwrite=True, progress=False) as rec:
        torch.ones(4) + 1
    assert rec.trace is not None
    # The command line names its option for the same refusal.
    assert run_cli("import", CPU_TRACE, "--name", "tiny-block", root=root).returncode == 2
    r = run_cli("import", CPU_TRACE, "--name", "tiny-block", root=root)
    line = assert_one_line(r.stderr, "tiny-block")
    assert "(choose another --name, or replace it with --force)" in line and "overwrite" not in line


# ---------------------------------------------------------------- 5. no ranges: --modules

def test_capture_without_ranges_names_modules(tmp_path):
    program, root = tmp_path / "plain.py", tmp_path / "store"
    program.write_text(PLAIN)
    r = run_cli("capture", "--quiet", "--", sys.executable, program, root=root, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ", 0 ranges," in r.stdout
    assert r.stderr.splitlines() == ["workbench: hint: no ranges recorded: add --modules to get a range per "
                                     "layer/module (--modules . for every nn.Module), or NVTX ranges in the program "
                                     "(wb.annotate)"], r.stderr
    # The fix the hint names works.
    r = run_cli("capture", "--quiet", "--force", "--modules", ".", "--", sys.executable, program, root=root,
                cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert int(re.search(r", (\d+) ranges,", r.stdout).group(1)) > 0


# ---------------------------------------------------------------- 6. a program without --

def test_program_without_dashes_names_the_dashes(tmp_path):
    (tmp_path / "x.py").write_text("print('never run')\n")
    root = tmp_path / "store"
    r = run_cli("capture", "--backend", "torch", "python", "x.py", root=root, cwd=tmp_path)
    line = assert_one_line(r.stderr, "unrecognized arguments: x.py")
    assert r.returncode == 2 and line.endswith("(to capture a program, put -- before it: workbench capture "
                                               "[options] -- python x.py)"), line
    r = run_cli("capture", "x.py", root=root, cwd=tmp_path)
    line = assert_one_line(r.stderr, "workload x.py")
    assert r.returncode == 2 and line.endswith("no workload has this name, but a file has: to capture a program, put "
                                               "-- before it: workbench capture [options] -- python x.py"), line
    assert "never run" not in r.stdout and store_entries(root) == []


# ---------------------------------------------------------------- 7. what report needs

def test_report_with_one_trace_says_what_it_needs():
    r = run_cli("report", FUSED)
    line = assert_one_line(r.stderr, "report")
    assert r.returncode == 2
    assert line == ("workbench: report: FIX is required: report takes two traces, the base and the changed one, then "
                    "optional more traces or a sweep results .json (workbench report BASE FIX [MORE ...])")
    line = assert_one_line(run_cli("diff", FUSED).stderr, "diff")
    assert line == ("workbench: diff: B is required: diff takes two traces (or two trace sets), the base and the "
                    "changed one (workbench diff A B)")
    line = assert_one_line(run_cli("import").stderr, "import")
    assert line == "workbench: import: SRC is required (workbench import SRC [MORE ...])"


# ---------------------------------------------------------------- 8. --root before or after

def test_every_command_takes_root_before_or_after_its_name():
    import argparse

    from workbench.cli.entry import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, parser in sub.choices.items():
        assert any("--root" in a.option_strings for a in parser._actions), command


def test_root_after_the_command(tmp_path):
    root = tmp_path / "store"
    assert run_cli("import", CPU_TRACE, "--name", "t", "--root", root).returncode == 0
    for argv in (["summary", "t"], ["sql", "t", "select count(*) as n from kernels"], ["list"], ["diff", "t", "t"],
                 ["export", "t", "--chrome", tmp_path / "t.json"]):
        r = run_cli(*argv, "--root", root, cwd=tmp_path)
        assert r.returncode == 0, (argv, r.stderr)
    assert "388" in run_cli("sql", "t", "select count(*) as n from kernels", "--root", root).stdout
    # Given after the command it wins over the one before.
    r = run_cli("--root", tmp_path / "nowhere", "summary", "t", "--root", root)
    assert r.returncode == 0 and r.stdout.startswith("# t: "), r.stderr
    assert store_entries(root) == ["t"]


# ---------------------------------------------------------------- 9. workbench list

_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d"


def test_list_is_a_table_of_kind_size_date_and_source(tmp_path):
    root = tmp_path / "store"
    for src, name in ((CPU_TRACE, "cpu"), (DATA / "tensorrt" / "resnet18-a100-fp16", "engine"),
                      (DATA / "nsys-graph-probe.sqlite.gz", "graphs")):
        assert run_cli("import", src, "--name", name, root=root).returncode == 0
    cpu4 = sorted((DATA / "sets" / "cpu4").glob("rank*.json.gz"))
    assert run_cli("import", "--set", "job", *cpu4, root=root).returncode == 0
    r = run_cli("list", root=root)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["name", "kind", "size", "stored", "source"]
    rows = {ln.split()[0]: ln for ln in lines[1:]}
    assert list(rows) == ["cpu", "engine", "graphs", "job"]
    for name, kind, source in (("cpu", "torch", "import kineto-llama-modules.json.gz"),
                               ("engine", "trtexec", "import "), ("graphs", "nsys", "import nsys-graph-probe.sqlite.gz"),
                               ("job", "set", "import rank0.json.gz +3 more")):
        assert re.match(rf"{name} +{kind} +[\d.]+ (B|KiB|MiB) {_STAMP} {re.escape(source)}", rows[name]), rows[name]
    r = run_cli("list", "--json", root=root)
    listed = {row["name"]: row for row in json.loads(r.stdout)}
    for name, row in listed.items():
        assert row["size_bytes"] == sum(f.stat().st_size for f in (root / name).rglob("*") if f.is_file())
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["stored_at"])
    assert [row["kind"] for row in listed.values()] == ["torch", "trtexec", "nsys", "set"]


def test_list_of_the_committed_store_says_where_each_trace_came_from():
    rows = {row["name"]: row for row in json.loads(run_cli("list", "--json", root=TRACES).stdout)}
    assert rows["h200-kvwrite-fused-eager-torch"]["source"] == "decoder kv_write=fused (eager)"
    assert rows["h200-kvwrite-fused-eager-nsys"]["kind"] == "nsys"
    assert rows["h200-user-call-torch"]["source"] == "call call_target:decode_step"
    assert rows["h200-user-mlp-nsys"]["source"] == "python3 tests/user_programs/mlp_steps.py --steps 3"
    assert rows["ref-h200-kvwrite-fused-nsys"]["source"] == "import nsys-kvwrite-fused.sqlite.gz"
