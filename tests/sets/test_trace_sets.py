"""Trace sets (issue 27): a 4-rank CPU job captured by the workbench becomes a set whose
per-rank summaries are its members' own and whose straggler view names the rank slowed on
purpose; an nsys export of two GPUs splits into two members that add up to the whole; public
multi-rank Kineto traces keep their ranks; sets diff rank against rank; bad input is one line,
exit 2, and leaves no set behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers import DATA as TESTDATA, REPO, run_cli, store_entries

import workbench as wb
from workbench.analysis.diff import diff

DATA = TESTDATA / "sets"
CPU4 = sorted((DATA / "cpu4").glob("rank*.json.gz"))
HTA = sorted((DATA / "hta-sampled").glob("*.json.gz"))
IN_PROCESS = wb.Executor("local", workers=1)


def cli(*args, root: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, env={"WORKBENCH_TRACES": str(root)})


def one_line_error(r: subprocess.CompletedProcess, match: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("workbench: ") and match.lower() in r.stderr.lower(), r.stderr


def assert_member_summaries(ts, by: str = "layer") -> None:
    """The set's per-rank summary is each member's own ``summary(by=...)``, a rank column first."""
    got = ts.summary(by=f"rank,{by}")
    assert list(got.columns)[0] == "rank"
    for rank in sorted(set(ts.members["rank"])):
        own = wb.summary(ts.trace(rank), by=by).reset_index(drop=True)
        mine = got[got["rank"] == rank].drop(columns="rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, own, check_categorical=False)


# ------------------------------------------------------------------ the 4-rank CPU job

@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    """examples/distributed_cpu.py run for real: 4 gloo ranks, rank 2 slowed, each rank stored by
    wb.record as cpu4-rankN."""
    root = tmp_path_factory.mktemp("job")
    done = subprocess.run([sys.executable, str(REPO / "examples" / "distributed_cpu.py"), "--root", str(root)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def test_cpu_job_becomes_a_set(job):
    r = cli("import", "--set", "cpu4", str(job / "cpu4-rank*"), root=job)
    assert r.returncode == 0, r.stderr
    assert "4 members, ranks 0-3" in r.stdout
    ts = wb.open_set("cpu4", root=job, executor=IN_PROCESS)
    # The ranks are the traces' own (distributedInfo), their hosts the capture's.
    assert list(ts.members["rank"]) == [0, 1, 2, 3]
    assert set(ts.members["source"]) == {f"cpu4-rank{i}" for i in range(4)}
    assert ts.members["host"].str.len().min() > 0
    assert ts.trace(2).meta["distributed"]["rank"] == 2 and ts.trace(2).meta["set"]["rank"] == 2
    assert_member_summaries(ts, "layer")
    layers = ts.summary(by="rank,layer")
    assert sorted(set(layers["layer"])) == [0, 1, 2, 3]
    # The straggler of every step is the rank that slept in every layer.
    strag = ts.stragglers()
    assert list(strag["step"]) == ["step_0", "step_1", "step_2"]
    assert set(strag["straggler"]) == {2}, strag
    assert (strag["lag_ns"] > 50e6).all(), strag  # it slept 4 x 30 ms per step
    # Collectives: one all_reduce per layer and step on every rank, most of a fast rank's step.
    coll = ts.collectives()
    assert len(coll) == 4 * 4 * 3 and set(coll["collectives"]) == {1}
    steps = ts.steps()
    assert (steps["collectives"] == 4).all()
    fast = steps[steps["rank"] != 2]
    assert (fast["collective_share"] > steps[steps["rank"] == 2]["collective_share"].max()).all(), steps
    # The command line says the same.
    r = cli("summary", "cpu4", "--by", "straggler", "--json", root=job)
    assert r.returncode == 0, r.stderr
    assert {row["straggler"] for row in json.loads(r.stdout)} == {2}


# ------------------------------------------------------------------ committed and external traces

def test_committed_cpu4_fixture(tmp_path):
    ts = wb.import_set("cpu4", CPU4, root=tmp_path, executor=IN_PROCESS)
    assert list(ts.members["rank"]) == [0, 1, 2, 3]
    assert set(ts.stragglers()["straggler"]) == {2}
    for by in ("layer", "range", "kernel", "step"):
        assert_member_summaries(ts, by)
    over = ts.summary(by="rank")
    assert list(over["straggler_steps"]) == [0, 0, 3, 0]
    assert list(over["kernels"]) == [len(ts.trace(r).kernels) for r in range(4)]
    # SQL over every member at once, with the rank of each row.
    q = ts.sql("select rank, count(*) as n, min(member) as member from kernels group by rank order by rank")
    assert list(q["n"]) == list(over["kernels"]) and list(q["member"]) == [f"rank{i}" for i in range(4)]
    roles = ts.sql("select count(*) as n from ranges join members using (rank)")
    assert roles["n"].iloc[0] == sum(len(ts.trace(r).ranges) for r in range(4))
    # A stored set is no trace: list shows it as a set, its members are not listed on their own.
    r = cli("list", root=tmp_path)
    assert r.returncode == 0 and [ln.split()[:2] for ln in r.stdout.splitlines()[1:]] == [["cpu4", "set"]], r.stdout


def test_nsys_two_gpu_export_splits_per_process(tmp_path, external):
    src = external("nsys-ai-mfu-2gpu-before.sqlite.gz")
    whole = wb.import_file(src)
    ts = wb.import_set("mfu", [src], root=tmp_path, executor=IN_PROCESS)
    assert len(ts.members) == 2
    assert list(ts.members["rank"]) == [0, 1] and list(ts.members["device"]) == [0, 1]
    assert list(ts.members["local_rank"]) == [0, 1] and ts.members["pid"].nunique() == 2
    members = [ts.trace(r) for r in (0, 1)]
    # The members' kernels add up to the whole export's, each member's all on its own GPU.
    assert sum(len(t.kernels) for t in members) == len(whole.kernels)
    for t, device in zip(members, (0, 1)):
        assert set(t.kernels["device"]) == {device} and t.kernels["pid"].nunique() == 1
    for status in ("range", "no_range", "no_launch"):
        for key in ("kernels", "gpu_time_ns"):
            assert sum(t.meta["attribution"][status][key] for t in members) == whole.meta["attribution"][status][key]
    for table in ("ranges", "api", "memcpy", "memset"):
        assert sum(len(t.tables[table]) for t in members) == len(whole.tables[table])
    whole_names = whole.kernels["name"].astype(str).value_counts()
    split_names = pd.concat([t.kernels["name"].astype(str) for t in members]).value_counts()
    pd.testing.assert_series_equal(split_names.sort_index(), whole_names.sort_index())
    # NCCL kernels are the collectives.
    coll = ts.collectives()
    assert set(coll["rank"]) == {0, 1} and coll["collectives"].sum() == whole.kernels["name"].str.contains("nccl").sum()


def test_public_multi_rank_kineto_traces(tmp_path):
    ts = wb.import_set("hta", [str(DATA / "hta-sampled" / "*.json.gz")], root=tmp_path, executor="local")
    assert list(ts.members["rank"]) == [0, 1]
    assert_member_summaries(ts, "layer")
    strag = ts.stragglers()
    assert list(strag["step"]) == ["ProfilerStep#551", "ProfilerStep#552"] and set(strag["ranks"]) == {2}
    steps = ts.steps()
    assert (steps["collective_ns"] > 0).any() and (steps["collective_ns"] <= steps["wall_ns"]).all()


def test_set_diff_matches_rank_to_rank(tmp_path, external):
    a = wb.import_set("before", [external("nsys-ai-mfu-2gpu-before.sqlite.gz")], root=tmp_path, executor=IN_PROCESS)
    b = wb.import_set("after", [external("nsys-ai-mfu-2gpu-after.sqlite.gz")], root=tmp_path, executor=IN_PROCESS)
    d = a.diff(b)
    assert list(d["rank"]) == [0, 1] and set(d["status"]) == {"both"}
    for rank in (0, 1):
        own = diff(a.trace(rank), b.trace(rank)).totals
        row = d[d["rank"] == rank].iloc[0]
        for key in ("kernels_per_step_a", "kernels_per_step_b", "gpu_time_per_step_ns_a", "gpu_time_per_step_ns_b",
                    "common_ranges"):
            assert row[key] == own[key], key
    # A set of four ranks against one of two: ranks 2 and 3 only in A.
    c = wb.import_set("cpu4", CPU4, root=tmp_path, executor=IN_PROCESS)
    assert list(c.diff(a)["status"]) == ["both", "both", "only_a", "only_a"]
    r = cli("diff", "before", "after", root=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "rank against rank" in r.stdout and "the ranks differ in what changed" in r.stdout


# ------------------------------------------------------------------ bad input: one line, exit 2, no set

def test_report_of_two_sets(tmp_path):
    # One rank's members are reported in full, and every rank beside them (reporting/ranks.py).
    for name in ("cpu4", "cpu4-again"):
        wb.import_set(name, CPU4, root=tmp_path, executor=IN_PROCESS)
    r = wb.report("cpu4", "cpu4-again", root=tmp_path, md=tmp_path / "r.md")
    md = (tmp_path / "r.md").read_text()
    assert md == r.markdown and md.startswith("# cpu4 → cpu4-again (trace sets)")
    assert "(rank 0 of trace sets `cpu4` → `cpu4-again`)" in md
    rows = [ln for ln in md.split("## Ranks", 1)[1].splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [ln.split(" | ")[0] for ln in rows] == ["| 0", "| 1", "| 2", "| 3"]
    assert [ln.rstrip(" |").rsplit(" | ", 1)[1] for ln in rows] == ["0 → 0", "0 → 0", "3 → 3", "0 → 0"]
    assert "Regenerate with `workbench report cpu4 cpu4-again" in md


def test_bad_input_leaves_no_set(tmp_path, external):
    root = tmp_path / "traces"
    ok = cli("import", "--set", "good", *CPU4, root=root)
    assert ok.returncode == 0, ok.stderr
    before = store_entries(root)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (("summary", "nosuch", "--by", "rank"), "not a trace set"),
        (("summary", "nosuch"), "no such file"),
        (("import", "--set", "s", str(empty)), "holds no files"),
        (("import", "--set", "s", str(tmp_path / "none*.json")), "no file matches"),
        (("import", "--set", "s", *CPU4, str(DATA / "cpu4" / "rank2.json.gz"), str(root / "good" / "rank2")),
         "duplicate rank 2"),
        (("import", "--set", "s", *CPU4, str(broken)), "broken.json"),
        (("import", "--set", "good", *CPU4), "exists"),
        (("import", *CPU4[:2]), "with --set"),
        (("diff", "good", str(CPU4[0])), "is a trace set and the other side is not"),
        (("diff", "good", "good", "--fail-if", "kernels>0"), "gates"),
        (("summary", "good", "--executor", "local", "--workers", "0"), "workers 0"),
        (("report", "good", str(CPU4[0])), "a report compares two sets, or traces"),
        (("import", "--set", "s", "--split", "process", str(external("nsys-ai-mfu-2gpu-before.sqlite.gz")),
          *CPU4[:1]), "some members name their rank and others do not"),
    ]
    for args, match in cases:
        one_line_error(cli(*args, root=root), match)
        assert store_entries(root) == before, (args, store_entries(root))
    with pytest.raises(wb.WorkbenchError, match="no files given"):
        wb.import_set("s", [], root=root)
    assert store_entries(root) == before
