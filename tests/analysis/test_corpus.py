"""Real traces of every kind people have (``tests/corpus``, origins in its README) import, and
each one's per-range kernel counts equal an independent computation from the file itself
(``tests/corpus_truth.py``: json, sqlite3 and plain Python, nothing from the workbench).

The workbench's own rules that the independent one follows on purpose, rather than finding
for itself: a CPU-only Kineto trace's work units are its top-level CPU ops; 2021-era
``Operator`` events are ranges only where they are profiler steps (``ProfilerStep#N``);
duplicate correlation ids go to the first call in the file. Nothing in the corpus nests
nn.Module events without annotations, replays CUDA graphs or crosses ranges on a thread, so
every file is compared range path by range path.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import corpus_truth as truth
from helpers import CORPUS
from workbench import import_file
from workbench.trace.readers.kineto import decode, events
from workbench.trace.readers.nsys import pages

FILES = sorted(p.name for p in CORPUS.iterdir() if p.name != "README.md")

# Each file's work units (how many, of which kind) and the GPU activity it holds that makes no
# rows: what its import must say of it besides the counts.
EXPECTED = {
    "kineto-2020-tbplugin-resnet50-bare-array.json.gz": (9538, "kernel", {}),
    "kineto-2021-tbplugin-gpu-metrics.json.gz": (30, "kernel", {}),
    "kineto-2021-tbplugin-resnet50.json.gz": (8772, "kernel", {}),
    "kineto-2022-hta-backward-thread.json": (1, "kernel", {}),
    "kineto-2022-hta-cpu-only-no-schema.json.gz": (973, "cpu_op", {}),
    "kineto-2022-hta-inference-capitalized.json.gz": (4, "kernel", {}),
    "kineto-2022-hta-trace-diff-control.json.gz": (8568, "kernel", {}),
    "kineto-2022-hta-trace-diff-test.json.gz": (9876, "kernel", {}),
    "kineto-2023-hta-alexnet-cuda-sync.json.gz": (79, "kernel", {"cuda_sync": 41}),
    "kineto-2023-hta-cupti-profiler-range.json.gz": (147, "cpu_op", {"cuda_profiler_range": 77}),
    "kineto-2023-hta-sampled-no-flows.json.gz": (1154, "kernel", {}),
    "kineto-2024-hta-cpu-only.json.gz": (4, "cpu_op", {}),
    "kineto-2024-hta-nccl.json.gz": (2700, "kernel", {"gpu_user_annotation": 30}),
    "kineto-2024-hta-ns-resolution.json.gz": (4350, "kernel", {"gpu_user_annotation": 15}),
    "kineto-2024-hta-rocm-mi250.json.gz": (14, "kernel", {"gpu_user_annotation": 2}),
    "kineto-2024-hta-triton-cuda-driver.json.gz": (1, "kernel", {}),
    "kineto-2025-hta-mtia-inference.json.gz": (3545, "cpu_op", {"mtia_ccp_events": 1313}),
    "kineto-2026-kineto-docs-h100.json.gz": (1, "kernel", {"cuda_sync": 2}),
    "nsys-2022.2-pipit-saxpy-mpi.sqlite.gz": (5, "kernel", None),
    "nsys-2024.5-pipit-cloverleaf.sqlite.gz": (1312, "kernel", None),
    "nsys-2026.1-nsys-ai-mock.sqlite.gz": (2, "kernel", None),
    "nsys-2026.1-nsys-ai-reduced-columns.sqlite.gz": (400, "kernel", None),
    "nsys-2026.2-nsys-ai-h100-2gpu.sqlite.gz": (3442, "kernel", None),
    "nsys-2026.2-nsys-ai-mfu-2gpu-after.sqlite.gz": (3587, "kernel", None),
    "nsys-2026.2-nsys-ai-mfu-2gpu-before.sqlite.gz": (4010, "kernel", None),
}


def counts(trace) -> Counter:
    """The workbench's kernels per range path, and those outside ranges or without a launch.
    Kernels in ranges inferred from the kernel stream (a file with no ranges of its own) are
    counted as outside ranges, as the independent count sees them: real ranges stay as they were."""
    r = trace.ranges
    out = Counter()
    for path, n, domain in zip(r["path"], r["kernels"], r["domain"]):
        out[truth.NO_RANGE if domain == "inferred" else str(path)] += int(n)
    totals = trace.meta["attribution"]
    out[truth.NO_RANGE] += totals["no_range"]["kernels"]
    out[truth.NO_LAUNCH] += totals["no_launch"]["kernels"]
    return +out


def expected_counts(path: Path) -> Counter:
    return +(truth.nsys_counts(path) if path.name.startswith("nsys-") else truth.kineto_counts(path))


def test_every_file_has_its_origin_and_expectation():
    readme = (CORPUS / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", readme, re.M))
    assert listed == set(FILES) == set(EXPECTED)


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_imports_and_matches_the_independent_counts(name):
    path = CORPUS / name
    trace = import_file(path)
    n, units, other = EXPECTED[name]
    source = trace.meta["source"]
    assert (len(trace.kernels), source.get("work_units", "kernel")) == (n, units)
    assert counts(trace) == expected_counts(path)
    assert sum(counts(trace).values()) == n  # no kernel is left uncounted
    if other is not None:  # Kineto: the GPU activity that makes no rows is counted and said
        assert source["other_gpu_events"] == other
        assert ("note" in source) == bool(other)
        assert all(kind in source.get("note", "") for kind in other)


def test_a_trace_whose_gpu_work_is_profiler_ranges_says_so():
    trace = import_file(CORPUS / "kineto-2023-hta-cupti-profiler-range.json.gz")
    assert trace.meta["source"]["note"] == ("no kernel events, so the work units are CPU ops; GPU activity not "
                                            "imported: 77 cuda_profiler_range")


def test_2021_categories_and_steps():
    """PyTorch 1.8/1.9 wrote Kernel, Runtime, Operator, Memcpy, Memset: once refused as an
    empty trace. Its steps are the ranges, and every step holds kernels."""
    trace = import_file(CORPUS / "kineto-2021-tbplugin-resnet50.json.gz")
    assert len(trace.api) == 11923 and len(trace.memcpy) == 12 and len(trace.memset) == 312
    steps = trace.ranges
    assert list(steps["name"]) == [f"ProfilerStep#{i}" for i in range(5, 11)]
    assert (steps["kernels"] > 0).all()


# ---------------------------------------------------------------- the two readers of each format

def assert_same(a, b):
    assert a.meta == b.meta
    assert list(a.tables) == list(b.tables)
    for name, x in a.tables.items():
        pd.testing.assert_frame_equal(x, b.tables[name], check_exact=True)


SCANNED = ["kineto-2020-tbplugin-resnet50-bare-array.json.gz", "kineto-2021-tbplugin-resnet50.json.gz",
           "kineto-2021-tbplugin-gpu-metrics.json.gz", "kineto-2022-hta-inference-capitalized.json.gz",
           "kineto-2023-hta-cupti-profiler-range.json.gz", "kineto-2025-hta-mtia-inference.json.gz"]


@pytest.mark.parametrize("name", SCANNED)
def test_c_scanner_and_library_agree_on_other_generations(name, monkeypatch):
    fast = import_file(CORPUS / name)
    monkeypatch.setattr(decode, "scanner", lambda: None)
    assert_same(fast, import_file(CORPUS / name))


def test_c_scanner_counts_the_kinds_the_library_counts():
    c = decode.scanner()
    if c is None:
        pytest.skip("the C scanner is not built")
    assert c.OTHER_GPU == events.OTHER_GPU


SPELLINGS = [
    ("KERNEL", "X", "k"), ("Runtime", "X", "cudaLaunchKernel"), ("Cuda_Driver", "X", "cuLaunchKernel"),
    ("Operator", "X", "ProfilerStep#3"), ("Operator", "B", "ProfilerStep#4"), ("Operator", "X", "aten::mm"),
    ("Memcpy", "X", "Memcpy HtoD"), ("MEMSET", "X", "Memset"), ("User_Annotation", "X", "step"),
    ("GPU_User_Annotation", "X", "a"), ("Cuda_Profiler_Range", "X", "k"), ("overhead", "X", "o"),
    ("\u212aernel", "X", "not a kernel: its K is not ASCII"), ("kernels", "X", "nothing"),
]


def test_categories_of_any_spelling_read_alike_by_both_paths(tmp_path, monkeypatch):
    doc = [{"ph": ph, "cat": cat, "name": name, "pid": 1, "tid": 2, "ts": 10 * i, "dur": 5,
            "args": {"correlation": 7, "device": 0, "stream": 7}} for i, (cat, ph, name) in enumerate(SPELLINGS)]
    path = tmp_path / "spellings.json"
    path.write_text(json.dumps(doc))
    fast = import_file(path)
    monkeypatch.setattr(decode, "scanner", lambda: None)
    assert_same(fast, import_file(path))
    assert len(fast.kernels) == 1 and len(fast.api) == 2 and len(fast.memcpy) == len(fast.memset) == 1
    assert list(fast.ranges["name"]) == ["ProfilerStep#3", "step"]
    assert fast.meta["source"]["other_gpu_events"] == {"gpu_user_annotation": 1, "cuda_profiler_range": 1, "overhead": 1}


# ---------------------------------------------------------------- nsys with fewer columns

def trimmed(src: Path, dst: Path) -> Path:
    """A copy of a real export whose GPU tables lost globalPid, as trimmed exports have it."""
    with gzip.open(src) as fh, open(dst, "wb") as out:
        shutil.copyfileobj(fh, out)
    con = sqlite3.connect(dst)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        con.execute(f"ALTER TABLE {table} DROP COLUMN globalPid")
    con.commit()
    con.close()
    return dst


@pytest.mark.parametrize("page_reader", [True, False])
def test_export_without_process_ids_is_read_as_one_process(tmp_path, monkeypatch, page_reader):
    """Read as one process by either reader of its pages, the export keeps every range's
    kernels; only kernels whose own process made no call with their correlation id (their
    launch fell before the window this export was cut to) now take the other process's call
    with that id: what reading it as one process costs, and why the manifest says so."""
    src = CORPUS / "nsys-2026.2-nsys-ai-h100-2gpu.sqlite.gz"
    path = trimmed(src, tmp_path / "trimmed.sqlite")
    read = []  # the tables the page reader was given
    if not page_reader:
        monkeypatch.setattr(pages, "read_table", None)
    elif pages.read_table is None:
        pytest.skip("the C page reader is not built")
    else:
        monkeypatch.setattr(pages, "read_table", lambda *a, _read=pages.read_table: read.append(a) or _read(*a))
    trace = import_file(path)
    assert bool(read) == page_reader
    one, full = counts(trace), counts(import_file(src))
    assert one == +truth.nsys_counts(path)
    borrowed = full[truth.NO_LAUNCH] - one[truth.NO_LAUNCH]
    assert 0 < borrowed < 20 and full - one == Counter({truth.NO_LAUNCH: borrowed})
    assert sum((one - full).values()) == borrowed
    source = trace.meta["source"]
    assert source["assumed_single_process"] is True and "one process" in source["note"]
    assert len(trace.memcpy) == 904 and len(trace.memset) == 22
