"""Rich displays (issue 38): a trace, a summary table, a diff with its alignments and timed
phases, and a trace set each render in a notebook as compact formatted HTML (the headline
first, times in µs or ms, counts whole, no stray row index, changed rows highlighted, trace names
escaped) and on a terminal as short readable text; the summary stays a DataFrame.

Everything is read from the committed traces (``traces/``) and the committed 4-rank set
(``tests/data/sets/cpu4``); the HTML is parsed as a browser would read it."""

from __future__ import annotations

import pickle
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from helpers import DATA, TRACES, run_cli

import workbench as wb
from workbench import textfmt as fmt
from workbench.analysis.per_step import describe

UNFUSED, FUSED = "h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys"
# The tags a display is made of: any other tag would be trace text that escaped unescaped.
TAGS = {"div", "style", "table", "thead", "tbody", "tr", "th", "td", "details", "summary"}
COUNT_HEADERS = re.compile(r"^(kernels|instances|times|ranks|steps|collectives|straggler steps)( each)?( [AB])?$")


class Page(HTMLParser):
    """A display as a browser reads it: its text in order (style aside), its tags, and each
    table as headers (text, tooltip) and rows (class, cell texts)."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.texts, self.tags, self.tables = [], set(), []
        self._in_style = False
        self._cell = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attrs = dict(attrs)
        if tag == "style":
            self._in_style = True
        elif tag == "table":
            self.tables.append({"headers": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append((attrs.get("class") or "", []))
        elif tag in ("th", "td"):
            self._cell = (tag, attrs.get("title"), [])

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False
        elif tag in ("th", "td") and self._cell is not None:
            kind, title, parts = self._cell
            text = "".join(parts)
            if kind == "th":
                self.tables[-1]["headers"].append((text, title))
            else:
                self.tables[-1]["rows"][-1][1].append(text)
            self._cell = None

    def handle_data(self, data):
        if self._in_style:
            return
        if self._cell is not None:
            self._cell[2].append(data)
        if data.strip():
            self.texts.append(data.strip())

    def restore_rows(self):
        """Keep the rows with data cells (the header row has none)."""
        for t in self.tables:
            t["rows"] = [r for r in t["rows"] if r[1]]


def page(obj) -> Page:
    p = Page(obj._repr_html_())
    p.restore_rows()
    return p


def assert_formatted(p: Page, headline: str) -> None:
    """The rules every display keeps."""
    assert p.texts[0] == headline, (p.texts[:3], headline)
    assert p.tags <= TAGS, p.tags - TAGS  # no trace text became a tag
    text = "\n".join(p.texts)
    assert not re.search(r"\de[+-]\d", text), "scientific notation"
    assert ".000000" not in text and "nan" not in text.lower().split()
    for t in p.tables:
        names = [h for h, _ in t["headers"]]
        assert not any(re.search(r"\bns\b", h) for h in names), names  # times are shown in µs or ms
        assert names[0] and t["headers"][0][1], names  # the first column is a column, not an index
        for i, (h, _) in enumerate(t["headers"]):
            cells = [cells[i] for _, cells in t["rows"]]
            if COUNT_HEADERS.match(h):
                assert all(re.fullmatch(r"-?[\d,]+(\.\d*[1-9]\d*)?|\u2013", c) for c in cells), (h, cells)
            if h.endswith("(\u00b5s)") or h.endswith("(ms)"):
                assert all(re.fullmatch(r"[+-]?[\d,]+\.\d+|\u2013", c) for c in cells), (h, cells)


def assert_short_text(obj, first: str) -> list[str]:
    lines = repr(obj).splitlines()
    assert lines[0] == fmt.MICRO_ASCII.join(first.split(fmt.MICRO)).replace("\u2192", "->").replace("\u2013", "-")
    assert len(lines) < 40, len(lines)
    assert all(line.isascii() for line in lines), [line for line in lines if not line.isascii()]
    assert not re.search(r"\w+=\S", lines[0]) and "DataFrame" not in repr(obj)  # no dataclass dump
    return lines


@pytest.fixture(scope="module")
def traces():
    return wb.open_trace(UNFUSED, TRACES), wb.open_trace(FUSED, TRACES)


@pytest.fixture(scope="module")
def d(traces):
    return wb.diff(*traces)


# ---------------------------------------------------------------------------- one trace

def test_trace_shows_what_it_holds_and_where_it_came_from(traces):
    t = traces[0]
    gpu_ns = int(t.kernels["end"].sum() - t.kernels["start"].sum())
    headline = f"{UNFUSED}: {len(t.kernels):,} kernels, {fmt.duration(gpu_ns)} GPU time, {len(t.ranges):,} ranges"
    p = page(t)
    assert_formatted(p, headline)
    text = "\n".join(p.texts)
    median = t.meta["timing"]["decode_step_ms"]["median"]
    assert "NVIDIA H200" in text and "Nsight Systems" in text and "kv_write=unfused" in text
    assert f"decode step {fmt.ms(median)} ms (n = {t.meta['timing']['decode_step_ms']['n']})" in text
    lines = assert_short_text(t, headline)
    assert len(lines) <= 12


# ---------------------------------------------------------------------------- summary tables

def test_summary_tables_render_formatted(traces):
    t = traces[0]
    by_kernel = wb.summary(t, by="kernel")
    p = page(by_kernel)
    headline = f"{UNFUSED} by kernel: {len(t.kernels):,} kernels, {fmt.duration(by_kernel['gpu_time_ns'].sum())} GPU time"
    assert_formatted(p, headline)
    (table,) = p.tables
    assert [h for h, _ in table["headers"]] == ["kernel", "kernels", "GPU time (\u00b5s)", "mean (\u00b5s)", "min (\u00b5s)",
                                                "max (\u00b5s)"]
    # Template kernel names are escaped: their "<" reach the page as text, whole in the tooltip.
    assert any("<" in name for name in by_kernel["kernel"].astype(str))
    assert "&lt;" in by_kernel._repr_html_()
    first = table["rows"][0][1]
    assert first[1] == fmt.num(by_kernel["kernels"].iloc[0])
    assert first[2] == fmt.us_from_ns(by_kernel["gpu_time_ns"].iloc[0])

    by_layer = wb.summary(t, by="layer")
    p = page(by_layer)
    (table,) = p.tables
    assert [h for h, _ in table["headers"]] == ["layer", "range", "kernels", "GPU time (\u00b5s)"]
    layers = [cells[0] for _, cells in table["rows"]]
    assert layers[0] == "\u2013" and "0" in layers  # kernels outside every layer: a dash, not -1
    assert len(table["rows"]) == min(len(by_layer), 30)
    assert f"{len(by_layer) - 30} more rows" in p.texts[-1]
    lines = assert_short_text(by_layer, p.texts[0])
    assert lines[1].split() == ["layer", "range", "kernels", "gpu_time_us"]
    assert "..." in lines[-1] and "more rows" in lines[-1]

    by_step = page(wb.summary(t, by="step"))
    assert [cells[1] for _, cells in by_step.tables[0]["rows"]] == ["237", "237", "237"]


def test_summary_is_still_a_dataframe(traces):
    t = traces[0]
    s = wb.summary(t, by="layer")
    assert isinstance(s, pd.DataFrame)
    plain = pd.DataFrame(s)
    assert type(plain) is pd.DataFrame and s.equals(plain) and plain.equals(s)
    assert int(s["kernels"].sum()) == len(t.kernels)
    assert s.values.shape == (len(s), 4) and s["kernels"].dtype == np.int64
    assert (s[["kernels", "gpu_time_ns"]] * 2)["kernels"].sum() == 2 * len(t.kernels)
    # What pandas derives is a plain frame, shown as pandas shows one.
    for derived in (s[s["kernels"] > 10], s.sort_values("kernels"), s.reset_index(), s.copy(), s.head(3),
                    s.merge(s, on=["layer", "range"]), pd.concat([s, s])):
        assert type(derived) is pd.DataFrame
    assert list(s.set_index(["layer", "range"]).loc[(0, "kv_write")]) == list(
        s[(s["layer"] == 0) & (s["range"] == "kv_write")][["kernels", "gpu_time_ns"]].iloc[0])
    pd.testing.assert_frame_equal(wb.summary(t, by="layer"), s)
    back = pickle.loads(pickle.dumps(s))  # a process pool's worker returns it pickled
    assert back.equals(s) and page(back).texts[0] == page(s).texts[0]


def test_any_frame_shown_by_the_rules():
    """A frame with what the issue saw: counts as floats, nanoseconds, a leftover row index,
    scientific notation, and a name that is HTML."""
    from workbench.trace.display import Table

    df = pd.DataFrame({"range": ["<script>alert(1)</script>", "a & b", "ok"], "kernels": [15.0, 1.0, 7.5],
                       "gpu_time_ns": [22015.0, 3.702436e8, float("nan")], "delta_kernels": [-14.0, 0.0, 2.0],
                       "share": [0.25, 0.5, 1.0]}, index=[3, 7, 11])
    html = Table(df, headline="h")._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "a &amp; b" in html
    p = page(Table(df, headline="h"))
    (table,) = p.tables
    assert [h for h, _ in table["headers"]] == ["range", "kernels", "GPU time (ms)", "\u0394 kernels", "share"]
    assert [cells[1:] for _, cells in table["rows"]] == [["15", "0.0220", "-14", "25.0%"],
                                                         ["1", "370.2", "0", "50.0%"],
                                                         ["7.50", "\u2013", "+2", "100.0%"]]
    assert not {"3", "7", "11"} & {cells[0] for _, cells in table["rows"]}
    named = page(Table(df.set_index("range")))
    assert named.tables[0]["headers"][0][0] == "range"  # a named index is a column of the display


# ---------------------------------------------------------------------------- a diff

def test_diff_headline_first_and_changes_grouped_across_layers(d):
    g = d.groups()
    top = g[g["changed"]].iloc[0]
    assert top["range"] == "kv_write"
    headline = describe(top, "kernels")
    assert headline.startswith("kv_write in all 8 layers:") and "kernels 15 \u2192 1 each" in headline
    p = page(d)
    assert_formatted(p, headline)
    t = d.totals
    text = "\n".join(p.texts)
    assert (f"per decode step: kernels 237 \u2192 125; GPU time "
            f"{fmt.time_change(t['gpu_time_per_step_ns_a'], t['gpu_time_per_step_ns_b'])}") in text
    assert "485.2 \u2192 316.3 \u00b5s" in text
    groups, alignment, layers = p.tables
    rows = {cells[0]: (cls, cells) for cls, cells in groups["rows"]}
    assert rows["kv_write"][0] == "wb-changed" and rows["attention"][0] == ""
    assert rows["kv_write"][1][1:4] == ["all 8", "15", "1"]
    assert "1 added: _kv_write_fused" in rows["kv_write"][1][-1]
    # The aligned kernels of the top change: removed and added ones marked.
    marks = [cls for cls, _ in alignment["rows"]]
    assert marks.count("wb-added") == 1 and set(marks) == {"wb-removed", "wb-added"}
    assert sum(int(cells[2]) for cls, cells in alignment["rows"] if cls == "wb-removed") == 15
    # The per-layer table is folded, its changed rows (kv_write in every layer) highlighted.
    assert "<details>" in d._repr_html_()
    changed = {cells[1] for cls, cells in layers["rows"] if cls == "wb-changed"}
    assert changed == {"kv_write"}
    # The text the command line prints starts from the same line.
    out = run_cli("diff", UNFUSED, FUSED, root=TRACES)
    assert out.returncode == 0, out.stderr
    lines = assert_short_text(d, headline)
    assert f"  {lines[0]}" in out.stdout.splitlines()


def test_diff_tables_and_timing_render(d):
    assert type(d.ranges).__name__ == "Table" and isinstance(d.ranges, pd.DataFrame)
    r = page(d.ranges)
    assert r.texts[0] == f"{UNFUSED} \u2192 {FUSED}: per range (per decode step; prefill per prefill)"
    changed = [cells[0] for cls, cells in r.tables[0]["rows"] if cls == "wb-changed"]
    assert changed and all(k.endswith("kv_write") for k in changed)
    g = page(d.groups())
    assert_formatted(g, g.texts[0])
    lay = page(d.layers)
    assert_formatted(lay, lay.texts[0])
    assert [h for h, _ in lay.tables[0]["headers"]][:4] == ["layer", "range", "kernels A", "kernels B"]

    (c, *_) = d.timing
    line = (f"decode step: {fmt.ms(c.a_median)} \u2192 {fmt.ms(c.b_median)} ms, {c.ratio:.2f}x (95% CI "
            f"{c.ci_low:.2f}\u2013{c.ci_high:.2f}x): {c.verdict}")
    p = page(c)
    assert_formatted(p, line)
    assert f"medians of {c.n_a} (A) and {c.n_b} (B) samples" in p.texts[1]
    assert repr(c) == line.replace("\u2192", "->").replace("\u2013", "-")
    assert line in "\n".join(page(d).texts)


def test_alignment_renders(d):
    al = d.alignments["layer_00/kv_write"]
    p = page(al)
    assert_formatted(p, al.describe())
    (table,) = p.tables
    assert [h for h, _ in table["headers"]] == ["change", "kernel", "times"]
    kernels = [cells[1] for _, cells in table["rows"]]
    assert kernels[-1] == "_kv_write_fused" and table["rows"][-1][0] == "wb-added"
    assert sum(int(cells[2]) for _, cells in table["rows"]) == len(al.removed) + len(al.added) + sum(
        len(ns) for op, ns in al.ops if op == "equal")
    assert_short_text(al, al.describe())


# ---------------------------------------------------------------------------- a trace set

def test_trace_set_and_its_tables_render(tmp_path):
    ex = wb.Executor("local", workers=1)
    wb.import_set("cpu4", sorted((DATA / "sets" / "cpu4").glob("rank*.json.gz")), root=tmp_path, executor=ex)
    ts = wb.open_set("cpu4", root=tmp_path, executor=ex)
    ops = int(ts.members["kernels"].sum())
    headline = f"trace set cpu4: 4 members, ranks 0\u20133, {ops:,} CPU ops"
    p = page(ts)
    assert_formatted(p, headline)
    (members,) = p.tables
    assert [h for h, _ in members["headers"]][:2] == ["member", "rank"] and "path" not in members["headers"]
    assert [cells[:2] for _, cells in members["rows"]] == [[f"rank{i}", str(i)] for i in range(4)]
    assert_short_text(ts, headline)

    s = page(ts.stragglers())
    assert_formatted(s, s.texts[0])
    assert s.texts[0].startswith("cpu4: rank 2 was the straggler of 3 of 3 steps (median lag ")
    assert [h for h, _ in s.tables[0]["headers"]][-1] == "wall (ms)"

    over = ts.summary(by="rank")
    assert isinstance(over, pd.DataFrame) and list(over["straggler_steps"]) == [0, 0, 3, 0]
    o = page(over)
    assert_formatted(o, "cpu4: per rank, its work, steps, busy and collective time")
    assert [cls for cls, _ in o.tables[0]["rows"]] == ["", "", "wb-changed", ""]  # the straggler stands out
    share = [h for h, _ in o.tables[0]["headers"]].index("collective share")
    assert all(cells[share].endswith("%") for _, cells in o.tables[0]["rows"])
    assert o.texts[1] == "the kernels and gpu_time_ns columns count CPU ops and their CPU op time"
