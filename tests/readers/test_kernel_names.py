"""Readable kernel names that still tell kernels apart, and a CPU-only trace's honest column
names in the CLI, on committed real traces."""

from __future__ import annotations

import json

import workbench
from workbench.trace.names import display_names, short_kernel_name

from helpers import CPU_TRACE, TRACES, run_cli

H200 = TRACES / "h200-hf-attn-eager-static-nsys"


def test_display_names_tell_every_kernel_apart():
    names = list(workbench.open_trace(H200).kernels["name"].cat.categories)
    shown = display_names(names)
    assert len(set(shown)) == len(names)  # 17 different kernels: 17 names, never one "Kernel"
    shorts = [short_kernel_name(n) for n in names]
    for short, display in zip(shorts, shown):
        if shorts.count(short) == 1:
            assert display == short  # unique: the short name as it is
        else:
            assert display.startswith(short + "<") and len(display) < 120
    # The distinguishing template arguments, without namespaces.
    assert "vectorized_elementwise_kernel<4, CUDAFunctorOnSelf_add<float>, array<char *, 2>>" in shown


def test_summary_by_kernel_has_one_row_per_kernel():
    t = workbench.open_trace(H200)
    by_kernel = workbench.summary(t, by="kernel")
    assert len(by_kernel) == len(t.kernels["name"].cat.categories)
    assert by_kernel["kernels"].sum() == len(t.kernels)
    assert by_kernel["mean_ns"].dtype.kind == "i"


def test_a_cpu_trace_says_cpu_ops_in_the_cli(tmp_path):
    done = run_cli("summary", str(CPU_TRACE), "--by", "range", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and {"cpu_ops", "cpu_time_ns"} <= set(rows[0]) and "gpu_time_ns" not in rows[0]
    done = run_cli("summary", str(H200), "--by", "range", "--json")
    assert {"kernels", "gpu_time_ns"} <= set(json.loads(done.stdout)[0])
