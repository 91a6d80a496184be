"""The README's main job on the committed traces (the live capture is covered by test_capture)."""

from __future__ import annotations

from conftest import REPO


def test_demo_on_committed_traces(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("demo", "--no-capture", "--out", out, env={"WORKBENCH_TRACES": str(REPO / "traces")})
    assert r.returncode == 0, r.stderr
    assert "kernels per layer and step 15 -> 1 in 8 layers" in r.stdout
    assert "most changed range 'attention'" in r.stdout
    for case in ("fusion", "bucketing"):
        assert (out / f"{case}-report.html").stat().st_size > 100_000
        md = (out / f"{case}-report.md").read_text()
        assert "## Commands and Results" in md
    assert "| 0–7 | 15 → 1 |" in (out / "fusion-report.md").read_text()
