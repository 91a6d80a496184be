"""What tests share: the repository's paths and the ways tests run the real CLI and compare tables.

Tests live one folder below this module (tests/<capability>/test_*.py); they take every path from
here, so a test can move between folders without path arithmetic. pyproject's pytest
``pythonpath`` puts this folder on sys.path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"  # small committed fixtures
CORPUS = TESTS / "corpus"  # real traces from other people's tools, with tests/corpus_truth.py
BADINPUT = TESTS / "badinput"  # the bad-input corpus generator and its workers
USER_PROGRAMS = TESTS / "user_programs"  # programs a user would capture
CPU_TRACE = DATA / "kineto-llama-modules.json.gz"  # a small real CPU Kineto capture with module ranges
TRACES = REPO / "traces"  # the committed trace store
SHARED = REPO.parent / "shared"  # captures too large to commit; tests skip what is absent
REFERENCE = SHARED / "reference-captures" / "h200"
EXTERNAL = SHARED / "external-traces"


def run_cli(*args, root: Path | str | None = None, cwd: Path | str | None = None, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m workbench [--root ROOT] ARGS`` in a child process, as a user runs it; the child
    imports this checkout's package (PYTHONPATH=REPO unless ``env`` names another) and starts in
    ``cwd`` (the repository by default). Undecodable output is replaced, so a test sees it."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    prefix = ["--root", str(root)] if root is not None else []
    return subprocess.run([sys.executable, "-m", "workbench", *prefix, *map(str, args)], capture_output=True,
                          text=True, errors="replace", env=full_env, cwd=cwd or REPO, timeout=timeout)


def cli_outcome(*args, **options) -> tuple[int, str, str]:
    """:func:`run_cli`'s (exit status, stdout, stderr)."""
    done = run_cli(*args, **options)
    return done.returncode, done.stdout, done.stderr


def store_entries(root: Path) -> list[str]:
    """Everything in a store, hidden temporary directories included; none where it is absent."""
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def assert_one_line(err: str, must_name: str) -> str:
    """A bad input's answer: one line ``workbench: ...`` naming ``must_name``, no traceback."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: "), err
    assert must_name in lines[0], (must_name, lines[0])
    return lines[0]


def assert_same_frame(a: pd.DataFrame, b: pd.DataFrame, *, ignore_index: bool = False) -> None:
    """Equal values and types, strings compared as strings (a Parquet round trip or a worker's
    pickling may change a categorical's categories, or a str column to pandas' string dtype);
    ``ignore_index`` compares rows by position (tables gathered from workers number rows anew)."""
    def plain(df):
        df = df.reset_index(drop=True) if ignore_index else df
        return df.astype({c: object for c in df.columns
                          if isinstance(df[c].dtype, pd.CategoricalDtype) or df[c].dtype == "string"})
    pd.testing.assert_frame_equal(plain(a), plain(b))
