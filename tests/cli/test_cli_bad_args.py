"""Every command of the command line with every class of bad argument that applies to it: exit 2,
exactly one line on stderr starting ``workbench: ``, no traceback, nothing new in the store.

The commands and their options come from the parser itself (``cli.build_parser``), so a new
command or option is covered as it is added: an option is tried with the bad values of its
checked type (``workbench.cli.args``) or choices, and one that is neither must be listed in
``FREE`` with the reason it takes any text. Values checked when the command line is read run
with every command's own function replaced, so a bad value that got through would fail the
test instead of running a capture or a demo. What can only be known from a trace (a missing
one, a layer group that matched no number, a file the SQL tries to read) runs for real,
in-process; a missing plotly runs in a subprocess that blocks its import.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CORPUS, CPU_TRACE, REPO, assert_one_line
import workbench.cli.entry as cli

FIXTURE = CPU_TRACE

# Bad values of each kind of checked option (workbench.cli.args), and the options of each kind:
# an option of these names on any command, a new one included, is tried with them.
_COUNT = ["-1", "0", "abc", "1.5", ""]
_REGEX = ["(", "[a-", "*"]
_NAME = ["../x", "a/b", "a\\b", ".hidden", "..", "a b", "x\n", "con", "a" * 129, "", "u\u0308", "x\x1b[31m"]
BAD = {
    **dict.fromkeys(("--threads", "--layers", "--top", "--workers", "--rounds", "--steps", "--repeats", "--warmup"),
                    _COUNT),
    **dict.fromkeys(("--step-regex", "--prefill-regex", "--modules"), _REGEX),
    "--layer-regex": ["(", "layers", "*"],
    **dict.fromkeys(("--name", "--set", "name"), _NAME),  # name: the recipe command's recipe
    "--fail-if": ["kernels>abc", "kernels>-1", "bogus>1", "decode_step>5"],
    "query": ["", "   ", "-- only a comment", "/* c */", "selec", "select 1; select 2", "copy (select 1) to 'x.csv'",
              "create table x as select 1", "attach 'x.db'", "install httpfs", "load httpfs", "set threads=1",
              "pragma version", "insert into kernels select * from kernels"],
    "--device": ["bogus", "cuda:x", "cpu:0", ""],
    "--backend": ["perfetto", ""],
    "--engine": ["onnx", ""],
    "--variant": ["bad", "=x"],
}
# Options that take any text, and why: checked where they are used (a path, a module), or not
# the workbench's to judge.
FREE = {
    "--root": "the store directory: a file there is refused when the store is used",
    "--md": "a report path: checked by reporting.output before any work",
    "--html": "a report path: checked by reporting.output before any work",
    "--sweep": "a sweep results file, read and checked by reporting.inputs",
    "--title": "any title",
    "--chrome": "the export path: checked by trace.chrome",
    "--out": "the demo's output directory",
    "--call": "MODULE:FUNCTION, resolved (and refused in one line) before any capture",
    "--ray-address": "a Ray address, joined by Ray",
    "--run-id": "any run id (with --set; refused without it)",
    "--variant": "import: any variant label (with --set; refused without it)",
    "--split": "with --set, checked by trace.split before any member is imported; refused without --set",
}
# Positionals: valid stand-ins (a stored trace "t"), and those that name a trace or file.
STAND_IN = {"query": "select 1", "workload": None, "more": None}
TRACE_ARGS = {"trace", "a", "b", "base", "fix", "src", "refs"}


def _subparsers(parser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _kind(action) -> str | None:
    """``choices``, ``checked`` (a type of workbench.cli.args), or None."""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "choices"
    return "checked" if action.type is not None else None


def _base(parser, tmp: Path, missing: str | None = None) -> list[str]:
    """A command line the parser takes: a stand-in for each positional (``nope`` for the one
    named ``missing``), each required option."""
    argv = []
    for a in parser._actions:
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction):
            value = "nope" if a.dest == missing else STAND_IN.get(a.dest, "t")
            if value is not None and a.nargs != "?":
                argv += [value, "t"] if a.nargs == "+" else [value]  # bench compares two at least
        elif a.required:
            argv += [a.option_strings[0], str(tmp / "out.json")]
    return argv


def _entries(root: Path) -> list[str]:
    return sorted(os.listdir(root))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("store") / "traces"
    assert cli.main(["--root", str(r), "import", str(FIXTURE), "--name", "t"]) == 0
    return r


def _one_line(capsys, code: int, must_name: str, root: Path, before: list[str]) -> str:
    out, err = capsys.readouterr()
    assert code == 2, (code, err)
    line = assert_one_line(err, must_name)
    assert _entries(root) == before, "the store changed"
    return line


def _name(action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


def _cases():
    parser = cli.build_parser()
    commands = [(None, parser)] + list(_subparsers(parser).items())  # global options first
    cases = []
    for command, p in commands:
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.nargs == 0:
                continue
            name, kind = _name(action), _kind(action)
            if kind == "choices":
                cases.append((command, name, "bogus"))
            elif kind == "checked":
                assert name in BAD, f"{command} {name}: checked when read, but the test has no bad values for it"
                cases += [(command, name, v) for v in BAD[name]]
            else:
                assert name in FREE or name in STAND_IN or name in TRACE_ARGS, \
                    f"{command} {name}: neither checked when read (workbench.cli.args) nor listed in FREE"
    return cases


CASES = _cases()


def test_every_command_is_covered():
    parser = cli.build_parser()
    tried = {c for c, *_ in CASES}
    # A command none of whose options is checked when read has only the run-time classes below.
    for command, sub in _subparsers(parser).items():
        assert command in tried or not any(_kind(a) for a in sub._actions), command
    assert {"summary", "sql", "diff", "report", "import", "capture", "bench", "demo"} <= tried


@pytest.fixture
def no_run(monkeypatch):
    """``cli.build_parser`` with every command's function replaced by a failure: a bad value
    that got through the parser fails the test instead of running a capture or a demo."""
    real = cli.build_parser

    def parser_without_running():
        p = real()
        for command, sub in _subparsers(p).items():
            def ran(args, command=command):
                raise AssertionError(f"{command} ran with {vars(args)}")

            sub.set_defaults(func=ran)
        return p

    monkeypatch.setattr(cli, "build_parser", parser_without_running)
    return real


@pytest.mark.parametrize("command,option,value", CASES, ids=[f"{c or 'workbench'} {o} {v!r}"[:60] for c, o, v in CASES])
def test_bad_value_is_refused_when_read(command, option, value, root, tmp_path, capsys, no_run):
    before = _entries(root)
    if command is None:
        argv = ["--root", str(root), option, value, "list"]
    else:
        argv = ["--root", str(root), command, *_base(_subparsers(no_run())[command], tmp_path)]
        if option.startswith("-"):
            argv += [option, value]
        else:  # a checked positional: in its place
            argv[argv.index(STAND_IN.get(option, "t"), 3)] = value
    _one_line(capsys, cli.main(argv), option, root, before)


@pytest.mark.parametrize("command", sorted(_subparsers(cli.build_parser())) + [None])
def test_unknown_option_and_missing_arguments(command, root, tmp_path, capsys, no_run):
    """An option no command has, and a command line missing what it requires: argparse's
    complaint in one line, not a usage block."""
    before = _entries(root)
    base = ["list"] if command is None else [command, *_base(_subparsers(no_run())[command], tmp_path)]
    _one_line(capsys, cli.main(["--root", str(root), *base, "--no-such-option"]), "--no-such-option", root, before)
    short = [] if command is None else [command]
    if command is None or any(a.required for a in _subparsers(no_run())[command]._actions):
        _one_line(capsys, cli.main(["--root", str(root), *short]), "required", root, before)


# ---------------------------------------------------------------- classes only a run can find

def _trace_places():
    """(command, positional) for each place a command takes a trace or file, from the parser."""
    return [(command, a.dest) for command, sub in _subparsers(cli.build_parser()).items()
            for a in sub._actions if not a.option_strings and a.dest in TRACE_ARGS]


@pytest.mark.parametrize("command,dest", _trace_places())
def test_missing_trace(command, dest, root, tmp_path, capsys):
    before = _entries(root)
    argv = [command, *_base(_subparsers(cli.build_parser())[command], tmp_path, missing=dest)]
    _one_line(capsys, cli.main(["--root", str(root), *argv]), "nope", root, before)


@pytest.mark.parametrize("command", ["summary", "sql", "diff", "report"])
@pytest.mark.parametrize("pattern", ["(Layer)", "(x)?nn", r"Layer(_)"])
def test_layer_group_that_is_no_number(command, pattern, root, capsys):
    """A group that matched something else than a number in the trace's range names."""
    argv = {"summary": ["t"], "sql": ["t", "select count(*) from projected"], "diff": ["t", "t"],
            "report": ["t", "t"]}[command]
    before = _entries(root)
    line = _one_line(capsys, cli.main(["--root", str(root), command, *argv, "--layer-regex", pattern]),
                     "--layer-regex", root, before)
    assert "not a layer number" in line


@pytest.mark.parametrize("query", ["select * from read_csv('/etc/passwd')", "select * from read_parquet('{root}/t/kernels.parquet')",
                                   "select * from glob('/*')", "select * from read_text('/etc/hostname')"])
def test_sql_reads_no_file(query, root, capsys):
    before = _entries(root)
    line = _one_line(capsys, cli.main(["--root", str(root), "sql", "t", query.format(root=root)]), "t", root, before)
    assert "SQL error" in line


def test_sql_still_reads_the_trace_and_its_views(root, capsys):
    assert cli.main(["--root", str(root), "sql", "t", "select count(*) as n from kernels"]) == 0
    assert "388" in capsys.readouterr().out
    assert cli.main(["--root", str(root), "sql", "t", "select count(*) as n from projected where layer >= 0"]) == 0
    assert cli.main(["--root", str(root), "sql", "t", "describe kernels"]) == 0


def test_set_options_without_a_set(root, capsys):
    for option, value in (("--split", "process"), ("--split", "bogus"), ("--run-id", "r1"), ("--variant", "v")):
        before = _entries(root)
        _one_line(capsys, cli.main(["--root", str(root), "import", str(FIXTURE), option, value]), option, root, before)


def test_names_of_any_script_and_derived_names_that_clash(root, tmp_path, capsys):
    """Letters of any script make a name (given or derived from the file); two file names that
    make one name are refused in one line that names the clash, and --force is named as such."""
    for f in ("x ü.json.gz", "x ö.json.gz", "x?ö.json.gz"):
        shutil.copy(FIXTURE, tmp_path / f)
    assert cli.main(["--root", str(root), "import", str(tmp_path / "x ü.json.gz")]) == 0
    assert cli.main(["--root", str(root), "import", str(tmp_path / "x ö.json.gz")]) == 0
    assert cli.main(["--root", str(root), "import", str(FIXTURE), "--name", "ü"]) == 0
    capsys.readouterr()
    assert {"x_ü", "x_ö", "ü"} <= set(_entries(root))
    before = _entries(root)
    line = _one_line(capsys, cli.main(["--root", str(root), "import", str(tmp_path / "x?ö.json.gz")]), "x_ö",
                     root, before)
    assert "made from 'x?ö.json.gz'" in line and "--force" in line and "overwrite" not in line
    for name in ("x_ü", "x_ö", "ü"):
        shutil.rmtree(root / name)


def test_import_prints_the_source_note(root, capsys):
    src = CORPUS / "kineto-2023-hta-cupti-profiler-range.json.gz"
    if not src.exists():
        pytest.skip("corpus not present")
    assert cli.main(["--root", str(root), "import", str(src), "--name", "noted"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("# ") and "cuda_profiler_range" in out[1]
    assert cli.main(["--root", str(root), "summary", "noted"]) == 0
    assert any(ln.startswith("# ") and "cuda_profiler_range" in ln for ln in capsys.readouterr().out.splitlines())
    shutil.rmtree(root / "noted")


_BLOCK_PLOTLY = '''
import sys
class _NoPlotly:
    def find_spec(self, name, path=None, target=None):
        if name == "plotly" or name.startswith("plotly."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoPlotly())
'''


def test_report_without_plotly_writes_the_markdown(root, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_BLOCK_PLOTLY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(REPO)]))
    before = _entries(root)
    r = subprocess.run([sys.executable, "-m", "workbench", "--root", str(root), "report", "t", "t",
                        "-o", str(tmp_path / "r.html"), "--md", str(tmp_path / "r.md")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: ") and "pip install 'workbench[viz]'" in lines[0], lines
    assert (tmp_path / "r.md").read_text().startswith("# ")
    assert not (tmp_path / "r.html").exists()
    assert _entries(root) == before
