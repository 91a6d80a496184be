"""The committed compiler profiles of the C accelerators (``workbench/trace/pgo/``) describe
the sources as they are, and a build with the compiler that made them applies them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PGO = ROOT / "workbench" / "trace" / "pgo"
MADE = json.loads((PGO / "profiles.json").read_text())
REMAKE = "run scripts/pgo_profiles.py after changing a .c file"


def _gcc() -> str | None:
    if not shutil.which("gcc"):
        return None
    return subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("module", sorted(MADE["profiles"]))
def test_profiles_describe_the_sources(module):
    entry = MADE["profiles"][module]
    assert (PGO / f"{module}.gcda").is_file()
    assert hashlib.sha256((ROOT / entry["source"]).read_bytes()).hexdigest() == entry["sha256"], REMAKE


@pytest.mark.skipif(_gcc() != MADE["gcc"], reason=f"the profiles are for GCC {MADE['gcc']}")
def test_a_build_applies_them_to_every_function(tmp_path):
    """With WORKBENCH_PGO=check a function the profile does not describe fails the build (GCC
    drops such a profile silently otherwise); the accelerators are built into tmp_path."""
    before = {p.name: p.read_bytes() for p in PGO.iterdir()}
    r = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--force", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "obj")],
        cwd=ROOT, env=dict(os.environ, WORKBENCH_PGO="check"), capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for module in MADE["profiles"]:
        assert f"workbench.trace.{module}: compiled with the profile" in r.stdout, r.stderr[-3000:]
        assert list((tmp_path / "lib").rglob(f"{module}.*.so"))
    assert {p.name: p.read_bytes() for p in PGO.iterdir()} == before  # read, never written
