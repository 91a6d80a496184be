"""The store under faults: ``kill -9`` of ``workbench import`` at every stage of its work, and
concurrent writers of one trace name.

Whatever happens, the store holds the complete new trace or nothing visible under that name
(a replaced trace: the complete old one or the complete new one), an earlier trace stays
intact byte for byte, and leftovers never block the next import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tracegen as tg

from workbench.trace import import_file, list_traces, load_dir, save
from workbench.trace.store import content_hash


def _spawn(*args, root: Path) -> subprocess.Popen:
    env = dict(os.environ, WORKBENCH_TRACES=str(root))
    return subprocess.Popen([sys.executable, "-m", "workbench", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _assert_complete(d: Path, counts: dict[str, int]):
    t = load_dir(d)
    assert {k: len(v) for k, v in t.tables.items()} == counts
    assert t.meta["content_sha256"] == content_hash(d)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("atomic")
    big = tg.write_kineto(tg.simple_spec(steps=12, layers=60, kernels_per_range=12), d / "big.json")
    small = tg.write_nsys(tg.simple_spec(steps=1, layers=2), d / "small.sqlite")
    other = tg.write_kineto(tg.simple_spec(steps=3, layers=4), d / "other.json")
    return {"big": big, "small": small, "other": other}


def _counts(f: Path) -> dict[str, int]:
    t = import_file(f)
    return {k: len(v) for k, v in t.tables.items()}


# Stages of an import, seen from outside: (label, condition on the store directory).
def _tmp_dirs(root):
    return [p for p in root.iterdir() if p.name.startswith(".tmp-")] if root.exists() else []


STAGES = [
    ("while parsing (0.4 s)", None, 0.4),
    ("while parsing (1.2 s)", None, 1.2),
    ("temp dir created", lambda root: bool(_tmp_dirs(root)), None),
    ("first table written", lambda root: any(len(list(t.iterdir())) >= 1 for t in _tmp_dirs(root)), None),
    ("three tables written", lambda root: any(len(list(t.iterdir())) >= 3 for t in _tmp_dirs(root)), None),
    ("manifest written", lambda root: any((t / "manifest.json").exists() for t in _tmp_dirs(root)), None),
    ("published", lambda root: (root / "big").exists(), None),
]


def _kill_at(proc: subprocess.Popen, root: Path, cond, delay) -> str:
    """SIGKILL the process when ``cond(root)`` first holds (or after ``delay``); returns what happened."""
    t0 = time.monotonic()
    while proc.poll() is None:
        if (delay is not None and time.monotonic() - t0 >= delay) or (cond is not None and cond(root)):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return "killed"
        if time.monotonic() - t0 > 120:
            proc.kill()
            raise AssertionError("import did not finish in 120 s")
        time.sleep(0.0005)
    return "finished first"


@pytest.mark.parametrize("label,cond,delay", STAGES, ids=[s[0] for s in STAGES])
def test_kill_during_import(files, tmp_path, label, cond, delay):
    root = tmp_path / "traces"
    save(import_file(files["small"]), "keep", root)
    keep = _snapshot(root / "keep")
    want = _counts(files["big"])

    outcome = _kill_at(_spawn("import", files["big"], "--name", "big", root=root), root, cond, delay)
    print(f"\n{label}: {outcome}; store: {sorted(p.name for p in root.iterdir())}")

    visible = list_traces(root)
    assert visible in (["keep"], ["big", "keep"]), visible
    assert _snapshot(root / "keep") == keep  # the earlier trace, byte for byte
    if "big" in visible:
        _assert_complete(root / "big", want)
    # Leftovers (hidden .tmp-*) never block the next import of the same name.
    r = subprocess.run([sys.executable, "-m", "workbench", "import", files["big"], "--name", "big", "--force"],
                       env=dict(os.environ, WORKBENCH_TRACES=str(root)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _assert_complete(root / "big", want)
    assert list_traces(root) == ["big", "keep"]


def test_leftovers_of_killed_writers_are_swept_once_stale(files, tmp_path):
    """A writer killed mid-save leaves its hidden directory; the next save removes it once it
    is older than any save takes, and leaves a younger one (a live writer's) alone."""
    root = tmp_path / "traces"

    def leftover(name):
        return next((p for p in _tmp_dirs(root) if p.name.startswith(f".tmp-{name}-")), None)

    for name in ("old", "young"):
        def written(root, name=name):
            d = leftover(name)
            return d is not None and len(list(d.iterdir())) >= 3

        assert _kill_at(_spawn("import", files["big"], "--name", name, root=root), root, written, None) == "killed"
    old, young = leftover("old"), leftover("young")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))

    save(import_file(files["small"]), "next", root)
    assert not old.exists() and young.is_dir()
    assert list_traces(root) == ["next"]


REPLACE_STAGES = [s for s in STAGES if s[2] is None and s[0] != "published"]  # "manifest written": just before the swap


@pytest.mark.parametrize("label,cond,delay", REPLACE_STAGES, ids=[s[0] for s in REPLACE_STAGES])
def test_kill_during_replace(files, tmp_path, label, cond, delay):
    """``import --force`` over an existing trace: the name always holds the old or the new one, complete."""
    root = tmp_path / "traces"
    save(import_file(files["other"]), "t", root)
    old_counts, new_counts = _counts(files["other"]), _counts(files["big"])
    outcome = _kill_at(_spawn("import", files["big"], "--name", "t", "--force", root=root), root, cond, delay)
    print(f"\n{label}: {outcome}")
    assert list_traces(root) == ["t"]
    t = load_dir(root / "t")
    got = {k: len(v) for k, v in t.tables.items()}
    assert got in (old_counts, new_counts)
    _assert_complete(root / "t", got)


def test_kill_at_random_times(files, tmp_path):
    """Six more kills spread over the whole import, for stages the list above may miss."""
    root = tmp_path / "traces"
    want = _counts(files["big"])
    # Spread over this machine's own import time (process start included), measured first:
    # fixed delays would all fall after the end once imports get faster.
    t0 = time.monotonic()
    assert _kill_at(_spawn("import", files["big"], "--name", "timed", root=root), root, None, None) == "finished first"
    took = time.monotonic() - t0
    outcomes = []
    for i in range(6):
        delay = took * (0.1 + 0.15 * i)
        outcomes.append(_kill_at(_spawn("import", files["big"], "--name", f"b{i}", root=root), root, None, delay))
        for name in list_traces(root):
            _assert_complete(root / name, want)
    print(f"\nrandom kills: {outcomes.count('killed')} killed, {outcomes.count('finished first')} finished first")
    assert outcomes.count("killed") >= 3


@pytest.mark.parametrize("force", [False, True], ids=["no-force", "force"])
def test_concurrent_writers_same_name(files, tmp_path, force):
    """Two imports of different traces to one name at once: one wins (the other errors in one
    clean line), or with --force both succeed and the last swap stays. Never a mix."""
    a, b = _counts(files["big"]), _counts(files["other"])
    for rnd in range(2):
        root = tmp_path / f"traces-{rnd}"
        extra = ["--force"] if force else []
        pa = _spawn("import", files["big"], "--name", "same", *extra, root=root)
        pb = _spawn("import", files["other"], "--name", "same", *extra, root=root)
        ra, rb = pa.communicate(timeout=300), pb.communicate(timeout=300)
        codes = (pa.returncode, pb.returncode)
        for (out, err), code in zip((ra, rb), codes):
            assert code in (0, 2), err
            assert "Traceback" not in err
            if code == 2:
                assert len(err.splitlines()) == 1 and "exists" in err, err
        assert 0 in codes
        if force:
            assert codes == (0, 0)
        else:
            assert sorted(codes) == [0, 2], codes
        assert list_traces(root) == ["same"]
        got = {k: len(v) for k, v in load_dir(root / "same").tables.items()}
        assert got in (a, b)
        _assert_complete(root / "same", got)
        assert not [p for p in root.iterdir() if p.name.startswith(".")], list(root.iterdir())
