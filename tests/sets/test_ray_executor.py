"""The Ray path of trace sets on a local Ray instance (``ray.init(num_cpus=2)``): the same task
code a cluster runs (``ray.init(address=...)``) gives the same members and tables as the local
process pool; a member that fails under Ray leaves no set; the command line starts and stops
its own instance (``--executor ray``)."""

from __future__ import annotations

import json

import pytest

from helpers import DATA as TESTDATA, assert_same_frame, run_cli

import workbench as wb

ray = pytest.importorskip("ray")

DATA = TESTDATA / "sets"
CPU4 = sorted((DATA / "cpu4").glob("rank*.json.gz"))
LOCAL = wb.Executor("local", workers=2)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _manifests(ts) -> list[tuple]:
    return [(m["member"], m["rank"], ts.trace(member=m["member"]).meta["content_sha256"])
            for m in ts.meta["members"]]


def test_ray_gives_the_tables_of_the_local_pool(tmp_path, local_ray, external):
    on_ray = wb.import_set("cpu4", CPU4, root=tmp_path / "ray", executor="ray")
    local = wb.import_set("cpu4", CPU4, root=tmp_path / "local", executor=LOCAL)
    assert _manifests(on_ray) == _manifests(local)
    assert on_ray.members.drop(columns="path").equals(local.members.drop(columns="path"))
    for by in ("rank", "rank,layer", "rank,kernel", "rank,step"):
        assert_same_frame(on_ray.summary(by=by), local.summary(by=by), ignore_index=True)
    assert_same_frame(on_ray.steps(), local.steps(), ignore_index=True)
    assert_same_frame(on_ray.stragglers(), local.stragglers(), ignore_index=True)
    assert_same_frame(on_ray.collectives(), local.collectives(), ignore_index=True)
    assert set(on_ray.stragglers()["straggler"]) == {2}
    assert_same_frame(on_ray.diff(on_ray), local.diff(local), ignore_index=True)
    # The 2-GPU nsys export split under Ray as in the local pool.
    src = external("nsys-ai-mfu-2gpu-before.sqlite.gz")
    split_ray = wb.import_set("mfu", [src], root=tmp_path / "ray", executor="ray")
    split_local = wb.import_set("mfu", [src], root=tmp_path / "local", executor=LOCAL)
    assert _manifests(split_ray) == _manifests(split_local)
    assert_same_frame(split_ray.summary(by="rank,layer"), split_local.summary(by="rank,layer"), ignore_index=True)


def test_a_member_failing_under_ray_leaves_no_set(tmp_path, local_ray):
    root = tmp_path / "traces"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(wb.WorkbenchError, match="broken.json"):
        wb.import_set("s", [*CPU4, broken], root=root, executor="ray")
    assert not root.exists() or list(root.iterdir()) == []


def test_cli_starts_and_stops_its_own_ray(tmp_path):
    env = {"WORKBENCH_TRACES": str(tmp_path)}
    r = run_cli("import", "--set", "cpu4", *CPU4, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = run_cli("summary", "cpu4", "--by", "straggler", "--json", "--executor", "ray", "--workers", "2", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    local = run_cli("summary", "cpu4", "--by", "straggler", "--json", env=env)
    assert json.loads(r.stdout) == json.loads(local.stdout)
    assert {row["straggler"] for row in json.loads(r.stdout)} == {2}
