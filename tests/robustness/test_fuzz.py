"""Property-based and fuzz tests of both importers and of the projection.

- Random valid traces (nested ranges on several threads of two processes, kernels launched
  at random times by API calls, some without a launch record, duplicate correlation ids)
  written as Kineto JSON (X and B/E ranges) and as nsys-like SQLite must give the same
  per-range kernel counts as a plain O(n*m) reference (tests/badinput/tracegen.py).
- Random intervals that cross (not nested) must follow the documented tolerant rule:
  innermost = the most recently started range still open.
- Random JSON values in every event field must give a Trace or a WorkbenchError.
- Random byte mutations of valid files (tests/badinput/fuzz_worker.py, in worker processes
  with a memory cap) must never crash: WB_FUZZ_N sets their number (default 800), and a
  quarter as many of a few real traces of tests/corpus.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import BADINPUT, REFERENCE, TESTS
import tracegen as tg

from workbench.errors import WorkbenchError
from workbench.trace import import_file

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                derandomize=True)
GRID = 10  # times on a 10 ns grid, so launches land exactly on range boundaries often


def _nested(rng, pid, tid, lo, hi, depth, out, names):
    """Properly nested children of [lo, hi): disjoint (possibly touching) siblings, each
    strictly smaller than its parent so no two ranges are identical."""
    if depth > 5 or hi - lo < 2 * GRID:
        return
    cuts = sorted(rng.sample(range(lo // GRID, hi // GRID + 1), k=min(rng.randint(0, 6), (hi - lo) // GRID + 1)))
    for a, b in zip(cuts[::2], cuts[1::2]):
        a, b = a * GRID, b * GRID
        if (a, b) == (lo, hi):
            b -= GRID
        if b < a:
            continue
        out.append((pid, tid, rng.choice(names), a, b))
        _nested(rng, pid, tid, a, b, depth + 1, out, names)


def random_spec(rng, nested: bool = True, dup_corr: bool = True) -> dict:
    names = ["step", "layer_0", "layer_1", "attn", "kv_write", "mlp", "x"]
    threads = [(pid, tid) for pid in (100, 200) for tid in (1, 2)][: rng.randint(1, 4)]
    span = GRID * rng.randint(20, 300)
    ranges = []
    for pid, tid in threads:
        if nested:
            for _ in range(rng.randint(0, 3)):
                a = rng.randrange(0, span, GRID)
                b = a + GRID * rng.randint(0, 100)
                # top-level ranges of one thread must not overlap each other either
                if all(b <= r[3] or a >= r[4] for r in ranges if r[:2] == (pid, tid) and r[3] < r[4]) and a < b:
                    ranges.append((pid, tid, rng.choice(names), a, b))
                    _nested(rng, pid, tid, a, b, 1, ranges, names)
        else:
            seen = set()
            for _ in range(rng.randint(0, 12)):
                a = rng.randrange(0, span, GRID)
                b = a + GRID * rng.randint(0, 80)
                if (a, b) not in seen:  # identical intervals have no defined innermost
                    seen.add((a, b))
                    ranges.append((pid, tid, rng.choice(names), a, b))
    rng.shuffle(ranges)
    api, kernels = [], []
    for corr in range(1, rng.randint(1, 40)):
        pid, tid = rng.choice(threads)
        t = rng.randrange(0, span + 50, GRID)
        if rng.random() < 0.9:
            api.append((pid, tid, rng.choice(["cudaLaunchKernel", "cuLaunchKernelEx"]), t, t + GRID, corr))
        ks = rng.randint(1, 2)
        for _ in range(ks):
            s = t + GRID * rng.randint(1, 50)
            kernels.append((rng.choice(["gemm", "void at::native::elementwise<4>(int)", "triton_kv"]), s,
                            s + GRID * rng.randint(0, 10), 0, 7, corr, pid))
    if dup_corr and api and rng.random() < 0.5:
        a = rng.choice(api)
        pid, tid = rng.choice(threads)
        api.append((a[0], tid, "cudaLaunchKernel", a[3] + GRID, a[4] + GRID, a[5]))  # later duplicate loses
    if not (ranges or api or kernels):
        api.append((100, 1, "cudaLaunchKernel", 0, GRID, 999))
    return {"ranges": ranges, "api": api, "kernels": kernels}


def _check(spec, path, writer, pid_of=None, **kw):
    writer(spec, path, **kw)
    trace = import_file(path)
    got = tg.projected_counts(trace, pid_of)
    want = tg.reference_projection(spec)
    assert got == want, (path.name, got, want)
    assert len(trace.kernels) == len(spec["kernels"])


NSYS_PIDS = {tg.nsys_pid(p): p for p in (100, 200)}


@settings(max_examples=30, **SETTINGS)
@given(st.randoms(use_true_random=False))
def test_nested_ranges_match_reference(tmp_path, rng):
    spec = random_spec(rng, nested=True)
    _check(spec, tmp_path / "t.json", tg.write_kineto)
    _check(spec, tmp_path / "t-be.json.gz", tg.write_kineto, gz=True, range_style="BE")
    _check(spec, tmp_path / "t.sqlite", tg.write_nsys, NSYS_PIDS)


@settings(max_examples=25, **SETTINGS)
@given(st.randoms(use_true_random=False))
def test_crossing_ranges_match_reference(tmp_path, rng):
    """Arbitrary (crossing) intervals: innermost = most recently started open range."""
    spec = random_spec(rng, nested=False)
    _check(spec, tmp_path / "c.json", tg.write_kineto)
    _check(spec, tmp_path / "c.sqlite.gz", tg.write_nsys, NSYS_PIDS, gz=True)


def test_reference_agrees_on_real_capture():
    """The reference and the projection agree on a real nsys capture too (480 kernels, 99 ranges)."""
    f = REFERENCE / "nsys-kvwrite-unfused.sqlite.gz"
    if not f.exists():
        pytest.skip("shared reference captures not present")
    t = import_file(f)
    k, r = t.kernels, t.ranges
    spec = {
        "ranges": list(zip(r["pid"], r["tid"], r["name"].astype(str), r["start"], r["end"])),
        "api": [(p, tid, "launch", s, e, c) for p, tid, s, e, c in
                zip(k["pid"], k["launch_tid"], k["launch_start"], k["launch_end"], k["correlation"]) if tid >= 0],
        "kernels": list(zip(k["name"].astype(str), k["start"], k["end"], k["device"], k["stream"], k["correlation"], k["pid"])),
    }
    spec = {key: [tuple(int(x) if not isinstance(x, str) else x for x in row) for row in rows] for key, rows in spec.items()}
    assert tg.projected_counts(t) == tg.reference_projection(spec)


# ---------------------------------------------------------------- structured JSON fuzz

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
field_values = st.one_of(json_values, st.integers(0, 10_000), st.sampled_from(["X", "B", "E", "kernel"]))
CATS = ["kernel", "cuda_runtime", "cuda_driver", "user_annotation", "cpu_op", "gpu_memcpy", "gpu_memset",
        "gpu_user_annotation", "python_function",
        # 2021-era PyTorch's spellings, and GPU activity that makes no rows (counted)
        "Kernel", "Runtime", "Operator", "Memcpy", "Memset", "cuda_profiler_range", "cuda_sync", "mtia_ccp_events"]


@st.composite
def kineto_events(draw):
    events = []
    for _ in range(draw(st.integers(0, 12))):
        e = {"ph": draw(st.sampled_from(["X", "X", "X", "B", "E", "i", "M"]) | field_values),
             "cat": draw(st.sampled_from(CATS) | field_values),
             "name": draw(st.sampled_from(["k", "r", "\x1b[31m", "ProfilerStep#1"]) | field_values),
             "pid": draw(st.integers(0, 3) | field_values), "tid": draw(st.integers(0, 3) | field_values),
             "ts": draw(st.integers(0, 1000) | field_values), "dur": draw(st.integers(0, 100) | field_values)}
        if draw(st.booleans()):
            e["args"] = draw(st.fixed_dictionaries({}, optional={
                k: st.integers(0, 5) | field_values
                for k in ("correlation", "device", "stream", "grid", "block", "bytes")}) | field_values)
        for k in draw(st.lists(st.sampled_from(sorted(e)), max_size=2)):
            e.pop(k, None)
        events.append(e)
    top = {"traceEvents": events}
    for k in draw(st.lists(st.sampled_from(["deviceProperties", "distributedInfo", "schemaVersion"]), max_size=2)):
        top[k] = draw(json_values)
    return top


@settings(max_examples=120, **SETTINGS)
@given(kineto_events())
def test_kineto_random_json_never_crashes(tmp_path, doc):
    from workbench.analysis import project, summary

    p = tmp_path / "f.json"
    p.write_text(json.dumps(doc))
    try:
        t = import_file(p)
    except WorkbenchError as e:
        assert str(e).startswith(str(p)), str(e)
        return
    project(t)
    summary(t, by="range")


# ---------------------------------------------------------------- byte mutations

# Real traces of the corpus (tests/corpus) mutated as the synthetic seeds are: a 2021-era
# Kineto trace (Operator/Runtime/Kernel, a ProfilerStep), one whose GPU work is only
# cuda_profiler_range events, an nsys export without globalPid or NVTX, and the CUDA-graph probe
# (graph node events, kernels replayed under their capture-time ranges). Small ones, so that
# each mutation imports in milliseconds.
CORPUS_SEEDS = ["corpus/kineto-2021-tbplugin-gpu-metrics.json.gz", "corpus/kineto-2022-hta-inference-capitalized.json.gz",
                "corpus/nsys-2026.1-nsys-ai-reduced-columns.sqlite.gz", "data/nsys-graph-probe.sqlite.gz"]


@pytest.mark.parametrize("corpus", [False, True], ids=["synthetic", "corpus"])
def test_random_byte_mutations_never_crash(tmp_path, corpus):
    # WB_FUZZ_N mutations of the synthetic seeds, a quarter as many of the corpus's.
    n = int(os.environ.get("WB_FUZZ_N", "800")) // (4 if corpus else 1)
    files = ["--files", ",".join(str(TESTS / f) for f in CORPUS_SEEDS)] if corpus else []
    procs = []
    for seed in (0, 1):
        out = tmp_path / f"fuzz-{seed}.json"
        cmd = [sys.executable, str(BADINPUT / "fuzz_worker.py"), str(tmp_path / f"w{seed}"), str(out),
               "--n", str(n // 2), "--seed", str(seed), "--mem-mb", "3000", *files]
        procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out))
    total = {"mutations": 0, "imported": 0, "rejected": 0}
    crashes = []
    for p, out in procs:
        so, se = p.communicate(timeout=900)
        assert p.returncode == 0, f"fuzz worker died (rc {p.returncode}, a hard crash or the memory cap): {se[-3000:]}"
        s = json.loads(out.read_text())
        for k in total:
            total[k] += s[k]
        crashes += s["crashes"]
    print(f"\n{total['mutations']} mutations: {total['imported']} imported, {total['rejected']} rejected cleanly, "
          f"{len(crashes)} crashes")
    assert total["mutations"] == 2 * (n // 2)
    assert total["imported"] > 0 and total["rejected"] > 0  # the mutations reach both outcomes
    assert not crashes, "\n\n".join(f"{c['file']}:\n{c['error']}" for c in crashes[:5])
