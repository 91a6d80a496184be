"""``workbench report``: reproducible, self-contained, safe reports from stored traces."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import REFERENCE, REPO, TRACES
import workbench as wb
from workbench.errors import WorkbenchError


EVIL = "<script>alert(1)</script>"
EVIL2 = "</script><script>alert(2)</script>"
ODD = "pipe|tick`s\nnew*line_&amp;"


# ------------------------------------------------------------------------------------ helpers

def committed(name: str) -> Path:
    p = TRACES / name
    if not (p / "manifest.json").is_file():
        pytest.skip(f"committed trace {name} not present")
    return p


def write_kineto(path: Path, ranges: list[tuple[str, list[str]]], *, layers: int = 2, steps: int = 2) -> Path:
    """A small, well-formed torch.profiler trace: step_i > layer_NN > each (range, kernels)."""
    ev = []
    t = 1000.0
    corr = 100

    def x(cat, name, ts, dur, pid=7, tid=7, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3),
                   "dur": round(dur, 3), "args": args})

    for s in range(steps):
        s0 = t
        for layer in range(layers):
            l0 = t
            for rname, kernels in ranges:
                r0 = t
                for k in kernels:
                    corr += 1
                    x("cuda_runtime", "cudaLaunchKernel", t + 1, 3, correlation=corr)
                    x("kernel", k, t + 5, 2.5, pid=0, tid=7, device=0, stream=7, correlation=corr,
                      grid=[1, 1, 1], block=[128, 1, 1])
                    t += 10
                t += 2
                x("user_annotation", rname, r0, t - r0)
            t += 2
            x("user_annotation", f"layer_{layer:02d}", l0, t - l0)
        t += 5
        x("user_annotation", f"step_{s}", s0, t - s0)
    ev.sort(key=lambda e: (e["ts"], -e["dur"]))
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    return path


def evil_pair(root: Path, tmp: Path) -> tuple[str, str]:
    """Base and fix traces whose range and kernel names carry HTML/script and Markdown syntax."""
    base = [("qkv", ["gemm"]), ("kv_write", ["div_floor", "remainder", "copy", "index_put"]),
            (EVIL, ["evil_a", EVIL2]), (ODD, ["k|1", "k|1"])]
    fix = [("qkv", ["gemm"]), ("kv_write", ["fused_write"]), (EVIL, [EVIL2]), (ODD, ["k|1"])]
    names = []
    for label, spec in (("evil-base", base), ("evil-fix", fix)):
        f = write_kineto(tmp / f"{label}.json", spec)
        wb.save(wb.import_file(f), label, root)
        names.append(label)
    return names[0], names[1]


def with_capture_meta(src: Path, root: Path, name: str, *, workload="decoder", variant=None, timing=None,
                      logits=None, tokens=None) -> Path:
    """Copy a stored trace and give its manifest what a workbench capture records."""
    dst = root / name
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["name"] = name
    m["capture"] = {"backend": "nsys", "engine": "eager", "workload": workload, "variant": variant or {},
                    "device": "cuda", "command": ["workbench", "capture", workload, "--name", name],
                    "engine_info": {"engine": "eager", "build_key": "k", "dtype": "float32"}}
    m["env"] = {"gpu": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130",
                "triton": "3.6.0", "nsys": "2025.3.1", "python": "3.12.3",
                "git": {"revision": "0123456789abcdef0123456789abcdef01234567", "dirty": False}}
    if timing is not None:
        m["timing"] = timing
    if logits is not None:
        arr = np.asarray(logits, dtype=np.float32)
        m["outputs"] = {"tokens": tokens, "logits_shape": list(arr.shape),
                        "logits_f32_b64": base64.b64encode(arr.tobytes()).decode()}
    (dst / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True))
    return dst


def stats(median, lo, hi, n=10):
    return {"median": median, "min": lo, "max": hi, "mean": median, "n": n, "samples": []}


def timing(prefill, decode):
    return {"timer": "cuda_event", "repeats": 10, "warmup": 2, "decode_steps": 3,
            "prefill_ms": stats(*prefill), "decode_step_ms": stats(*decode, n=30),
            "decode_step_ms_per_repeat": stats(*decode)}


def strip_code(md: str) -> str:
    """Markdown without code spans and fenced blocks (where any text is inert)."""
    md = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", md, flags=re.S | re.M)
    md = re.sub(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)", "", md)  # a backslash-escaped ` opens nothing
    return re.sub(r"\\[^\w\s]", "", md)  # backslash-escaped punctuation is literal text


@pytest.fixture
def timed(tmp_path):
    """Fusion traces with timing, outputs and env, as the workbench's own captures store them."""
    root = tmp_path / "store"
    root.mkdir()
    logits = np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)
    with_capture_meta(committed("ref-h200-kvwrite-unfused-nsys"), root, "t-unfused", variant={"kv_write": "unfused"},
                      timing=timing((12.5, 12.1, 13.0), (2.86, 2.80, 2.95)), logits=logits, tokens=[1, 2, 3, 4])
    with_capture_meta(committed("ref-h200-kvwrite-fused-nsys"), root, "t-fused", variant={"kv_write": "fused"},
                      timing=timing((1.87, 1.80, 1.95), (1.12, 1.10, 1.20)), logits=logits + 1e-6,
                      tokens=[1, 2, 3, 4])
    return root


# ------------------------------------------------------------------------------------ content

def test_fusion_report_from_committed_traces(tmp_path):
    a, b = committed("ref-h200-kvwrite-unfused-nsys"), committed("ref-h200-kvwrite-fused-nsys")
    r = wb.report(a, b, md=tmp_path / "r.md")
    md = (tmp_path / "r.md").read_text()
    assert md == r.markdown
    assert "## Commands and Results" in md and "## Hardware, Environment and Revisions" in md
    assert "## Correctness" in md and "## Not run / remaining gaps" in md
    assert re.search(r"^\| Layer\(s\) \| `kv_write` \|$", md, re.M)
    assert re.search(r"^\| 0–7 \| 15 → 1 \(2[\d.]+ → 1\.\d µs\) \|$", md, re.M)  # 15 -> 1 per layer, all 8 layers, with time
    assert "| kernel launches per decode step (from the trace) | 160 (3 steps) | 48 (3 steps) | -112 (-70.0%) |" in md
    assert "n/a (not captured with timing)" in md  # the reference captures carry no timing
    for p in (a, b):  # every trace named with its content hash
        assert json.loads((p / "manifest.json").read_text())["content_sha256"] in md
    assert "```diff\n- vectorized_elementwise_kernel  x2\n" in md and "\n+ fused_write\n" in md
    assert "Regenerate with `workbench report ref-h200-kvwrite-unfused-nsys ref-h200-kvwrite-fused-nsys" in md


def test_timing_outputs_and_env_from_capture_metadata(timed):
    r = wb.report("t-unfused", "t-fused", root=timed)
    md = r.markdown
    assert "| prefill (median, min–max, per run) | 12.50 ms (12.10–13.00, 10 runs) | 1.870 ms (1.800–1.950, 10 runs) " \
           "| 0.15x (no samples recorded: no interval, no verdict) |" in md
    assert "| decode step (median, min–max, mean step per run) | 2.860 ms (2.800–2.950, 10 runs) | " \
           "1.120 ms (1.100–1.200, 10 runs) | 0.39x (no samples recorded: no interval, no verdict) |" in md
    assert "decode step **2.860 ms → 1.120 ms**" in md
    assert "greedy tokens identical (4 tokens); max abs logit diff 1.01e-06 (within tolerance 0.0003)" in md
    assert "`variant.kv_write` `unfused` → `fused`" in md
    for item in ("| GPU | `NVIDIA H200` |", "| Driver | `580.159.04` |", "| torch | `2.11.0+cu130` |",
                 "| triton | `3.6.0` |", "| Nsight Systems (ran the capture) | `2025.3.1` |",
                 "| Workbench git revision | `0123456789abcdef0123456789abcdef01234567` |",
                 "| Report generator | `workbench 0.1.0` |"):
        assert item in md, item
    assert "timing n/a" not in md
    assert "- engines without a capture in this report: compile, cudagraph, tensorrt" in md
    assert "- `workbench capture decoder --name t-fused`" not in md  # commands are listed per role
    assert "- fix `t-fused`: `workbench capture decoder --name t-fused`" in md


def test_different_outputs_are_reported(timed, tmp_path):
    root = tmp_path / "s2"
    root.mkdir()
    logits = np.zeros((2, 3), dtype=np.float32)
    with_capture_meta(timed / "t-unfused", root, "x", logits=logits, tokens=[5, 6])
    with_capture_meta(timed / "t-fused", root, "y", logits=logits + 0.5, tokens=[5, 7])
    md = wb.report("x", "y", root=root).markdown
    assert "greedy tokens DIFFER (first at position 1 of 2); max abs logit diff 0.5 (OUTSIDE tolerance 0.0001)" in md


def test_sweep_section(tmp_path):
    a, b = committed("ref-h200-kvwrite-fused-cache-full-torch"), committed("ref-h200-kvwrite-fused-cache-bucketed-torch")
    sweep = tmp_path / "sweep.json"
    points = [{"ctx": c, "cache": mode, "decode_step_ms": {"median": base + c / k, "min": base + c / k - 0.01,
                                                          "max": base + c / k + 0.02, "n": 10}}
              for c in (256, 1024, 4096) for mode, base, k in (("full", 2.0, 10000), ("bucketed", 1.0, 5000))]
    points.append({"ctx": 8192, "cache": "bucketed", "skipped": "out of memory"})
    sweep.write_text(json.dumps({"points": points}))
    r = wb.report(a, b, sweep=sweep, html=tmp_path / "r.html", md=tmp_path / "r.md")
    md = r.markdown
    assert "## Sweep: latency vs context length" in md
    assert "| Metric | Series | context 256 | context 1024 | context 4096 |" in md
    assert "| `decode_step` | `bucketed` | 1.051 ms (1.041–1.071, 10 runs) | 1.205 ms (1.195–1.225, 10 runs) | " \
           "1.819 ms (1.809–1.839, 10 runs) |" in md
    # Every context, not only the longest.
    assert re.search(r"^- decode step by context: 256: `bucketed` 1\.051 ms, `full` 2\.026 ms \(0\.52x\); 1024: .*; "
                     r"4096: `bucketed` 1\.819 ms, `full` 2\.410 ms \(0\.75x\) \(ratio: `bucketed` / `full`\)$", md, re.M)
    assert "sweep: `bucketed at context 8192: out of memory`" in md
    html = (tmp_path / "r.html").read_text()
    assert "decode step vs context length" in html
    # attention time per layer fell: it shows as a changed range (4 -> 3 kernels, ~-38%)
    assert "| `attention` | 8 | 32 → 24 |" in md


def test_extra_traces_get_their_own_column(timed):
    md = wb.report("t-unfused", "t-fused", committed("ref-h200-kvwrite-fused-nsys"), root=timed).markdown
    assert "| extra 1: `ref-h200-kvwrite-fused-nsys` |" in md.splitlines()[[i for i, line in enumerate(md.splitlines())
                                                                            if line.startswith("| Metric")][0]]
    assert "48 (3 steps); vs base -112 (-70.0%)" in md


# ------------------------------------------------------------------------------------ reproducibility

def _both(tmp: Path, *args, **kw) -> tuple[bytes, bytes]:
    tmp.mkdir()
    wb.report(*args, html=tmp / "report.html", md=tmp / "report.md", **kw)
    return (tmp / "report.html").read_bytes(), (tmp / "report.md").read_bytes()


def test_regenerating_from_committed_traces_is_byte_identical(tmp_path):
    pairs = [("ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys")]
    for a, b in (("h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys"),):
        if (TRACES / a / "manifest.json").is_file() and (TRACES / b / "manifest.json").is_file():
            pairs.append((a, b))
    for i, (a, b) in enumerate(pairs):
        first = _both(tmp_path / f"{i}-1", committed(a), committed(b))
        second = _both(tmp_path / f"{i}-2", committed(a), committed(b))
        assert first[0] == second[0]
        assert first[1] == second[1]
        html = first[0].decode()
        assert html.count("<script>") == 1 + html.count('Plotly.newPlot("fig-')  # plotly.js once, one per figure
        page = re.sub(r"<script>.*?</script>", "", html, flags=re.S)  # markup without script bodies
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)  # nothing loads from a network
        assert 'src="' not in page and "<link" not in page
        assert not re.search(r'id="[0-9a-f]{8}-[0-9a-f]{4}-', html)  # no random plotly div ids


def test_regenerating_from_reimported_reference_captures_is_byte_identical(tmp_path):
    """Store the same real captures twice, independently: same hashes, same reports."""
    files = [REFERENCE / "nsys-kvwrite-unfused.sqlite.gz", REFERENCE / "nsys-kvwrite-fused.sqlite.gz"]
    if not all(f.is_file() for f in files):
        pytest.skip("reference captures not available")
    outs = []
    for k in (1, 2):
        root = tmp_path / f"store{k}"
        for f, name in zip(files, ("unfused", "fused")):
            wb.save(wb.import_file(f), name, root)
        outs.append(_both(tmp_path / f"out{k}", root / "unfused", root / "fused"))
    assert outs[0] == outs[1]


def test_report_module_import_is_light():
    code = ("import sys, workbench.reporting, workbench.cli.report; "
            "print(sorted(m for m in ('plotly', 'pandas', 'numpy', 'duckdb') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------ safety

def test_trace_strings_are_escaped(tmp_path):
    root = tmp_path / "store"
    a, b = evil_pair(root, tmp_path)
    r = wb.report(a, b, root=root, html=tmp_path / "r.html", md=tmp_path / "r.md", title=f"T {EVIL} `x` | y")
    html = (tmp_path / "r.html").read_text()
    md = (tmp_path / "r.md").read_text()
    # HTML: the names appear escaped, never as markup; plotly JSON escapes "<" too.
    assert "<script>alert" not in html and "</script><script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # in figure JSON: entity-escaped for plotly's text renderer, then "<", ">", "&" as \\u escapes
    assert "\\u0026lt;script\\u0026gt;alert(1)" in html
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 1 + html.count('Plotly.newPlot("fig-')
    assert all("alert(" not in s for s in scripts[1:] if "\\u003c" not in s or "alert(1)" not in s.replace("\\u003c", ""))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src &#x27;none&#x27;" in csp and "unsafe-inline" not in csp.split("style-src")[0]
    # Markdown: outside code spans no trace text remains that could become markup.
    assert md.startswith("# T \\<script\\>alert(1)\\</script\\> \\`x\\` \\| y\n")
    assert "<title>T &lt;script&gt;alert(1)&lt;/script&gt; `x` | y</title>" in html
    assert EVIL in md  # shown verbatim, inside code
    bare = strip_code(md)
    assert "<script" not in bare and "</script" not in bare
    assert not re.search(r"(?<!`)`pipe", md)  # a backtick inside needs a longer fence
    assert "``pipe\\|tick`s\\nnew*line_&amp;``" in md
    assert "\nnew*line" not in md  # newline inside a name never breaks a table row
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.endswith("|")
    assert r.model.changed_ranges == sorted([EVIL, ODD, "kv_write"])


def test_plotly_json_escapes_script_end():
    from workbench.reporting.html import _json_for_script

    s = _json_for_script('{"a": "</script><script>alert(2)</script>", "b": "\u2028&"}')
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": "</script><script>alert(2)</script>", "b": "\u2028&"}


# ------------------------------------------------------------------------------------ bad input

def test_missing_trace_exits_2_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "r.html"
    p = cli("report", str(committed("ref-h200-kvwrite-unfused-nsys")), str(tmp_path / "nope"), "-o", str(out),
            "--md", str(tmp_path / "r.md"))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("workbench: ") and "nope" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_different_workloads_refused_unless_allowed(cli, timed, tmp_path):
    other = with_capture_meta(committed("ref-h200-kvwrite-fused-nsys"), timed, "other-wl", workload="llama")
    out = tmp_path / "out"
    out.mkdir()
    p = cli("report", "t-unfused", "other-wl", "-o", str(out / "r.html"), env={"WORKBENCH_TRACES": str(timed)})
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "different workloads" in p.stderr and "t-unfused=decoder" in p.stderr and "other-wl=llama" in p.stderr
    assert list(out.iterdir()) == []
    with pytest.raises(WorkbenchError, match="different workloads"):
        wb.report("t-unfused", other, root=timed)
    r = wb.report("t-unfused", other, root=timed, allow_mixed=True, md=out / "r.md")
    assert "traces of different workloads were allowed" in r.markdown
    assert "`capture.workload`" not in r.markdown and "`workload` `decoder` → `llama`" in r.markdown


def test_report_path_that_is_a_directory(cli, tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    a, b = committed("ref-h200-kvwrite-unfused-nsys"), committed("ref-h200-kvwrite-fused-nsys")
    p = cli("report", str(a), str(b), "-o", str(d), "--md", str(tmp_path / "r.md"))
    assert p.returncode == 2 and "is a directory" in p.stderr and p.stderr.count("\n") == 1
    p = cli("report", str(a), str(b), "--md", str(d))
    assert p.returncode == 2 and "is a directory" in p.stderr
    p = cli("report", str(a), str(b), "--md", str(tmp_path / "missing" / "r.md"))
    assert p.returncode == 2 and "does not exist" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["adir"] and list(d.iterdir()) == []


def test_failure_keeps_the_previous_report(tmp_path):
    md = tmp_path / "r.md"
    md.write_text("previous")
    with pytest.raises(WorkbenchError):
        wb.report(committed("ref-h200-kvwrite-unfused-nsys"), tmp_path / "missing", md=md)
    assert md.read_text() == "previous"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.md"]  # no temp files left


def test_cli_writes_files_and_prints_markdown_without_outputs(cli, tmp_path):
    a, b = committed("ref-h200-kvwrite-unfused-nsys"), committed("ref-h200-kvwrite-fused-nsys")
    p = cli("report", str(a), str(b))
    assert p.returncode == 0 and p.stdout.startswith("# ref-h200-kvwrite-unfused-nsys → ref-h200-kvwrite-fused-nsys")
    p = cli("report", str(a), str(b), "--md", str(tmp_path / "r.md"), "--title", "KV write fusion")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "r.md").read_text().startswith("# KV write fusion\n")


def test_bad_sweep_file(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"points": [{"cache": "full"}]}))
    with pytest.raises(WorkbenchError, match="no context length"):
        wb.report(committed("ref-h200-kvwrite-unfused-nsys"), committed("ref-h200-kvwrite-fused-nsys"), sweep=bad)
    bad.write_text("{not json")
    with pytest.raises(WorkbenchError, match="not valid JSON"):
        wb.report(committed("ref-h200-kvwrite-unfused-nsys"), committed("ref-h200-kvwrite-fused-nsys"), sweep=bad)


def test_gzip_capture_files_are_accepted_with_their_file_hash(reference, tmp_path):
    import hashlib

    a, b = reference("kineto-kvwrite-unfused-cache-full.json.gz"), reference("kineto-kvwrite-fused-cache-full.json.gz")
    md = wb.report(a, b).markdown
    assert hashlib.sha256(a.read_bytes()).hexdigest() in md
    assert "| `file sha256` |" in md.replace(" | `file sha256` | ", " | `file sha256` |")
    assert re.search(r"^\| 0–7 \| 15 → 1 \(22.7 → 1.2 µs\) \|", md, re.M)
    _ = gzip  # the captures are gzip files; the importer sniffs them by content


def test_sweep_from_live_campaign_results(tmp_path):
    """benchmarks/live_campaign.py's results file: captures with a nested ``measured`` object."""
    def cap(name, group, rows, ctx, engine, dec, pre, att, kv="fused"):
        st = lambda m: {"median": m, "min": round(m * 0.98, 4), "max": round(m * 1.03, 4), "n": 20}  # noqa: E731
        return {"name": name, "group": group, "seconds": 3.0, "measured": {
            "trace": name, "backend": "torch", "engine": engine,
            "variant": {"kv_write": kv, "cache_rows": rows, "ctx": ctx, "rows": 10368, "layers": 8},
            "timer": "cuda_event", "prefill_ms": st(pre), "decode_step_ms": st(dec), "decode_step_ms_per_repeat": st(dec),
            "kv_write_kernels_per_layer": [1], "attention_gpu_us_per_layer": att, "kernels_per_step": [48]}}
    caps = [cap("h200-kvwrite-unfused-eager-torch", "fusion", "full", 128, "eager", 3.1, 2.0, 13.5, kv="unfused")]
    for ctx in (512, 2048, 8192):
        for rows, f in (("full", 1.0), ("bucketed", 0.6 + ctx / 40000)):
            caps.append(cap(f"h200-cache-{rows}-ctx{ctx}-eager-torch", f"cache-ctx{ctx}", rows, ctx, "eager",
                            1.5 * f, 4.0 * f, 13.5 * f))
    caps.append({"name": "h200-cache-full-ctx8192-cudagraph-torch", "group": "cache-ctx8192",
                 "error": "skipped: campaign time budget spent"})
    f = tmp_path / "h200_live.json"
    f.write_text(json.dumps({"prefix": "h200", "device": "cuda", "repeats": 20, "captures": caps, "equality": []}))
    from workbench.reporting.inputs import load_sweep

    sw = load_sweep(f)
    assert sw.series == ["cache_rows=bucketed", "cache_rows=full"]
    assert sw.metrics == ["attention_gpu_per_layer", "decode_step", "prefill"]
    assert sw.meta["left_out_groups"] == ["fusion"]  # one context length: not part of the sweep
    assert sw.not_run == ["h200-cache-full-ctx8192-cudagraph-torch: skipped: campaign time budget spent"]
    r = wb.report(committed("ref-h200-kvwrite-fused-cache-full-torch"),
                  committed("ref-h200-kvwrite-fused-cache-bucketed-torch"), f)
    md = r.markdown
    row = next(line for line in md.splitlines() if line.startswith("| `decode_step` | `cache_rows=bucketed` |"))
    assert row.endswith("| 1.207 ms (1.183–1.243, 20 runs) |")  # the 8192 column
    assert "| `attention_gpu_per_layer` | `cache_rows=full` | 13.50 µs | 13.50 µs | 13.50 µs |" in md
    assert "- not part of the sweep (a single context length): group(s) `fusion`" in md
    assert "- sweep: `h200-cache-full-ctx8192-cudagraph-torch: skipped: campaign time budget spent`" in md


def test_committed_example_reports_are_current(tmp_path):
    """Each committed reports/*.md regenerates byte-identically with the command in its footer."""
    import shlex

    mds = sorted((REPO / "reports").glob("*.md"))
    if not mds:
        pytest.skip("no committed example reports")
    for md in mds:
        text = md.read_text()
        m = re.search(r"Regenerate with `(workbench report [^`]+)`\.\n$", text)
        assert m, f"{md.name}: no regenerate command in its footer"
        argv = shlex.split(m.group(1))[2:]
        i = argv.index("-o")
        argv[i + 1] = str(tmp_path / "x.html")
        argv[argv.index("--md") + 1] = str(tmp_path / md.name)
        argv.remove("-o")
        argv.remove(str(tmp_path / "x.html"))
        for k, a in enumerate(argv):  # a sweep is named by file name in the footer: find it in the repo
            if k and argv[k - 1] == "--sweep" and not Path(a).is_file():
                argv[k] = str(next(REPO.glob(f"benchmarks/results/{a}")))
        from workbench.cli import main

        assert main(["--root", str(TRACES), "report", *argv]) == 0
        assert (tmp_path / md.name).read_text() == text, f"{md.name} is stale: run reports/regenerate.sh"


def test_workbench_report_is_the_function_even_after_submodule_imports(tmp_path):
    code = ("import workbench.cli.report, workbench as wb; "
            "from workbench.reporting import report; assert wb.report is report; "
            f"r = wb.report({str(committed('ref-h200-kvwrite-unfused-nsys'))!r}, "
            f"{str(committed('ref-h200-kvwrite-fused-nsys'))!r}); print(r.markdown.splitlines()[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "# ref-h200-kvwrite-unfused-nsys → ref-h200-kvwrite-fused-nsys"


def test_trace_whose_tables_do_not_match_its_manifest_hash(cli, tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    bad = with_capture_meta(committed("ref-h200-kvwrite-fused-nsys"), root, "tampered")
    m = json.loads((bad / "manifest.json").read_text())
    m["content_sha256"] = "0" * 64
    (bad / "manifest.json").write_text(json.dumps(m))
    p = cli("report", str(committed("ref-h200-kvwrite-unfused-nsys")), str(bad), "--md", str(tmp_path / "r.md"))
    assert p.returncode == 2 and "do not match the manifest's content_sha256" in p.stderr
    assert not (tmp_path / "r.md").exists()


def test_sweep_file_among_traces_is_told_apart_from_kineto_json(tmp_path):
    from workbench.reporting.inputs import is_sweep_file

    (tmp_path / "bare.json").write_text(json.dumps([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]))
    (tmp_path / "obj.json").write_text(json.dumps({"traceEvents": []}))
    (tmp_path / "sweep.json").write_text(json.dumps({"points": [{"ctx": 512, "decode_step_ms": 1.0}]}))
    assert [is_sweep_file(tmp_path / n) for n in ("bare.json", "obj.json", "sweep.json")] == [False, False, True]
    assert not is_sweep_file(tmp_path / "missing.json") and not is_sweep_file(tmp_path)
