"""Nothing in a trace is ever run or rendered: no pickle/eval/exec/template evaluation in the
package, trace names cannot leave the store, and trace text is escaped in terminal, Markdown
and HTML output.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import REPO, run_cli
import tracegen as tg

from workbench.errors import WorkbenchError  # noqa: E402
from workbench.textfmt import clean, one_line  # noqa: E402
from workbench.trace import import_file, list_traces, open_trace, save  # noqa: E402
from workbench.trace.store import check_name, load  # noqa: E402

# ---------------------------------------------------------------- static: what the package may not do

PKG = REPO / "workbench"
FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "yaml", "ruamel", "jinja2",
                     "mako", "chameleon", "joblib", "jsonpickle"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "execfile", "input"}
FORBIDDEN_ATTRS = {"read_pickle", "to_pickle", "unsafe_load", "full_load", "system", "popen", "Template",
                   "format_map", "literal_eval"}
# import_module with a computed name is only allowed where the name comes from a fixed table in code,
# or where importing a module the user names is the point: a workload plugin or a profiled function
# given as module:attribute on the command line or in a call (never a name read from a trace).
DYNAMIC_IMPORT_OK = {"__init__.py", "cli.py", "workloads/__init__.py", "viz/__init__.py", "workloads/plugins.py"}


def _py_files():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def test_package_has_no_code_execution_paths():
    problems = []
    for path in _py_files():
        rel = path.relative_to(PKG).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in FORBIDDEN_MODULES:
                        problems.append(f"{where}: import {a.name}")
            elif isinstance(node, ast.ImportFrom):
                if (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
                    problems.append(f"{where}: from {node.module} import")
                if node.module == "string" and any(a.name == "Template" for a in node.names):
                    problems.append(f"{where}: string.Template")
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in FORBIDDEN_CALLS:
                    problems.append(f"{where}: {f.id}()")
                if isinstance(f, ast.Name) and f.id == "__import__" and not (
                        node.args and isinstance(node.args[0], ast.Constant)):
                    problems.append(f"{where}: __import__ of a computed name")
                if isinstance(f, ast.Attribute):
                    if f.attr in FORBIDDEN_ATTRS:
                        problems.append(f"{where}: .{f.attr}()")
                    if f.attr == "load" and isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy"):
                        for kw in node.keywords:
                            if kw.arg == "allow_pickle":
                                problems.append(f"{where}: np.load(allow_pickle=...)")
                    if f.attr in ("eval", "query") and node.args and not isinstance(node.args[0], ast.Constant):
                        problems.append(f"{where}: DataFrame.{f.attr} of a computed expression")
                    if f.attr == "format" and not isinstance(f.value, ast.Constant):
                        problems.append(f"{where}: .format() on a computed template (format-string injection)")
                    if f.attr == "import_module" and node.args and not isinstance(node.args[0], (ast.Constant, ast.JoinedStr)) \
                            and rel not in DYNAMIC_IMPORT_OK:
                        problems.append(f"{where}: import_module of a computed name")
                for kw in node.keywords:
                    if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        problems.append(f"{where}: subprocess with shell=...")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- runtime: payloads stay data

PAYLOADS = [
    "__import__('os').system('touch PWNED_eval')",
    "{0.__class__.__mro__}", "{{7*7}}", "${7*7}", "<%= 7*7 %>", "#{7*7}",
    "$(touch PWNED_shell)", "`touch PWNED_tick`", "; touch PWNED_semi",
    "<script>alert('x')</script>", "</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>",
    "\x1b]52;c;cHduZWQ=\x07", "\x1b[2J\x1b[H", "\u202egnp.exe", "')); DROP TABLE kernels; --",
    "cos\x00mic", "[link](javascript:alert(1))", "| a | b |\n|---|---|",
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    spec = tg.simple_spec(steps=1, layers=2, kernels_per_range=1)
    n = len(PAYLOADS)
    spec["ranges"] = [(p, t, f"{PAYLOADS[i % n]} {name}", a, b) for i, (p, t, name, a, b) in enumerate(spec["ranges"])]
    spec["kernels"] = [(PAYLOADS[(i + 3) % n] + name, *rest) for i, (name, *rest) in enumerate(spec["kernels"])]
    root = d / "traces"
    fix = dict(spec)
    fix["kernels"] = spec["kernels"][::2]
    a = tg.write_nsys(spec, d / "base.sqlite")
    b = tg.write_kineto(fix, d / "fix.json")
    return {"dir": d, "root": root, "base": a, "fix": b}


def _no_side_effects(d: Path):
    for p in [d, Path.cwd(), REPO]:
        assert not list(p.glob("PWNED*")), list(p.glob("PWNED*"))


def test_payloads_are_kept_as_data(hostile):
    d = hostile["dir"]
    for key in ("base", "fix"):
        t = import_file(hostile[key])
        names = set(t.ranges["name"].astype(str))
        assert any("{{7*7}}" in n for n in names) and not any("49" in n for n in names)
        assert any("__import__('os')" in n for n in names)
    _no_side_effects(d)


def test_cli_outputs_escape_payloads(hostile):
    d, root = hostile["dir"], hostile["root"]
    env = {"WORKBENCH_TRACES": str(root)}  # the store named as a user names it
    for key in ("base", "fix"):
        r = run_cli("import", hostile[key], "--name", key, cwd=d, env=env)
        assert r.returncode == 0, r.stderr
    for args in (("summary", "base"), ("summary", "base", "--by", "path"), ("summary", "fix", "--by", "kernel"),
                 ("sql", "base", "select name from ranges"), ("sql", "base", "select * from projected"),
                 ("list",), ("summary", "base", "--json")):
        r = run_cli(*args, cwd=d, env=env)
        assert r.returncode == 0, (args, r.stderr)
        for bad in ("\x1b", "\x07", "\x00", "\u202e"):
            assert bad not in r.stdout, (args, bad)
    _no_side_effects(d)


def test_report_escapes_payloads(hostile, tmp_path):
    d, root = hostile["dir"], hostile["root"]
    env = {"WORKBENCH_TRACES": str(root)}  # the store named as a user names it
    for key in ("base", "fix"):
        if not (root / key).exists():
            assert run_cli("import", hostile[key], "--name", key, cwd=d, env=env).returncode == 0
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    r = run_cli("report", "base", "fix", "--allow-mixed", "-o", html, "--md", md, cwd=d, env=env)
    if r.returncode == 2:
        pytest.skip(f"report refused these traces: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr[-3000:]
    text = html.read_text()
    for raw in ("<script>alert('x')</script>", "</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>"):
        assert raw not in text, raw
    assert "\x1b" not in text and "\x1b" not in md.read_text()
    assert "javascript:alert" not in md.read_text() or "](javascript:" not in md.read_text()
    _no_side_effects(d)


# ---------------------------------------------------------------- names cannot escape the store

BAD_NAMES = ["../x", "../../etc/passwd", "/abs", "/tmp/x", ".hidden", ".", "..", "a/b", "a\\b", "a\x00b",
             "x\x1b[31m", "a b", "a" * 129, "", "-rf", "~root", "$HOME", "name\n"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n)[:30] for n in BAD_NAMES])
def test_bad_names_rejected(tmp_path, name):
    t = import_file(tg.write_kineto(tg.simple_spec(steps=1, layers=1), tmp_path / "t.json"))
    root = tmp_path / "traces"
    with pytest.raises(WorkbenchError):
        check_name(name)
    with pytest.raises(WorkbenchError):
        save(t, name, root)
    assert not root.exists() or list(root.iterdir()) == []
    assert not (tmp_path / "x").exists()


def test_open_by_name_does_not_traverse(tmp_path):
    root = tmp_path / "store" / "traces"
    outside = tmp_path / "store" / "outside"
    t = import_file(tg.write_kineto(tg.simple_spec(steps=1, layers=1), tmp_path / "t.json"))
    save(t, "inside", root)
    save(t, "outside", outside.parent / "elsewhere")
    for name in (".hidden", "..", "x\x1b"):
        with pytest.raises(WorkbenchError):
            open_trace(name, root)


def test_symlink_in_store_is_not_followed_for_writing(tmp_path):
    """A symlink planted in the store (traces/evil -> a directory outside) is swapped away on
    ``--force``, never written through, and its target is left untouched."""
    root = tmp_path / "traces"
    t = import_file(tg.write_kineto(tg.simple_spec(steps=1, layers=1), tmp_path / "t.json"))
    save(t, "real", root)
    target = tmp_path / "precious"
    target.mkdir()
    (target / "manifest.json").write_text('{"keep": true}')
    (target / "data.txt").write_text("do not touch")
    (root / "evil").symlink_to(target, target_is_directory=True)
    save(t, "evil", root, overwrite=True)
    assert (target / "data.txt").read_text() == "do not touch"
    assert (target / "manifest.json").read_text() == '{"keep": true}'
    assert not (root / "evil").is_symlink()
    assert load(root / "evil").meta["name"] == "evil"
    assert list_traces(root) == ["evil", "real"]


# ---------------------------------------------------------------- the terminal cleaner itself

@pytest.mark.parametrize("raw", ["\x1b[31mred", "\x9b31m", "\x07bell", "a\rb", "\x1b]0;title\x07", "x\u202ey",
                                 "\u2066iso\u2069", "del\x7f", "nul\x00"])
def test_clean_removes_control_characters(raw):
    out = one_line(raw)
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c in "\u202e\u2066\u2069" for c in out), repr(out)
    assert clean(raw) != raw


def test_one_line_keeps_one_line_and_bounds_length():
    assert one_line("a\nb\tc") == "a\\nb\\tc"
    s = one_line("A" * 10_000_000, 200)
    assert len(s) <= 201 and s.startswith("A") and "…" in s
