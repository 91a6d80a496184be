"""scripts/setup.sh is quiet: a line per stage, pip's output in .venv/setup.log, and on failure
the log's tail and its path (a full install from scratch takes minutes, so these tests take the
paths that need none: a set-up venv, and installs that fail at once)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

SETUP = REPO / "scripts" / "setup.sh"


def _checkout(tmp_path: Path) -> Path:
    """What setup.sh reads of a checkout, copied: the script, the packaging files, the C sources."""
    for rel in ("scripts/setup.sh", "pyproject.toml", "setup.py", "constraints.txt",
                *(str(p.relative_to(REPO)) for p in (REPO / "workbench").rglob("*.c"))):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    return tmp_path


def _run(checkout: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env}, timeout=600)


def test_a_failed_install_prints_the_end_of_its_log_and_where_it_is(tmp_path):
    checkout = _checkout(tmp_path)
    # A real venv without pip: the install fails at once, as one with a broken index would.
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(checkout / ".venv")], check=True)
    done = _run(checkout)
    log = checkout / ".venv" / "setup.log"
    assert done.returncode == 1, done
    assert done.stdout.splitlines() == ["setup: installing workbench and its dependencies (log: .venv/setup.log)"]
    err = done.stderr.splitlines()
    assert err[0] == "setup: pip install failed; the end of .venv/setup.log:", done.stderr
    assert err[-1] == f"setup: full log: {log}"
    assert "No module named pip" in done.stderr and "No module named pip" in log.read_text()
    assert not (checkout / ".venv" / "setup.stamp").exists()


def test_a_python_that_makes_no_venv_is_named(tmp_path):
    checkout = _checkout(tmp_path)
    done = _run(checkout, PYTHON=str(tmp_path / "no-python"))
    assert done.returncode == 1
    assert done.stdout == "setup: creating .venv\n"
    assert done.stderr.startswith(f"setup: '{tmp_path / 'no-python'} -m venv .venv' failed:\n"), done.stderr


@pytest.mark.skipif(not (REPO / ".venv" / "setup.stamp").exists()
                    or Path(sys.prefix).resolve() != (REPO / ".venv").resolve(),
                    reason="this checkout's .venv was not made by scripts/setup.sh (or the tests run in another)")
def test_a_second_run_only_checks_and_says_so_in_one_line():
    log = REPO / ".venv" / "setup.log"
    before = log.stat().st_size if log.exists() else 0
    done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done
    assert done.stdout == "setup: .venv is up to date\n" and done.stderr == "", done
    assert "WARNING" not in log.read_text()[before:]
