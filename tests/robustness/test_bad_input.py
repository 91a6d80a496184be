"""Bad input: broken, hostile and huge files get one clear error line (or a documented
tolerant result), exit 2 from the CLI, no traceback, nothing half-written in the store.

The corpus comes from tests/badinput/make_corpus.py (committed; see its docstring and
RELIABILITY.md). The whole corpus runs through the CLI's ``main`` in two worker processes
(tests/badinput/run_corpus.py, address space capped); the foundation issue's acceptance cases
and the huge inputs run the real ``python -m workbench`` as a subprocess.

WB_FULL_CORPUS=1 runs every wrong-type case (by default every third of the two large
wrong-type categories, ~850 files in all are generated either way).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import BADINPUT, REFERENCE, store_entries
import make_corpus
import tracegen as tg

MEM_MB = 3000  # RLIMIT_AS for corpus workers and huge-input runs: bounded memory or a clean failure


def cli(*args, root: Path, limit_mb: int | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """The real command line in a fresh interpreter, optionally with its address space capped."""
    env = dict(os.environ, WORKBENCH_TRACES=str(root), PYTHONWARNINGS="default")
    if limit_mb is None:
        cmd = [sys.executable, "-m", "workbench", *map(str, args)]
    else:
        boot = ("import resource, runpy, sys; "
                f"resource.setrlimit(resource.RLIMIT_AS, ({limit_mb << 20}, {limit_mb << 20})); "
                "sys.argv = ['workbench'] + sys.argv[1:]; runpy.run_module('workbench', run_name='__main__')")
        cmd = [sys.executable, "-c", boot, *map(str, args)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", timeout=timeout)


def assert_clean_error(r: subprocess.CompletedProcess, path: Path | str, root: Path, before: list[str], match=None):
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("workbench: "), lines
    assert str(path) in lines[0] or Path(path).name in lines[0], lines[0]
    if match:
        assert match.lower() in lines[0].lower(), lines[0]
    assert "\x1b" not in r.stderr
    assert store_entries(root) == before, f"store changed after a failed import: {store_entries(root)} (was {before})"


# ---------------------------------------------------------------- the foundation issue's acceptance cases

@pytest.fixture(scope="module")
def foundation(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("foundation")
    spec = tg.simple_spec()
    good_gz = gzip.compress(json.dumps(tg.kineto_doc(spec)).encode(), mtime=0)
    files = {}

    def put(name, data):
        files[name] = d / name
        files[name].write_bytes(data)

    put("truncated.json.gz", good_gz[: len(good_gz) // 2])
    corrupt = bytearray(good_gz)
    for i in range(30, len(corrupt) - 30, 50):
        corrupt[i] ^= 0xFF
    put("corrupt.json.gz", bytes(corrupt))
    put("notjson.json", b"this is { not json")
    put("no-traceevents.json", json.dumps({"schemaVersion": 1, "deviceProperties": []}).encode())
    tg.write_sqlite({}, d / "no-kernel-table.sqlite", schema={"StringIds": tg.NSYS_SCHEMA["StringIds"]})
    files["no-kernel-table.sqlite"] = d / "no-kernel-table.sqlite"
    put("empty-trace.json", json.dumps({"traceEvents": []}).encode())
    put("empty-file.json", b"")
    be = tg.kineto_doc(spec, "BE")
    be["traceEvents"].append({"ph": "B", "cat": "user_annotation", "name": "open", "pid": 1, "tid": 1, "ts": 5.0})
    put("unmatched-push.json", json.dumps(be).encode())
    rows = tg.nsys_rows(spec)
    rows["NVTX_EVENTS"][3] = rows["NVTX_EVENTS"][3][:1] + (None,) + rows["NVTX_EVENTS"][3][2:]
    files["unmatched-push.sqlite"] = tg.write_sqlite(rows, d / "unmatched-push.sqlite")
    neg = tg.kineto_doc(spec)
    neg["traceEvents"][-1]["dur"] = -2.0
    put("negative.json", json.dumps(neg).encode())
    rows = tg.nsys_rows(spec)
    k = rows["CUPTI_ACTIVITY_KIND_KERNEL"][0]
    rows["CUPTI_ACTIVITY_KIND_KERNEL"][0] = (k[1], k[0]) + k[2:]
    files["negative.sqlite"] = tg.write_sqlite(rows, d / "negative.sqlite")
    (d / "not-a-trace-dir").mkdir()
    (d / "not-a-trace-dir" / "readme.txt").write_text("hello")
    files["not-a-trace-dir"] = d / "not-a-trace-dir"
    return files


FOUNDATION = [
    ("truncated.json.gz", "gzip"), ("corrupt.json.gz", "gzip"), ("notjson.json", "JSON"),
    ("no-traceevents.json", "traceEvents"), ("no-kernel-table.sqlite", "CUPTI_ACTIVITY_KIND_KERNEL"),
    ("empty-trace.json", "empty"), ("empty-file.json", "empty"), ("unmatched-push.json", "never ends"),
    ("unmatched-push.sqlite", "never ends"), ("negative.json", "negative"), ("negative.sqlite", "negative"),
    ("not-a-trace-dir", "directory"),
]


@pytest.mark.parametrize("name,match", FOUNDATION, ids=[f for f, _ in FOUNDATION])
def test_foundation_bad_input_cli(foundation, tmp_path, name, match):
    root = tmp_path / "traces"
    root.mkdir()
    (root / "keep").mkdir()  # a directory the failed import must leave alone
    before = store_entries(root)
    r = cli("import", foundation[name], root=root)
    assert_clean_error(r, foundation[name], root, before, match)
    assert r.stdout == ""


def test_foundation_summary_of_bad_file_is_clean(foundation, tmp_path):
    """``summary`` imports in memory: the same one-line errors, and nothing stored."""
    root = tmp_path / "traces"
    for name in ("truncated.json.gz", "no-kernel-table.sqlite", "not-a-trace-dir"):
        r = cli("summary", foundation[name], root=root)
        assert_clean_error(r, foundation[name], root, [])


def test_missing_file_and_bad_names(tmp_path):
    root = tmp_path / "traces"
    r = cli("import", tmp_path / "does-not-exist.json", root=root)
    assert_clean_error(r, tmp_path / "does-not-exist.json", root, [], "no such file")
    good = tg.write_kineto(tg.simple_spec(), tmp_path / "good.json")
    # (more names, through the API: tests/robustness/test_no_code_exec.py)
    for bad in ("../x", "/abs", ".hidden", "a/b", "x\x1b[31m"):
        r = cli("import", good, "--name", bad, root=root)
        assert r.returncode == 2, (bad, r.stderr)
        assert "invalid trace name" in r.stderr and "Traceback" not in r.stderr
        assert "\x1b" not in r.stderr
        assert store_entries(root) == [], (bad, store_entries(root))
        assert not (tmp_path / "x").exists() and not Path("/abs").exists()


def test_store_root_is_a_file(tmp_path):
    good = tg.write_kineto(tg.simple_spec(), tmp_path / "good.json")
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    r = cli("import", good, root=blocker)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert blocker.read_text() == "not a directory"


def test_reference_capture_still_imports(tmp_path):
    """Control: a real capture imports through the same command line."""
    f = REFERENCE / "nsys-kvwrite-unfused.sqlite.gz"
    if not f.exists():
        pytest.skip("shared reference captures not present")
    root = tmp_path / "traces"
    r = cli("import", f, "--name", "ref", root=root)
    assert r.returncode == 0, r.stderr
    assert store_entries(root) == ["ref"]


# ---------------------------------------------------------------- hostile names in output

def test_terminal_escapes_never_reach_the_terminal(tmp_path):
    root = tmp_path / "traces"
    spec = tg.simple_spec(steps=1, layers=1)
    esc = make_corpus.ESC
    spec["ranges"] = [(p, t, esc + n, a, b) for p, t, n, a, b in spec["ranges"]]
    spec["kernels"] = [(esc + n + "\nsecond line", *rest) for n, *rest in spec["kernels"]]
    f = tg.write_nsys(spec, tmp_path / "hostile.sqlite")
    r = cli("import", f, "--name", "hostile", root=root)
    assert r.returncode == 0, r.stderr
    for args in (("summary", "hostile"), ("summary", "hostile", "--by", "kernel"), ("summary", "hostile", "--by", "path"),
                 ("sql", "hostile", "select name, short_name from kernels"), ("list",),
                 ("summary", "hostile", "--json")):
        r = cli(*args, root=root)
        assert r.returncode == 0, (args, r.stderr)
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout, (args, r.stdout[:500])
        if "--json" not in args and "list" not in args and "kernel" not in args:
            assert "\\x1b" in r.stdout, args  # shown, as a visible escape
    # kernel names with a newline stay on their row
    r = cli("sql", "hostile", "select name from kernels limit 1", root=root)
    assert "\\nsecond line" in r.stdout, r.stdout
    # a file whose *name* carries escapes: the error line shows them escaped
    bad = tmp_path / "evil\x1b[31m\x07name.json"
    bad.write_bytes(b"{not json")
    before = store_entries(root)
    r = cli("import", bad, root=root)
    assert r.returncode == 2 and "\x1b" not in r.stderr and "\x07" not in r.stderr, r.stderr
    assert "\\x1b" in r.stderr and len(r.stderr.splitlines()) == 1
    assert store_entries(root) == before
    # a hand-made directory with an escape in its name is not listed raw
    (root / "\x1b[31mfake").mkdir()
    (root / "\x1b[31mfake" / "manifest.json").write_text("{}")
    r = cli("list", root=root)
    assert r.returncode == 0 and "\x1b" not in r.stdout


# ---------------------------------------------------------------- the whole corpus

@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    make_corpus.generate(d)
    return d


def test_corpus_is_big_enough(corpus):
    cases = json.loads((corpus / "manifest.json").read_text())
    assert len(cases) >= 50
    cats = {c["category"] for c in cases}
    for need in ("gzip", "json", "kineto-field-type", "nsys-missing-table", "nsys-missing-column",
                 "nsys-bad-value", "semantic", "nsys-semantic", "names", "size", "directory"):
        assert need in cats, need


def _problems(r: dict) -> list[str]:
    p = []
    if r["crash"]:
        p.append("CRASH " + r["crash"].strip().splitlines()[-1][:200])
        return p
    if r["rc"] == 2:
        lines = r["stderr"].rstrip("\n").split("\n")
        if len(lines) != 1:
            p.append(f"{len(lines)} stderr lines: {r['stderr'][:300]!r}")
        if not r["stderr"].startswith("workbench: ") or r["file"] not in r["stderr"]:
            p.append(f"error line does not name the file: {r['stderr'][:200]!r}")
        if "\x1b" in r["stderr"]:
            p.append("raw escape in error line")
        if r["expect"] == "ok":
            p.append("expected a tolerant result, got: " + r["stderr"].strip()[:200])
        if r["match"] and r["match"].lower() not in r["stderr"].lower():
            p.append(f"error does not mention {r['match']!r}: {r['stderr'].strip()[:200]}")
        if r["store_after"]:
            p.append(f"failed import left {r['store_after']} in the store")
    elif r["rc"] == 0:
        if r["expect"] == "error":
            p.append("expected an error, the import succeeded")
        for k in ("summary", "sql"):
            if r[k]["crash"] or r[k]["rc"] not in (0, 2):
                p.append(f"{k} crashed: " + (r[k]["crash"] or "").strip().splitlines()[-1][:200])
            if r[k]["raw_escape"]:
                p.append(f"{k} printed a raw escape character")
        if r.get("load_crash"):
            p.append("stored trace does not load: " + r["load_crash"].strip().splitlines()[-1][:200])
    else:
        p.append(f"exit code {r['rc']}")
    return p


def test_corpus(corpus, tmp_path):
    sample = "1" if os.environ.get("WB_FULL_CORPUS") else "3"
    procs = []
    for shard in range(2):
        out = tmp_path / f"results-{shard}.json"
        cmd = [sys.executable, str(BADINPUT / "run_corpus.py"), str(corpus), str(tmp_path / f"store-{shard}"), str(out),
               "--mem-mb", str(MEM_MB), "--shard", f"{shard}/2", "--sample", sample]
        procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out))
    results = []
    for p, out in procs:
        so, se = p.communicate(timeout=900)
        assert p.returncode == 0, f"corpus worker died (rc {p.returncode}): {se[-3000:]}"
        results += json.loads(out.read_text())
    problems = [f"{r['file']}: {'; '.join(pr)}" for r in results if (pr := _problems(r))]
    by = {}
    for r in results:
        by.setdefault(r["category"], [0, 0])[0 if r["rc"] == 0 else 1] += 1
    print(f"\n{len(results)} corpus inputs run: " + ", ".join(f"{k} {v[0]} ok/{v[1]} error" for k, v in sorted(by.items())))
    assert not problems, f"{len(problems)} of {len(results)} inputs misbehaved:\n" + "\n".join(problems)
    assert len(results) >= 50


# ---------------------------------------------------------------- huge inputs, memory capped

@pytest.fixture(scope="module")
def huge(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("huge")
    c = make_corpus.Corpus(d)
    spec = tg.simple_spec()
    make_corpus.kineto_deep(c, 10_000)
    make_corpus.nsys_deep(c, 10_000)
    make_corpus.kineto_huge_string(c, 50, spec)
    make_corpus.nsys_huge_string(c, 50, spec)
    return {x["file"]: d / x["file"] for x in c.cases}


@pytest.mark.parametrize("name,kernels", [
    ("kineto-nesting-10000-deep.json.gz", 1), ("nsys-nesting-10000-deep.sqlite.gz", 1),
    ("kineto-huge-name-50MB.json.gz", 24), ("nsys-huge-string-50MB.sqlite.gz", 24),
])
def test_huge_input_bounded_memory(huge, tmp_path, name, kernels):
    """A 10,000-deep nesting and a 50 MB string import and summarize under a 3 GB address-space cap."""
    root = tmp_path / "traces"
    r = cli("import", huge[name], "--name", "big", root=root, limit_mb=MEM_MB)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{kernels} kernels" in r.stdout
    r = cli("summary", "big", "--by", "path", root=root, limit_mb=MEM_MB)
    assert r.returncode == 0, r.stderr[-2000:]
    assert max(map(len, r.stdout.splitlines())) < 10_000  # long names are cut for the terminal
    if "nesting" in name:
        from workbench.trace import load_dir

        t = load_dir(root / "big")
        assert int(t.ranges["depth"].max()) == 9_999
        from workbench.trace.assemble.paths import PATH_MAX

        assert t.ranges["path"].str.len().max() <= PATH_MAX


def test_cap_really_bites(tmp_path):
    """The cap is real: a process that needs more than it gets fails (here with a clean line)."""
    root = tmp_path / "traces"
    f = tg.write_kineto(tg.simple_spec(), tmp_path / "ok.json")
    r = cli("import", f, root=root, limit_mb=200)
    assert r.returncode != 0


# ---------------------------------------------------------------- stored traces damaged or crafted on disk

def _edit_table(table, fn):
    def apply(d: Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        df = pq.read_table(d / f"{table}.parquet").to_pandas()
        fn(df)
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), d / f"{table}.parquet")
    return apply


def _set(col, value):
    return lambda df: df.__setitem__(col, value(df) if callable(value) else value)


DAMAGE = {
    "truncated-parquet": (lambda d: (d / "kernels.parquet").write_bytes((d / "kernels.parquet").read_bytes()[:100]), "damaged"),
    "manifest-not-json": (lambda d: (d / "manifest.json").write_text("{bad"), "manifest"),
    "manifest-a-list": (lambda d: (d / "manifest.json").write_text("[1, 2]"), "manifest"),
    "manifest-source-a-list": (lambda d: (d / "manifest.json").write_text('{"name": "x", "source": [1]}'), "source"),
    "table-missing": (lambda d: (d / "ranges.parquet").unlink(), "missing"),
    "table-swapped": (lambda d: (d / "ranges.parquet").write_bytes((d / "kernels.parquet").read_bytes()), "lacks"),
    "null-time": (_edit_table("kernels", _set("start", lambda df: [None] + list(df["start"][1:]))), "start"),
    "parent-out-of-range": (_edit_table("ranges", _set("parent", 10**9)), "range tree"),
    "parent-cycle": (_edit_table("ranges", lambda df: (df.__setitem__("parent", [(i + 1) % len(df) for i in range(len(df))]),
                                                       df.__setitem__("depth", 1))), "range tree"),
    "ranges-unsorted": (_edit_table("ranges", _set("start", lambda df: df["start"][::-1].to_numpy())), "range tree"),
    "range-id-out-of-range": (_edit_table("kernels", _set("range_id", 10**9)), "range_id"),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    from workbench.trace import import_file, save

    root = tmp_path_factory.mktemp("stored")
    save(import_file(tg.write_kineto(tg.simple_spec(), root / "t.json")), "base", root / "traces")
    return root / "traces" / "base"


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_stored_trace(stored, tmp_path, damage):
    """A stored trace someone edited (or crafted) on disk: one clean line from load (or, for
    damage inside the table data, which is read on first use, from the first analysis) and
    from the CLI, never an IndexError or an endless loop in analysis."""
    import shutil

    from workbench.errors import WorkbenchError
    from workbench.trace import load_dir

    root = tmp_path / "traces"
    shutil.copytree(stored, root / "bad")
    fn, match = DAMAGE[damage]
    fn(root / "bad")
    from workbench.analysis import project, summary

    with pytest.raises(WorkbenchError, match=f"(?i){match}"):
        t = load_dir(root / "bad")
        summary(t, by="layer")  # reads the range tree and range totals
        summary(t, by="kernel")  # reads kernel times
        project(t)  # reads every kernel column
    if damage in ("parent-cycle", "manifest-source-a-list", "null-time", "range-id-out-of-range"):  # the ones that crashed or hung the CLI
        # a command that reads the damaged column
        cmd = {"null-time": ["summary", "--by", "kernel"], "range-id-out-of-range": ["sql"]}.get(damage, ["summary", "--by", "layer"])
        r = cli(cmd[0], "bad", *cmd[1:], *(["select count(*) from projected"] if cmd[0] == "sql" else []), root=root, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
        assert "bad" in r.stderr
