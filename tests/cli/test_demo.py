"""The README's main job on the committed traces (the live capture is covered by test_capture)."""

from __future__ import annotations

import re

from helpers import REPO, TRACES


def test_demo_on_committed_traces(cli, tmp_path):
    out = tmp_path / "out"
    sweep = REPO / "benchmarks" / "results" / "h200_live.json"  # what scripts/demo.sh passes
    r = cli("demo", "--no-capture", "--out", out, "--sweep", sweep, env={"WORKBENCH_TRACES": str(TRACES)})
    assert r.returncode == 0, r.stderr
    assert re.search(r"most changed: kv_write in all 8 layers: [\d.]+ -> [\d.]+ us each per decode step, [\d.]+x; "
                     r"kernels 15 -> 1 each", r.stdout), r.stdout
    assert "most changed: attention in all 8 layers: " in r.stdout
    for case in ("fusion", "bucketing"):
        assert (out / f"{case}-report.html").stat().st_size > 100_000
        md = (out / f"{case}-report.md").read_text()
        assert "## Commands and Results" in md
    assert "| 0–7 | 15 → 1 (" in (out / "fusion-report.md").read_text()
    assert "## Sweep: latency vs context length" in (out / "bucketing-report.md").read_text()
    assert "## Sweep" not in (out / "fusion-report.md").read_text()


def test_demo_refuses_a_missing_sweep_before_any_work(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("demo", "--no-capture", "--out", out, "--sweep", tmp_path / "nope.json",
            env={"WORKBENCH_TRACES": str(TRACES)})
    assert r.returncode == 2 and r.stderr.strip().endswith("nope.json: no such sweep results file"), r.stderr
    assert not out.exists()
