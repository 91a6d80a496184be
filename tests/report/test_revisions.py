"""The workbench revision a report lists comes from wherever the manifest recorded it. Before: a
command capture outside a git checkout listed "Workbench git revision: not recorded" (and a gap)
while the next row printed ``workbench_git {"dirty": false, "revision": "94243fe…"}``."""

from __future__ import annotations

from pathlib import Path

import workbench as wb

TRACES = Path(__file__).resolve().parents[2] / "traces"


def _row(md: str, label: str) -> str:
    return next(x for x in md.splitlines() if x.startswith(f"| {label} |"))


def test_workbench_git_is_the_workbench_revision(tmp_path):
    traces = [wb.open_trace(TRACES / n) for n in ("h200-user-mlp-torch", "h200-user-mlp-window-torch")]
    for t in traces:  # the program ran outside any checkout: only the workbench's own revision
        t.meta["env"]["git"] = None
        t.meta["env"]["workbench_git"] = {"dirty": False, "revision": "94243fe0123456789"}
    md = wb.report(*traces, md=tmp_path / "r.md").markdown
    assert _row(md, "Workbench git revision") == "| Workbench git revision | `94243fe0123456789` |"
    assert "| `workbench_git` |" not in md
    assert _row(md, "Program git revision (its working directory)").endswith("| not recorded |")
    gaps = md[md.index("Not run"):]
    assert "Workbench git revision not recorded" not in gaps
    assert "Engine git revision not recorded" not in gaps  # a user's program has no engine
