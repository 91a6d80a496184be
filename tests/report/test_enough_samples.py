"""No interval or verdict from fewer samples than ``analysis.stats.MIN_SAMPLES`` on either side,
in any view: every pair of committed traces (the comparison itself), the diff's text, and every
committed report's timed rows. Before: ``wall … 1 runs … 0.86x (95% CI 0.86–0.86): faster``."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import workbench as wb
from workbench.analysis.stats import FASTER, MIN_SAMPLES, NO_EVIDENCE, SLOWER, below_threshold, compare_timing
from workbench.cli.diff import timing_line
from workbench.reporting import timing

REPO = Path(__file__).resolve().parents[2]
TRACES = sorted(p for p in (REPO / "traces").iterdir() if (p / "manifest.json").is_file())
VERDICTS = {FASTER, SLOWER, NO_EVIDENCE, below_threshold()}


@pytest.fixture(scope="module")
def metas():
    return {p.name: wb.open_trace(p).meta for p in TRACES}


def test_every_committed_pair_gives_an_interval_only_with_enough_samples(metas):
    seen = {True: 0, False: 0}
    for a, b in itertools.permutations(sorted(metas), 2):
        for c in compare_timing(metas[a], metas[b], resamples=50):
            enough = min(c.n_a, c.n_b) >= MIN_SAMPLES
            assert c.interval == enough and (c.verdict in VERDICTS) == enough, (a, b, c)
            assert ("CI" in timing_line(c)) == enough and ("CI" in timing.verdict(c)) == enough
            if not enough:
                assert timing.verdict(c).endswith(f"(n = {c.n_a if c.n_a == c.n_b else f'{c.n_a} vs {c.n_b}'}: no interval)")
            seen[enough] += 1
    assert seen[True] and seen[False]  # both kinds occur among the committed traces


def test_every_committed_report_row_with_an_interval_has_enough_runs():
    rows = 0
    for md in sorted((REPO / "reports").glob("*.md")):
        for line in md.read_text().splitlines():
            if not re.match(r"\| (prefill|decode step|wall|call|[a-z ]+) \(median", line):
                continue
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            ns = [int(m) for m in re.findall(r"(\d+) (?:runs?|steps?)\)", " ".join(cells[1:3]))]
            if "CI" in cells[3]:
                rows += 1
                assert len(ns) == 2 and min(ns) >= MIN_SAMPLES, (md.name, line)
            elif ns and min(ns) < MIN_SAMPLES:
                assert "no interval" in cells[3], (md.name, line)
    assert rows >= 4
