"""The GPU projection of each range, checked against Nsight Systems' own recipes.

``tests/data/recipes/`` holds two H200 captures of the reference decoder (eager and CUDA
graphs) with the output of ``nsys recipe nvtx_gpu_proj_trace`` and ``nvtx_gpu_proj_sum`` run
on them by nsys 2025.3.1 (README there). The workbench's projection, computed from the SQLite
export alone, must give nsys's numbers: per range instance (start and end, to the nanosecond:
both read the same CUPTI timestamps) and per range name (Count, Sum, Median). Under CUDA graphs
the two attribute replayed kernels differently (nsys: to the ranges open at capture; the
workbench: to each replay), and the test pins down exactly how the numbers then relate.
"""

from __future__ import annotations

import gzip
import shutil
import json

import numpy as np
import pandas as pd

import workbench as wb
from workbench.analysis.gpu_projection import projection_by_name, range_projection

from helpers import DATA, REFERENCE
RECIPES = DATA / "recipes"
KINETO = RECIPES / "kineto-kvwrite-unfused-cache-full.json.gz"


def _load(variant: str):
    trace = wb.import_file(str(RECIPES / variant / "capture.sqlite.gz"))
    ours = trace.ranges[["name", "path"]].join(range_projection(trace))
    ours["name"] = ours["name"].astype(str)
    return trace, ours, pd.read_parquet(RECIPES / variant / "nvtx_gpu_proj_trace.parquet"), \
        pd.read_parquet(RECIPES / variant / "nvtx_gpu_proj_sum.parquet")


def _instances(frame: pd.DataFrame, name: str, start: str, end: str) -> list[tuple]:
    return sorted(map(tuple, frame[[name, start, end]].astype({start: np.int64, end: np.int64}).to_numpy().tolist()))


def test_eager_projection_equals_nvtx_gpu_proj_trace_per_instance():
    _, ours, trace_rows, _ = _load("dec-eager")
    ours = ours[ours["gpu_ops"] > 0]
    assert len(ours) == len(trace_rows) == 126
    # Every range instance, by name, start and end: the same set, to the nanosecond.
    assert _instances(ours, "name", "gpu_start", "gpu_end") == _instances(trace_rows, "Text", "Start", "End")


def test_eager_per_name_count_sum_median_equal_nvtx_gpu_proj_sum():
    trace, _, _, sums = _load("dec-eager")
    ours = projection_by_name(trace).set_index("range")
    assert sorted(ours.index) == sorted(sums.index)
    assert (ours["count"] == sums["Count"]).all()
    assert (ours["gpu_proj_sum_ns"] == sums["Sum"]).all()
    assert np.allclose(ours["gpu_proj_median_ns"], sums.loc[ours.index, "Median"])
    assert np.allclose(ours["gpu_proj_min_ns"], sums.loc[ours.index, "Min"])
    assert np.allclose(ours["gpu_proj_max_ns"], sums.loc[ours.index, "Max"])
    # A host-bound eager step: kv_write's projection is ten times its summed kernel time.
    kv = ours.loc["kv_write"]
    assert kv["gpu_proj_sum_ns"] == 5282206 and kv["kernel_time_ns"] == 526362


def test_graph_steps_agree_and_captured_ranges_differ_as_documented():
    trace, ours, trace_rows, sums = _load("dec-graph")
    # Ranges around the graph launches (the steps) are projected alike: per instance, exactly.
    steps = ours[ours["name"].str.startswith("step_")]
    assert _instances(steps, "name", "gpu_start", "gpu_end") == _instances(
        trace_rows[trace_rows["Text"].str.startswith("step_")], "Text", "Start", "End")
    assert (projection_by_name(trace).set_index("range").loc[steps["name"], "gpu_proj_sum_ns"].to_numpy()
            == sums.loc[steps["name"], "Sum"].to_numpy()).all()
    k = trace.kernels
    ks = k[["start", "end"]].assign(name=trace.ranges["name"].astype(str).to_numpy()[k["range_id"].to_numpy()])
    graph = ks[k["graph"].to_numpy()]
    # An innermost captured range: nsys makes each replayed kernel an instance of its own, so its
    # Count is the workbench's kernel count and its Sum the summed kernel time, per name.
    for name in ("qkv", "kv_write", "attention", "mlp", "lm_head"):
        mine = graph[graph["name"] == name]
        theirs = trace_rows[trace_rows["Text"] == name]
        assert _instances(mine, "name", "start", "end") == _instances(theirs, "Text", "Start", "End")
        assert sums.loc[name, "Count"] == len(mine) and sums.loc[name, "Sum"] == int((mine["end"] - mine["start"]).sum())
        # The workbench: one instance per layer per replay instead, spanning its kernels.
        assert len(ours[(ours["name"] == name) & (ours["gpu_ops"] > 0)]) == 3 * (8 if name != "lm_head" else 1)
    # An enclosing captured range: nsys gives one span from the first replay to the last; the
    # workbench one per replay, whose union of spans is nsys's.
    for layer in (f"layer_{i:02d}" for i in range(8)):
        mine = ours[(ours["name"] == layer) & (ours["gpu_ops"] > 0)]
        (theirs,) = trace_rows[trace_rows["Text"] == layer].itertuples()
        assert len(mine) == 3 and (mine["gpu_start"].min(), mine["gpu_end"].max()) == (theirs.Start, theirs.End)
    # The capturing range holds its own warm-up kernels and, for nsys, every replay.
    (cap,) = trace_rows[trace_rows["Text"] == "graph_capture"].itertuples()
    mine = ours[ours["name"] == "graph_capture"].iloc[0]
    assert (mine["gpu_start"], int(graph["end"].max())) == (cap.Start, cap.End)


def test_summary_shows_the_projection_beside_kernel_time():
    trace = wb.import_file(str(RECIPES / "dec-eager" / "capture.sqlite.gz"))
    by_range = wb.summary(trace, by="range", projection=True).set_index("range")
    assert by_range.loc["kv_write", "gpu_time_ns"] == 526362
    assert by_range.loc["kv_write", "gpu_proj_instances"] == 24
    assert by_range.loc["kv_write", "gpu_proj_sum_ns"] == 5282206
    assert by_range.loc["kv_write", "gpu_proj_median_ns"] == 216285.5
    # The layer ranges launch no kernel themselves: a row of their own, with their projection.
    assert by_range.loc["layer", "kernels"] == 0 and by_range.loc["layer", "gpu_proj_instances"] == 24
    by_step = wb.summary(trace, by="step", projection=True).set_index("step")
    assert by_step["gpu_proj_sum_ns"].to_dict() == {"step_0": 6385485, "step_1": 5290844, "step_2": 5313019}
    by_path = wb.summary(trace, by="path", projection=True).set_index("path")
    assert by_path.loc["step_0/layer_00", "gpu_proj_sum_ns"] == 1173969
    # Without the option, the table is as it was.
    assert "gpu_proj_sum_ns" not in wb.summary(trace, by="range").columns


def _kineto_events() -> list[dict]:
    return json.loads(gzip.open(KINETO).read())["traceEvents"]


def _kineto_spans(events: list[dict]) -> dict[int, tuple[str, float, float]]:
    """From the JSON itself, per user annotation (by its External id): its name and the span of
    the GPU work whose launch call (runtime or driver) starts inside it on the same thread."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    spans = {}
    for r in (e for e in events if e.get("cat") == "user_annotation"):
        lo, hi = r["ts"], r["ts"] + r["dur"]
        mine = [g for g in gpu if (c := launches.get(g["args"].get("correlation"))) is not None
                and (c["pid"], c["tid"]) == (r["pid"], r["tid"]) and lo <= c["ts"] <= hi]
        if mine:
            spans[r["args"]["External id"]] = (r["name"], min(g["ts"] for g in mine),
                                               max(g["ts"] + g["dur"] for g in mine))
    return spans


def test_torch_profiler_ranges_get_the_same_projection():
    """The torch.profiler capture of the same decoder: each record_function range's projection
    is the span of the GPU work launched inside it, read from the JSON independently; where
    Kineto wrote its own GPU-side annotation for an innermost range, that span too."""
    trace = wb.import_file(str(KINETO))
    p = trace.ranges[["name"]].join(range_projection(trace))
    p = p[p["gpu_ops"] > 0]
    events = _kineto_events()
    spans = _kineto_spans(events)
    assert len(spans) == len(p) == 99
    # Microsecond floats in the JSON, nanoseconds in the trace: within the clock's resolution.
    got = sorted((str(n), int(s), int(e)) for n, s, e in p[["name", "gpu_start", "gpu_end"]].to_numpy())
    want = sorted((n, round(s * 1000), round(e * 1000)) for n, s, e in spans.values())
    assert [g[0] for g in got] == [w[0] for w in want]
    assert max(abs(g[1] - w[1]) + abs(g[2] - w[2]) for g, w in zip(got, want)) <= 2
    # Kineto's gpu_user_annotation spans only the work a range launched itself: equal to the
    # projection for innermost ranges; a step's covers only its own memcpy.
    kineto = {e["args"]["External id"]: e for e in events if e.get("cat") == "gpu_user_annotation"}
    inner = {x: v for x, v in kineto.items() if not v["name"].startswith("step_")}
    assert len(inner) == 72
    assert max(abs(v["ts"] - spans[x][1]) + abs(v["ts"] + v["dur"] - spans[x][2]) for x, v in inner.items()) < 0.003
    steps = [v for v in kineto.values() if v["name"].startswith("step_")]
    assert len(steps) == 3 and all(v["dur"] < 1 for v in steps)


REP = REFERENCE / "nsys-kvwrite-unfused.nsys-rep"


def test_recipe_command_says_in_one_line_what_it_lacks(tmp_path, capsys):
    """``workbench recipe`` needs the trace's kept .nsys-rep and nsys on PATH; without either it
    says so in one line and exits 2 (this machine has no nsys: the run itself is untested here)."""
    from workbench.cli.entry import main

    trace = wb.import_file(str(RECIPES / "dec-eager" / "capture.sqlite.gz"))
    wb.save(trace, "bare", root=tmp_path)
    assert main(["--root", str(tmp_path), "recipe", "nvtx_gpu_proj_sum", "bare"]) == 2
    assert "keeps no .nsys-rep" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "recipe", "../x", "bare"]) == 2
    if REP.exists() and shutil.which("nsys") is None:
        wb.save(trace, "kept", root=tmp_path, raw=[REP])
        assert main(["--root", str(tmp_path), "recipe", "nvtx_gpu_proj_sum", "kept"]) == 2
        assert "nsys not found on PATH" in capsys.readouterr().err


def test_h200_transformers_capture_equals_its_stored_recipes():
    # An H200 capture of transformers' generate() (Llama-3.2-1B shape, 16 layers, --modules),
    # with `nsys recipe nvtx_gpu_proj_trace` / `nvtx_gpu_proj_sum` run beside it by
    # benchmarks/h200_compiled.sh and stored with the trace (its recipes/ folder).
    from helpers import TRACES

    t = wb.open_trace(TRACES / "h200-hfc-sdpa-eager-nsys")
    recipes = TRACES / "h200-hfc-sdpa-eager-nsys" / "recipes"
    trace_rows = pd.read_parquet(recipes / "nvtx_gpu_proj_trace" / "trace.parquet")
    sums = pd.read_parquet(recipes / "nvtx_gpu_proj_sum" / "all_stats.parquet")
    ours = t.ranges[["name", "path"]].join(range_projection(t))
    ours["name"] = ours["name"].astype(str)
    ours = ours[ours["gpu_ops"] > 0]
    assert len(ours) == len(trace_rows) == 673
    assert _instances(ours, "name", "gpu_start", "gpu_end") == _instances(trace_rows, "Text", "Start", "End")
    by_name = projection_by_name(t).set_index("range")
    assert sorted(by_name.index) == sorted(sums.index)
    assert (by_name["count"] == sums.loc[by_name.index, "Count"]).all()
    assert (by_name["gpu_proj_sum_ns"] == sums.loc[by_name.index, "Sum"]).all()
