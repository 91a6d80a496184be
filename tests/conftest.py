"""Shared fixtures: real captures from ../shared (skipped when absent) and a private store."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import EXTERNAL, REFERENCE, run_cli


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
