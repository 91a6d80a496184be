"""The shape of the package, checked so anyone can repeat it: small modules, no import cycle,
data flowing one way (capture -> trace -> analysis -> viz/report), and no helper written twice.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"
MAX_LINES = 400

# The basics every layer may use; they import only each other.
BASICS = ("errors", "textfmt", "vocabulary", "patterns", "devices", "settings")
# At most this many modules directly under workbench/ besides __init__ and __main__.
TOP_LEVEL_MAX = 8

# Package -> the packages it must never import: the later stages of the loop (capture ->
# trace -> analysis -> sets -> viz/report), the code that drives captures, and the command line.
FORBIDDEN = {
    "workbench.instrument": ("trace", "analysis", "sets", "viz", "reporting", "capturing", "workloads", "engines",
                             "cli"),
    "workbench.trace": ("analysis", "sets", "viz", "reporting", "capturing", "workloads", "engines", "instrument",
                        "cli"),
    "workbench.analysis": ("sets", "viz", "reporting", "capturing", "workloads", "engines", "instrument", "cli"),
    "workbench.sets": ("viz", "reporting", "capturing", "workloads", "engines", "instrument", "cli"),
    "workbench.workloads": ("sets", "viz", "reporting", "capturing", "engines", "cli"),
    "workbench.viz": ("reporting", "capturing", "engines", "instrument", "cli"),
    "workbench.reporting": ("capturing", "engines", "instrument", "cli"),
    "workbench.engines": ("viz", "reporting", "capturing", "cli"),
    "workbench.capturing": ("viz", "reporting", "cli"),
    **{f"workbench.{b}": ("instrument", "trace", "analysis", "sets", "workloads", "viz", "reporting", "capturing",
                          "engines", "cli") for b in BASICS},
}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name: its Python files, and its C extensions
    (named by their sources), which import nothing of the package."""
    out = {}
    for f in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.c")]):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


# Module-level tables of lazily imported modules: a package's public names (``_API``) and the
# workloads' registry; their string values name modules ("pkg.mod", "pkg.mod:attr", or in a
# package a submodule's short name).
LAZY_TABLES = ("_API", "_REGISTRY")


def _lazy_names(tree: ast.Module) -> list[str]:
    """The module names a file loads by name: ``import_module``/``__import__`` arguments and
    the values of its lazy tables."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            out.append(node.args[0].value)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
              and any(getattr(t, "id", None) in LAZY_TABLES for t in node.targets)):
            out += [v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return [str(n).partition(":")[0] for n in out]


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The workbench modules ``name`` imports anywhere in its body (lazy imports too, and
    those it loads by name: see :func:`_lazy_names`)."""
    if path.suffix == ".c":
        return set()
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    tree = ast.parse(path.read_text(), str(path))
    found = {t for n in _lazy_names(tree) for t in ((n, f"{name}.{n}") if is_pkg else (n,))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                stem = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # "from . import x" and "from .pkg import sub" name modules; else the stem itself.
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem for a in node.names]
        else:
            continue
        found.update(targets)
    return {t for t in found if t in known and t != name}


def test_no_module_is_over_the_size_limit():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items() if path.suffix == ".py"}
    big = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_no_import_cycle():
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_nothing_imports_upward():
    known = _modules()
    bad = []
    for name, path in known.items():
        for package, banned in FORBIDDEN.items():
            if name == package or name.startswith(package + "."):
                bad += [f"{name} imports {t}" for t in sorted(_imports(name, path, known))
                        if any(t == f"workbench.{b}" or t.startswith(f"workbench.{b}.") for b in banned)]
    assert not bad, "\n".join(bad)


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="the duplicates command is not installed here")
def test_no_duplicated_code_in_the_package():
    out = subprocess.run(["duplicates", "--repo", str(PACKAGE), "--most", "50", "--seconds", "120"],
                         capture_output=True, text=True, timeout=300).stdout
    assert out.splitlines()[0].startswith("no duplicates"), out


def test_the_top_of_the_package_is_its_face_and_the_basics():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= TOP_LEVEL_MAX and set(top) <= set(BASICS), top


def test_every_parser_is_in_the_cli_package():
    outside = [str(f.relative_to(PACKAGE)) for f in PACKAGE.rglob("*.py") if f.parent.name != "cli"
               and ("ArgumentParser" in f.read_text() or "add_parser(" in f.read_text())]
    assert not outside, outside


def test_only_the_command_line_imports_the_command_line():
    known = _modules()
    bad = [f"{name} imports {t}" for name, path in known.items()
           if not (name.startswith("workbench.cli") or name == "workbench.__main__")
           for t in sorted(_imports(name, path, known)) if t.startswith("workbench.cli")]
    assert not bad, "\n".join(bad)


def test_no_package_name_is_also_a_submodule():
    """``from pkg import name`` must give one thing: a package whose face exports ``name`` and
    that has a submodule ``name`` gives the function or the module depending on import order."""
    clash = []
    for init in PACKAGE.rglob("__init__.py"):
        subs = {p.stem for p in init.parent.glob("*.py")} | {p.name for p in init.parent.iterdir() if p.is_dir()}
        tree = ast.parse(init.read_text())
        names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level
                 for a in n.names if f"{(n.module or '')}" != a.name}
        clash += [f"{init.parent.name}.{n}" for n in sorted(names & subs)
                  if not any(isinstance(x, ast.ImportFrom) and x.level and not x.module and any(a.name == n for a in x.names)
                             for x in ast.walk(tree))]
    assert not clash, clash


def test_every_environment_variable_is_read_in_settings_and_documented():
    from workbench import settings

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [v.name for v in (*settings.VARIABLES, *settings.FOREIGN) if f"| `{v.name}` |" not in doc]
    assert not missing, f"docs/architecture.md's variables table lacks {missing}"
    reads = ("os.environ.get(", "os.getenv(", "os.environ[")
    readers = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "settings.py"
               and any(r in p.read_text(encoding="utf-8") for r in reads)]
    assert not readers, f"environment read outside settings.py: {readers}"
