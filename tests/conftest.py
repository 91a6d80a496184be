"""Shared fixtures: real captures from ../shared (skipped when absent) and a private store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
REFERENCE = SHARED / "reference-captures" / "h200"
EXTERNAL = SHARED / "external-traces"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


@pytest.fixture
def reference():
    return lambda name: _need(REFERENCE / name)


@pytest.fixture
def external():
    return lambda name: _need(EXTERNAL / name)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty trace store, also exported as WORKBENCH_TRACES for the CLI."""
    root = tmp_path / "traces"
    root.mkdir()
    monkeypatch.setenv("WORKBENCH_TRACES", str(root))
    return root


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO, timeout=600)


@pytest.fixture
def cli():
    return run_cli


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
