"""TensorRT engines from trtexec's artifacts: the import, the engine diff, the CLI and bad input.

The engines are real: ResNet-18 (batch 32) built and profiled by trtexec on an A100 in fp32 and
fp16 (``tests/data/tensorrt/README.md``; copies of ``../shared/external-traces/tensorrt``).
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from pathlib import Path

import pytest

from helpers import DATA as TESTDATA
import workbench as wb
from workbench.cli import main
from workbench.trace.words import trace_words
from workbench.trace.readers import sniff
from workbench.trace.schema import Trace

DATA = TESTDATA / "tensorrt"
FP32, FP16 = DATA / "resnet18-a100-fp32", DATA / "resnet18-a100-fp16"
NS_PER_MS = 1_000_000


def profile(folder: Path) -> tuple[int, list[dict]]:
    doc = json.loads((folder / "engine.profile.json").read_text())
    return doc[0]["count"], doc[1:]


@pytest.fixture(scope="module")
def engines() -> tuple[Trace, Trace]:
    a, b = wb.import_file(FP32), wb.import_file(FP16)
    a.name, b.name = "fp32", "fp16"
    return a, b


def test_fixtures_are_the_shared_artifacts(external):
    for folder in (FP32, FP16):
        shared = external(f"tensorrt/{folder.name}")
        for f in sorted(shared.iterdir()):
            assert (folder / f.name).read_bytes() == f.read_bytes(), f.name


def test_sniff():
    assert sniff(FP16) == "trtexec"
    assert sniff(FP16 / "engine.graph.json") == "trtexec"


def test_sniff_by_content(tmp_path):
    other = tmp_path / "layers.json"  # not TREx's name: known by its "Layers" key
    shutil.copy(FP16 / "engine.graph.json", other)
    assert sniff(other) == "trtexec"


@pytest.mark.parametrize("folder, layers", [(FP32, 32), (FP16, 36)])
def test_one_range_and_work_unit_per_profiled_layer(folder, layers):
    t = wb.import_file(folder)
    count, records = profile(folder)
    assert len(records) == layers and len(t.ranges) == layers and len(t.kernels) == layers
    assert t.ranges.sort_values("start")["name"].astype(str).tolist() == [r["name"] for r in records]
    assert set(t.ranges["domain"].astype(str)) == {"TensorRT"}
    assert set(t.kernels["kind"].astype(str)) == {"trt_layer"}
    # Each layer's work unit under its own range, and the per-layer times sum to the profile's.
    assert (t.ranges["kernels"] == 1).all() and t.meta["attribution"]["range"]["kernels"] == layers
    total_ns = sum(r["averageMs"] for r in records) * NS_PER_MS
    assert int((t.kernels["end"] - t.kernels["start"]).sum()) == pytest.approx(total_ns, abs=layers)
    assert int(t.ranges["gpu_time_ns"].sum()) == pytest.approx(total_ns, abs=layers)
    assert t.meta["tensorrt"]["total_ms"] == pytest.approx(sum(r["averageMs"] for r in records))
    assert t.meta["tensorrt"]["count"] == count == 1
    assert t.meta["tensorrt"]["unprofiled_layers"] == 0
    assert t.meta["source"]["work_units"] == "trt_layer" and t.meta["source"]["format"] == "trtexec"
    assert trace_words(t.meta).units == "layers" and not trace_words(t.meta).device


def test_graph_file_and_folder_give_the_same_trace():
    a, b = wb.import_file(FP16), wb.import_file(FP16 / "engine.graph.json")
    for table in ("kernels", "ranges"):
        assert a.tables[table].equals(b.tables[table])


def test_a_layer_the_profile_does_not_time(tmp_path):
    folder = tmp_path / "engine"
    shutil.copytree(FP16, folder)
    doc = json.loads((folder / "engine.profile.json").read_text())
    dropped = doc.pop(5)["name"]  # a no-op reformat after Conv_3 + Relu_4
    (folder / "engine.profile.json").write_text(json.dumps(doc))
    t = wb.import_file(folder)
    assert (len(t.ranges), len(t.kernels)) == (36, 35)
    assert t.meta["tensorrt"]["unprofiled_layers"] == 1
    order = t.ranges.sort_values("start")["name"].astype(str).tolist()
    assert order[order.index(dropped) - 1] == "Conv_3 + Relu_4"
    assert int(t.ranges.loc[t.ranges["name"] == dropped, "kernels"].iloc[0]) == 0
    assert [layer["profiled"] for layer in t.meta["tensorrt"]["layers"]].count(False) == 1


def test_layer_attributes_kept(engines):
    _, fp16 = engines
    layers = {layer["name"]: layer for layer in fp16.meta["tensorrt"]["layers"]}
    conv = layers["Conv_0 + Relu_1"]
    assert conv["type"] == "CaskConvolution" and conv["precision"] == "FP16"
    assert conv["tactic"] == "0xe2222883a6602489"
    assert conv["outputs"][0]["shape"] == [32, 64, 112, 112]
    assert conv["outputs"][0]["format"] == "Channel major FP16 format where channel % 8 == 0"
    assert conv["average_ms"] == 0.111616 and conv["median_ms"] == 0.111616 and conv["percentage"] == 10.9768
    first = fp16.meta["tensorrt"]["layers"][0]
    assert first["type"] == "Reformat" and first["origin"] == "REFORMAT"
    assert first["inputs"][0]["format"] == "Row major linear FP32" and first["precision"] == "FP16"
    assert fp16.meta["env"]["gpu"] == "NVIDIA A100 80GB PCIe"
    assert fp16.meta["tensorrt"]["build_options"]["Precision"] == "FP32+FP16"
    assert fp16.meta["tensorrt"]["inference_options"]["Input inference shape"] == "input.1=32x3x224x224"


@pytest.mark.parametrize("folder, n", [(FP32, 1600), (FP16, 3698)])
def test_timing_samples(folder, n):
    t = wb.import_file(folder)
    with gzip.open(folder / "engine.timing.json.gz") as fh:
        latencies = [r["latencyMs"] for r in json.load(fh)]
    call = t.meta["timing"]["call_ms"]
    assert t.meta["timing"]["timer"] == "trtexec"
    assert call["n"] == n == len(latencies) and call["samples"] == latencies


def test_engine_diff_fp32_vs_fp16(engines):
    e = wb.engine_diff(*engines)
    rows = e.layers
    t = e.totals
    assert (t["layers_a"], t["layers_b"]) == (32, 36)
    assert t["precisions_a"] == {"FP32": 32} and t["precisions_b"] == {"FP16": 35, "FP32": 1}
    # Every convolution keeps its name and goes FP32 -> FP16, all but the smallest faster.
    convs = rows[rows["type_a"] == "CaskConvolution"]
    assert len(convs) == 21 and (convs["match"] == "name").all()
    assert ((convs["precision_a"] == "FP32") & (convs["precision_b"] == "FP16")).all()
    conv0 = rows[rows["name_a"] == "Conv_0 + Relu_1"].iloc[0]
    assert (conv0["avg_ms_a"], conv0["avg_ms_b"]) == (0.52224, 0.111616)
    assert conv0["change"] == "precision,time"
    assert e.changed().iloc[0]["name_a"] == "Conv_0 + Relu_1"  # the largest time change
    # Pooling runs another implementation in fp16.
    pool = rows[rows["name_a"] == "MaxPool_2"].iloc[0]
    assert (pool["type_a"], pool["type_b"], pool["change"]) == ("TiledPooling", "CudaPooling", "type,precision,time")
    # Reformats: fp16 converts the FP32 input to FP16 before the first convolution, and its
    # output back to FP32; fp32 reformats MaxPool_2's output.
    only_b = e.only("b")
    assert sorted(only_b.loc[only_b["type_b"] == "Reformat", "name_b"]) == [
        "Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1",
        "Reformatting CopyNode for Output Tensor 0 to reshape_after_Gemm_48"]
    assert only_b.iloc[-1]["precision_b"] == "FP32"
    only_a = e.only("a")
    assert only_a.loc[only_a["type_a"] == "Reformat", "name_a"].tolist() == [
        "Reformatting CopyNode for Output Tensor 0 to MaxPool_2"]
    assert (len(only_a), len(only_b)) == (6, 10)
    assert (t["matched_by_name"], t["matched_by_position"]) == (26, 0)
    assert (t["reformat_layers_a"], t["reformat_layers_b"], t["noop_layers_a"], t["noop_layers_b"]) == (1, 2, 8, 11)
    assert rows["delta_ms"].sum() == pytest.approx(t["total_ms_b"] - t["total_ms_a"])
    # Every layer of each engine appears once, in its order.
    for side, n in (("a", 32), ("b", 36)):
        names = [x for x in rows[f"name_{side}"] if x]
        assert names == wb.engine_layers(engines[side == "b"])["name"].tolist() and len(names) == n


def _renamed(trace: Trace, names: dict[str, str], name: str) -> Trace:
    meta = copy.deepcopy(trace.meta)
    for layer in meta["tensorrt"]["layers"]:
        layer["name"] = names.get(layer["name"], layer["name"])
    return Trace(trace.tables, meta, name=name)


def test_engine_diff_matches_a_layer_fused_differently_by_place_and_type(engines):
    fp32, fp16 = engines
    other = _renamed(fp16, {"Conv_5 + Add_6 + Relu_7": "Conv_5 + Add_6"}, "renamed")
    rows = wb.engine_diff(fp32, other).layers
    row = rows[rows["name_a"] == "Conv_5 + Add_6 + Relu_7"].iloc[0]
    assert row["name_b"] == "Conv_5 + Add_6" and row["match"] == "position"
    assert row["change"].split(",")[0] == "fused"
    # A reformat is never matched by place: it copies another tensor.
    assert not ((rows["match"] == "position") & (rows["type_a"].isin(["Reformat", "NoOp"]))).any()


def test_engine_diff_matches_names_out_of_order(engines):
    fp16 = engines[1]
    swapped = _renamed(fp16, {"Conv_13 + Relu_14": "Conv_15", "Conv_15": "Conv_13 + Relu_14"}, "swapped")
    rows = wb.engine_diff(fp16, swapped).layers
    assert (rows["match"] == "name").all() and len(rows) == 36
    assert sorted(rows["name_a"]) == sorted(rows["name_b"]) and (rows["name_a"] == rows["name_b"]).all()


def test_engine_diff_of_one_engine_with_itself(engines):
    e = wb.engine_diff(engines[1], engines[1])
    assert (e.layers["change"] == "").all() and e.totals["matched_by_name"] == 36


def test_engine_diff_needs_engine_traces(engines, tmp_path):
    other = Trace(engines[0].tables, {"source": {"format": "nsys-sqlite"}}, name="plain")
    with pytest.raises(wb.WorkbenchError, match="not a TensorRT engine trace"):
        wb.engine_diff(engines[0], other)


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_import_summary_sql_diff_report(store, tmp_path, capsys):
    assert run_cli(capsys, "import", FP32, "--name", "fp32")[0] == 0
    assert run_cli(capsys, "import", FP16 / "engine.graph.json", "--name", "fp16")[0] == 0
    code, out, _ = run_cli(capsys, "summary", "fp16")
    assert code == 0 and "Conv_0 + Relu_1" in out
    for by in ("layer", "path"):
        code, out, _ = run_cli(capsys, "summary", "fp16", "--by", by, "--json")
        rows = json.loads(out)
        assert code == 0 and len(rows) == 36 and sum(r["gpu_time_ns"] for r in rows) == 1016832
    # "Conv_0 + Relu_1" holds no transformer layer index: every layer range is outside one.
    assert {r["layer"] for r in json.loads(run_cli(capsys, "summary", "fp16", "--by", "layer", "--json")[1])} == {-1}
    code, out, err = run_cli(capsys, "summary", "fp16", "--by", "kernel")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "has no kernels" in err and "--by range" in err
    code, out, _ = run_cli(capsys, "sql", "fp16", "select count(*) as n, sum(duration) as ns from projected", "--json")
    assert code == 0 and json.loads(out) == [{"n": 36, "ns": 1016832}]
    code, out, _ = run_cli(capsys, "diff", "fp32", "fp16")
    assert code == 0
    assert "26 matched by name" in out and "6 only in A, 10 only in B" in out
    assert "Conv_0 + Relu_1 [CaskConvolution, FP32 -> FP16]: 0.5222 ms -> 0.1116 ms (precision,time)" in out
    assert "call: 1.991 ms -> 0.8622 ms" in out and "faster" in out
    code, out, _ = run_cli(capsys, "diff", "fp32", "fp16", "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["layers"]) == 42 and doc["totals"]["only_b"] == 10
    assert doc["timing"][0]["metric"] == "call_ms" and doc["timing"][0]["verdict"] == "faster"
    code, _, _ = run_cli(capsys, "diff", "fp32", "fp16", "--fail-if", "call>5%")
    assert code == 0  # fp16 is faster: the gate holds
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    code, _, err = run_cli(capsys, "report", "fp32", "fp16", "-o", html, "--md", md)
    assert code == 0, err
    text = md.read_text()
    assert "Conv\\_0 + Relu\\_1" in text and "522.2 → 111.6" in text
    assert "kernel" not in text.split("## Hardware")[0].lower()  # its work units are layers
    assert html.stat().st_size > 10_000 and "Conv_0 + Relu_1" in html.read_text()


def test_widget_on_the_pair(engines, store):
    pytest.importorskip("ipywidgets")
    from workbench.viz import TraceDiffWidget

    w = TraceDiffWidget(*engines, root=store)
    scopes = [str(v) for _, v in w.scope.options]
    assert any("Conv_0 + Relu_1" in s for s in scopes)


# Malformed artifacts, each made from the real ones: one line naming the file, exit 2, nothing stored.
def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "engine"
    shutil.copytree(FP16, folder)
    return folder


def _no_count(f: Path):
    doc = json.loads((f / "engine.profile.json").read_text())
    (f / "engine.profile.json").write_text(json.dumps(doc[1:]))
    return "engine.profile.json", 'no {"count": N} record'


def _no_layers(f: Path):
    doc = json.loads((f / "engine.graph.json").read_text())
    (f / "engine.graph.json").write_text(json.dumps({"Bindings": doc["Bindings"]}))
    return "engine.graph.json", 'no "Layers" list'


def _unknown_layer(f: Path):
    doc = json.loads((f / "engine.profile.json").read_text())
    doc[2]["name"] = "Conv_99 + Relu_100"
    (f / "engine.profile.json").write_text(json.dumps(doc))
    return "engine.profile.json", "1 profiled layer(s) not in engine.graph.json: 'Conv_99 + Relu_100'"


def _truncated_graph(f: Path):
    text = (f / "engine.graph.json").read_bytes()
    (f / "engine.graph.json").write_bytes(text[: len(text) // 2])
    return "engine.graph.json", "truncated or invalid JSON"


def _truncated_profile(f: Path):
    text = (f / "engine.profile.json").read_bytes()
    (f / "engine.profile.json").write_bytes(text[:-40])
    return "engine.profile.json", "truncated or invalid JSON"


def _truncated_timing(f: Path):
    data = (f / "engine.timing.json.gz").read_bytes()
    (f / "engine.timing.json.gz").write_bytes(data[: len(data) // 2])
    return "engine.timing.json.gz", "truncated or corrupt gzip"


def _no_graph(f: Path):
    (f / "engine.graph.json").unlink()
    return "engine", "no *.graph.json"


def _no_profile(f: Path):
    (f / "engine.profile.json").unlink()
    return "engine.graph.json", "no engine.profile.json beside it"


def _two_engines(f: Path):
    shutil.copy(f / "engine.graph.json", f / "other.graph.json")
    return "engine", "holds 2 engines' *.graph.json"


@pytest.mark.parametrize("damage", [_no_count, _no_layers, _unknown_layer, _truncated_graph, _truncated_profile,
                                    _truncated_timing, _no_graph, _no_profile, _two_engines],
                         ids=lambda f: f.__name__.strip("_"))
def test_malformed_artifacts(damage, tmp_path, store, capsys):
    folder = _copy(tmp_path)
    where, problem = damage(folder)
    code, out, err = run_cli(capsys, "import", folder, "--name", "bad")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("workbench: ") and "Traceback" not in err
    assert where in err and problem in err, err
    assert list(store.iterdir()) == []
