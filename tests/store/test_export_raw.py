"""Issue #21, item 5: the raw capture kept with a stored trace (``save(..., raw=[...])``,
``workbench import --keep-raw``) and the Chrome / Perfetto export (``export_chrome``,
``workbench export``), on the committed H200 traces.

The export's promise is that it imports again, through the workbench's own Kineto reader,
as the same trace: the same kernels (times to the nanosecond), ranges, launches and per-range
attribution.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from helpers import TRACES
import workbench as wb
from workbench.trace.chrome import write_chrome
from workbench.trace.schema import graph_note
from workbench.trace.store import content_hash

# Eager nsys (driver and runtime launches), CUDA-graph torch.profiler (graph kernels and
# copies), eager torch.profiler (Kineto's own clock, epoch-sized microseconds).
ROUND_TRIP = ["h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-cudagraph-torch", "h200-kvwrite-fused-eager-torch"]
SMALL = "h200-kvwrite-fused-eager-torch"
KERNEL_COLS = ["name", "start", "end", "device", "stream", "correlation", "graph", "launch_tid", "launch_start",
               "launch_end", "launch_api", "range_id"]


def _per_range(t) -> pd.DataFrame:
    return wb.summary(t, by="range").sort_values("range").reset_index(drop=True)


def _same_trace(t, u) -> None:
    """``u`` (the export imported again) is ``t``: kernels, ranges, per-range attribution."""
    assert u.rows("kernels") == t.rows("kernels")
    assert u.rows("ranges") == t.rows("ranges")
    assert u.rows("api") == t.rows("api")
    pd.testing.assert_frame_equal(_per_range(u), _per_range(t))
    assert u.meta["attribution"] == t.meta["attribution"]
    for col in KERNEL_COLS:
        assert (u.kernels[col].astype(str).to_numpy() == t.kernels[col].astype(str).to_numpy()).all(), col
    for col in ("name", "start", "end", "pid", "tid", "parent", "path", "kernels", "gpu_time_ns"):
        assert (u.ranges[col].astype(str).to_numpy() == t.ranges[col].astype(str).to_numpy()).all(), col


def _events(path: Path) -> list[dict]:
    """The file's events, read by the standard library's strict parser, numbers as decimals."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data, parse_float=Decimal)
    assert doc["schemaVersion"] == 1
    return doc["traceEvents"]


def _ns(us: Decimal) -> int:
    value = us * 1000
    assert value == value.to_integral_value(), us
    return int(value)


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_export_imports_again_as_the_same_trace(name, tmp_path):
    t = wb.open_trace(TRACES / name)
    out = wb.export_chrome(t, tmp_path / f"{name}.json")
    assert out == tmp_path / f"{name}.json"
    _same_trace(t, wb.import_file(out))


def test_graph_kernels_under_their_capture_ranges_export_under_their_launch(tmp_path):
    # The format has no graph nodes: the export is what Kineto would have recorded, the
    # ranges replayed from the graph's capture left out and its kernels under the step. The
    # capture's API calls are in it, so importing it again puts each replayed kernel back in
    # its capture-time ranges, matched by position (assemble/captured_launches.py).
    t = wb.open_trace(TRACES / "h200-kvwrite-fused-cudagraph-nsys")
    assert t.meta["graph_kernels"]["by_capture"] == 369
    out = wb.export_chrome(t, tmp_path / "graph.json")
    doc = json.loads(out.read_text())
    replayed = t.ranges["path"].str.match(r"step_\d+/").to_numpy()  # layer ranges below a step: replayed
    assert replayed.sum() == 3 * (8 * 5 + 1)  # per step: 8 layers and their 4 regions, lm_head
    annotations = sorted(e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation")
    assert annotations == sorted(t.ranges["name"].astype(str)[~replayed])
    u = wb.import_file(out)
    for col in KERNEL_COLS[:-1]:
        assert (u.kernels[col].astype(str).to_numpy() == t.kernels[col].astype(str).to_numpy()).all(), col
    assert sorted(u.ranges["path"]) == sorted(t.ranges["path"])
    paths = u.ranges["path"].to_numpy()
    assert (paths[u.kernels["range_id"].to_numpy()] == t.ranges["path"].to_numpy()[t.kernels["range_id"].to_numpy()]).all()
    assert u.kernels["graph"].sum() == 369
    # The three embedding kernels captured with no range of their own stay under their step.
    assert "366 under the ranges open at their capture, 3 only under" in graph_note(u.meta)


def test_the_file_is_chrome_trace_json_as_kineto_writes_it(tmp_path):
    t = wb.open_trace(TRACES / "h200-kvwrite-fused-cudagraph-nsys")
    path, count = write_chrome(t, tmp_path / "graph.json")
    events = _events(path)
    assert len(events) == count
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"ph", "ts", "dur", "pid", "tid", "name"} <= e.keys(), e
    text = path.read_text()
    assert not re.search(r'"(ts|dur)":-?\d+(,|\.\d{0,2}[,}]|\.\d{4})', text)  # always three decimals
    by_cat = pd.Series([e["cat"] for e in complete]).value_counts().to_dict()
    assert by_cat["kernel"] == t.rows("kernels")
    assert by_cat.get("user_annotation", 0) == t.rows("ranges") - 3 * (8 * 5 + 1)  # less the replayed ones
    assert by_cat["cuda_runtime"] + by_cat["cuda_driver"] == t.rows("api")
    assert by_cat["gpu_memcpy"] == t.rows("memcpy")

    # Times digit for digit: integer ns / 1000.
    kernels = [e for e in complete if e["cat"] == "kernel"]
    assert [_ns(e["ts"]) for e in kernels] == t.kernels["start"].tolist()
    assert [_ns(e["ts"] + e["dur"]) for e in kernels] == t.kernels["end"].tolist()
    assert [e["args"]["correlation"] for e in kernels] == t.kernels["correlation"].tolist()

    # A flow from the launching call to every launched kernel, graph kernels included.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) == int((t.kernels["launch_tid"] >= 0).sum())
    assert all(e["cat"] == "ac2g" for e in [*starts.values(), *ends.values()])
    launches = {(_ns(e["ts"]), e["tid"]) for e in starts.values()}
    assert launches == set(zip(t.kernels["launch_start"].tolist(), t.kernels["launch_tid"].tolist()))

    names = {(e["name"], e["args"]["name"]) for e in events if e["ph"] == "M"}
    assert ("process_name", "GPU 0") in names and ("thread_name", "stream 7") in names
    assert {e["pid"] for e in kernels} == {0}  # Kineto's: the device index (no process has pid 0)


def test_gz_output_is_the_same_json_gzipped(tmp_path):
    t = wb.open_trace(TRACES / SMALL)
    plain = wb.export_chrome(t, tmp_path / "t.json")
    packed = wb.export_chrome(t, tmp_path / "t.json.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.json.gz"]  # no temporary left
    _same_trace(t, wb.import_file(packed))


def test_a_capture_of_several_processes_keeps_each_kernel_on_its_own_launch(external, tmp_path):
    """Correlation ids repeat across the two processes of this nsys capture, and Kineto's
    reader matches by id alone: the export gives each process ids of its own."""
    t = wb.import_file(external("nsys-ai-mfu-2gpu-before.sqlite.gz"))
    u = wb.import_file(wb.export_chrome(t, tmp_path / "two.json"))
    for col in ("launch_tid", "launch_start", "launch_api", "range_id", "graph", "start", "end", "device"):
        assert (u.kernels[col].astype(str).to_numpy() == t.kernels[col].astype(str).to_numpy()).all(), col
    pd.testing.assert_frame_equal(_per_range(u), _per_range(t))
    gpus = {e["args"]["name"] for e in _events(tmp_path / "two.json") if e["name"] == "process_name"}
    assert {"GPU 0", "GPU 1"} <= gpus


def test_a_cpu_only_trace_exports_its_work_units_as_cpu_ops(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(2):
            with record_function(f"step_{i}"):
                with record_function("mm"):
                    y = x @ x
                with record_function("act"):
                    torch.relu(y)
    prof.export_chrome_trace(str(tmp_path / "cpu.json"))
    t = wb.import_file(tmp_path / "cpu.json")
    assert set(t.kernels["kind"]) == {"cpu_op"}
    out = wb.export_chrome(t, tmp_path / "again.json")
    assert {e["cat"] for e in _events(out) if e["ph"] == "X"} == {"cpu_op", "user_annotation"}
    u = wb.import_file(out)
    assert u.meta["source"]["work_units"] == "cpu_op"
    _same_trace(t, u)


def test_cli_export(cli, tmp_path):
    out = tmp_path / "t.json.gz"
    r = cli("--root", TRACES, "export", SMALL, "--chrome", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"wrote {out} ({len(_events(out))} events)\n"
    _same_trace(wb.open_trace(TRACES / SMALL), wb.import_file(out))


@pytest.mark.parametrize("case", ["missing trace", "missing file", "no such directory", "output is a directory"])
def test_cli_export_refuses_in_one_line(cli, tmp_path, case):
    trace, out = SMALL, tmp_path / "t.json"
    if case == "missing trace":
        trace = "no-such-trace"
    elif case == "missing file":
        trace = str(tmp_path / "nowhere" / "capture.json")
    elif case == "no such directory":
        out = tmp_path / "nowhere" / "t.json"
    else:
        out = tmp_path / "out"
        out.mkdir()
    r = cli("--root", TRACES, "export", trace, "--chrome", out)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("workbench: "), r.stderr
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if case == "output is a directory" else [])


def _raw_entry(trace_dir: Path) -> dict:
    meta = json.loads((trace_dir / "manifest.json").read_text())
    [entry] = meta["raw"]
    stored = trace_dir / entry["file"]
    assert entry["bytes"] == stored.stat().st_size
    assert entry["sha256"] == hashlib.sha256(stored.read_bytes()).hexdigest()
    return entry


def test_import_keep_raw_stores_the_capture_gzipped(cli, tmp_path):
    """A plain capture (a Kineto JSON) is kept gzipped under raw/; the trace is the same as one
    imported without it: same tables, same content hash."""
    src = wb.export_chrome(wb.open_trace(TRACES / SMALL), tmp_path / "capture.json")
    root = tmp_path / "store"
    for name, extra in (("kept", ["--keep-raw"]), ("plain", [])):
        r = cli("--root", root, "import", src, "--name", name, *extra)
        assert r.returncode == 0, r.stderr
    entry = _raw_entry(root / "kept")
    assert entry["file"] == "raw/capture.json.gz" and entry["source_name"] == "capture.json"
    assert gzip.decompress((root / "kept" / entry["file"]).read_bytes()) == src.read_bytes()
    assert not (root / "plain" / "raw").exists()

    assert wb.list_traces(root) == ["kept", "plain"]
    kept, plain = wb.open_trace("kept", root), wb.open_trace("plain", root)
    assert kept.meta["content_sha256"] == plain.meta["content_sha256"] == content_hash(root / "kept")
    pd.testing.assert_frame_equal(_per_range(kept), _per_range(plain))


def test_save_keeps_a_gzipped_capture_as_it_is(reference, tmp_path):
    src = reference("nsys-kvwrite-fused.sqlite.gz")
    t = wb.import_file(src)
    path = wb.save(t, "ref", tmp_path, raw=[src])
    entry = _raw_entry(path)
    assert entry == {**entry, "file": "raw/nsys-kvwrite-fused.sqlite.gz", "source_name": src.name}
    assert (path / entry["file"]).read_bytes() == src.read_bytes()
    assert t.meta["raw"] == [entry]
    assert wb.open_trace(path).rows("kernels") == t.rows("kernels")


def test_a_save_whose_raw_capture_is_missing_leaves_nothing(tmp_path):
    t = wb.open_trace(TRACES / SMALL)
    root = tmp_path / "store"
    missing = tmp_path / "gone.nsys-rep"
    with pytest.raises(wb.WorkbenchError) as e:
        wb.save(t, "x", root, raw=[missing])
    assert e.value.where == str(missing) and "\n" not in str(e.value)
    assert not root.exists() or not list(root.iterdir())


@pytest.mark.skipif(not Path("/proc/self/mem").is_file(), reason="needs Linux's /proc/self/mem")
def test_a_raw_capture_that_fails_to_read_mid_save_leaves_nothing(tmp_path):
    """/proc/self/mem is a file whose first bytes cannot be read (EIO): the save fails after
    its hidden directory and tables are written, and removes them."""
    t = wb.open_trace(TRACES / SMALL)
    with pytest.raises(wb.WorkbenchError) as e:
        wb.save(t, "x", tmp_path, raw=["/proc/self/mem"])
    assert "cannot read the raw capture" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_saving_a_loaded_trace_again_does_not_list_raw_files_it_lacks(tmp_path):
    src = wb.export_chrome(wb.open_trace(TRACES / SMALL), tmp_path / "capture.json")
    first = wb.save(wb.import_file(src), "first", tmp_path / "store", raw=[src])
    again = wb.save(wb.open_trace(first), "again", tmp_path / "store")
    assert "raw" not in json.loads((again / "manifest.json").read_text())
    assert not (again / "raw").exists()
