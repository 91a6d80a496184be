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

# Package -> the packages it must never import (the later stages of the loop, and the
# code that drives captures). Everything not listed may be imported.
FORBIDDEN = {
    "workbench.trace": ("analysis", "viz", "reporting", "capturing", "workloads", "engines", "run", "cli",
                        "annotation", "demo", "diff_cli"),
    "workbench.analysis": ("viz", "reporting", "capturing", "workloads", "engines", "run", "cli", "demo", "diff_cli"),
    "workbench.viz": ("reporting", "capturing", "engines", "run", "cli", "demo", "diff_cli"),
    "workbench.reporting": ("capturing", "engines", "run", "cli", "demo", "diff_cli"),
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


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The workbench modules ``name`` imports anywhere in its body (lazy imports too)."""
    if path.suffix == ".c":
        return set()
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
        found.update(t for t in targets if t in known and t != name)
    return found


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
