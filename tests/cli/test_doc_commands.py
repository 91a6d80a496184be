"""Every command block of README.md and docs/*.md runs as written, so the examples cannot drift.

A block is a fenced ```bash or ```sh block (run whole) or a ```console block (its ``$ `` lines
run; the other lines are the output it showed). The blocks of one file run in order, in one
fresh clone of this checkout (its uncommitted changes copied in) with the clone's own trace
store, from the clone's root, as a user would paste them: ``workbench`` is a console script on
PATH that runs the clone's package (and, like the installed one, does not put the working
directory on the import path), ``python`` is this test's interpreter.

A block that cannot run here says so on the line before it, and is skipped with that reason:
``<!-- needs: gpu -->``, ``<!-- needs: nsys -->`` (``<!-- needs: gpu, nsys -->``), or
``<!-- skip: REASON -->`` (set-up commands, interactive ones, hours-long benchmarks).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARK = re.compile(r"<!--\s*(needs|skip):\s*(.*?)\s*-->\s*$")
RUNNABLE = {"bash", "sh", "console"}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # the fence's line, 1-based
    script: str
    needs: tuple[str, ...]
    skip: str | None


def _console_commands(body: str) -> str:
    """The ``$ `` lines of a console block, with their ``\\`` continuation lines."""
    commands, continuing = [], False
    for line in body.splitlines():
        if continuing or line.startswith("$ "):
            commands.append(line if continuing else line[2:])
            continuing = line.endswith("\\")
    return "\n".join(commands)


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        if lang not in RUNNABLE:
            continue
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        needs = tuple(w.strip() for w in mark.group(2).split(",")) if mark and mark.group(1) == "needs" else ()
        skip = mark.group(2) if mark and mark.group(1) == "skip" else None
        script = _console_commands(body) if lang == "console" else body
        found.append(Block(str(page.relative_to(REPO)), text.count("\n", 0, m.start()) + 1, script, needs, skip))
    return found


ALL = [b for page in PAGES for b in blocks(page)]


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


HAVE = {"gpu": _has_gpu, "nsys": lambda: shutil.which("nsys") is not None}


def _clone(tmp: Path) -> tuple[Path, dict]:
    """A fresh clone of this checkout under ``tmp`` with its uncommitted changes, and the
    environment a user's shell would have in it."""
    root = tmp / "workbench"
    subprocess.run(["git", "clone", "-q", str(REPO), str(root)], check=True)
    git = ["git", "-C", str(REPO), "ls-files", "-z", "--exclude-standard"]
    for rel in subprocess.run([*git, "--modified", "--others"], check=True, capture_output=True,
                              text=True).stdout.split("\0"):
        if rel and (REPO / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    for rel in subprocess.run([*git, "--deleted"], check=True, capture_output=True, text=True).stdout.split("\0"):
        if rel:
            (root / rel).unlink(missing_ok=True)
    for built in (REPO / "workbench").rglob("*.so"):  # the C readers this checkout built, if any
        shutil.copy2(built, root / built.relative_to(REPO))
    site, bin_ = tmp / "site", tmp / "bin"
    site.mkdir()
    bin_.mkdir()
    (site / "workbench").symlink_to(root / "workbench")  # the package alone, not its checkout
    # As pip writes a console script: the guard keeps a process pool's spawned workers, which
    # re-run the main module, from running the command again.
    (bin_ / "workbench").write_text(f"#!{sys.executable}\nimport sys\nfrom workbench.cli import main\n"
                                    "if __name__ == '__main__':\n    sys.exit(main())\n")
    for name in ("python", "python3"):
        (bin_ / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for script in bin_.iterdir():
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_") and k != "PYTHONPATH"}
    env |= {"PYTHONPATH": str(site), "PATH": f"{bin_}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
            f"{env.get('PATH', '')}", "HOME": str(tmp)}
    return root, env


@pytest.fixture(scope="module")
def clones(tmp_path_factory):
    """One clone per page, made when its first block runs: a page's blocks build on each
    other (a capture, then its summary), pages do not."""
    made = {}

    def of(page: str):
        if page not in made:
            made[page] = _clone(tmp_path_factory.mktemp("docs"))
        return made[page]
    return of


@pytest.mark.parametrize("block", ALL, ids=[f"{b.page}:{b.line}" for b in ALL])
def test_command_block_runs_as_written(block, clones):
    if block.skip:
        pytest.skip(f"marked skip: {block.skip}")
    missing = [n for n in block.needs if not HAVE[n]()]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    root, env = clones(block.page)
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.script], cwd=root, env=env,
                          capture_output=True, text=True, errors="replace", timeout=600)
    assert done.returncode == 0, (f"{block.page}:{block.line} exited {done.returncode}\n{block.script}\n"
                                  f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


def test_every_page_has_a_block_and_every_mark_is_known():
    """The reader above finds the blocks (a fence it misread would silently run nothing)."""
    assert ALL, "no command block found"
    assert {n for b in ALL for n in b.needs} <= set(HAVE)
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert text.count("```") % 2 == 0, f"{page}: an unclosed fence"
        for m in re.finditer(r"<!--\s*(needs|skip):", text):
            after = text[m.start():].split("\n", 2)
            assert len(after) > 1 and after[1].startswith("```"), f"{page}: a mark not right before a fence"


def _anchors(page: Path) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-``."""
    heads = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, broken
