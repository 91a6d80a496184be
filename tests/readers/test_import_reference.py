"""The foundation's acceptance on the real H200 reference captures."""

from __future__ import annotations

import json

import pytest

from workbench.analysis import launches_per_step, project, summary
from workbench.trace import import_file


def per_path(trace):
    s = summary(trace, by="path")
    return dict(zip(s["path"], s["kernels"]))


@pytest.mark.parametrize("variant,kv_per_layer", [("unfused", 15), ("fused", 1)])
def test_kv_write_kernels_per_layer_and_step(reference, variant, kv_per_layer):
    trace = import_file(reference(f"nsys-kvwrite-{variant}.sqlite.gz"))
    counts = per_path(trace)
    for step in range(3):
        for layer in range(8):
            assert counts[f"step_{step}/layer_{layer:02d}/kv_write"] == kv_per_layer
            assert counts[f"step_{step}/layer_{layer:02d}/qkv"] == 1
    p = project(trace)
    assert (p["status"] == "range").all()  # every kernel of this capture sits in a range
    steps = launches_per_step(trace)
    assert steps["kernels"].tolist() == ([160] * 3 if variant == "unfused" else [48] * 3)


@pytest.mark.parametrize("variant", ["unfused", "fused"])
def test_nsys_and_kineto_agree_per_range(reference, variant):
    nsys = import_file(reference(f"nsys-kvwrite-{variant}.sqlite.gz"))
    kineto = import_file(reference(f"kineto-kvwrite-{variant}-cache-full.json.gz"))
    assert per_path(nsys) == per_path(kineto)
    by_layer = summary(nsys, by="layer")
    assert by_layer.equals(summary(nsys, by="layer"))
    a = summary(nsys, by="layer")[["layer", "range", "kernels"]]
    b = summary(kineto, by="layer")[["layer", "range", "kernels"]]
    assert a.reset_index(drop=True).equals(b.reset_index(drop=True))


def test_driver_api_launches_are_joined(reference):
    trace = import_file(reference("nsys-kvwrite-fused.sqlite.gz"))
    kv = project(trace)
    kv = kv[kv["range"] == "kv_write"]
    # The fused KV write is a Triton kernel launched through the driver API.
    assert set(kv["launch_api"].astype(str)) == {"cuLaunchKernelEx"}
    assert set(trace.api.loc[trace.api["name"] == "cuLaunchKernelEx", "kind"].astype(str)) == {"driver"}


def test_registered_nvtx_strings_resolved(reference):
    trace = import_file(reference("nsys-kvwrite-unfused.sqlite.gz"))
    names = set(trace.ranges["name"].astype(str))
    assert {"step_0", "layer_00", "qkv", "kv_write", "attention"} <= names
    assert "" not in names


def test_meta_from_nsys(reference):
    trace = import_file(reference("nsys-kvwrite-unfused.sqlite.gz"))
    assert trace.meta["env"]["gpu"] == "NVIDIA H200"
    assert trace.meta["env"]["driver"] == "580.159.04"
    assert trace.meta["source"]["tool_version"].startswith("2025.3")


def test_kineto_microseconds_exact(reference):
    trace = import_file(reference("kineto-kvwrite-unfused-cache-full.json.gz"))
    k = trace.kernels
    assert (k["end"] >= k["start"]).all()
    # ts 5080807975578.874 us must become exactly ...578874 ns.
    assert 5080807975578874 in set(k["start"].tolist())


def test_cli_summary_json(reference, cli, store):
    r = cli("summary", reference("nsys-kvwrite-unfused.sqlite.gz"), "--by", "range", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["range"]: row for row in json.loads(r.stdout)}
    assert rows["kv_write"]["kernels"] == 360 and rows["qkv"]["kernels"] == 24
    assert rows["kv_write"]["gpu_time_ns"] > 0
    r = cli("summary", reference("kineto-kvwrite-fused-cache-full.json.gz"), "--by", "layer", "--json")
    rows = json.loads(r.stdout)
    assert {"layer", "range", "kernels", "gpu_time_ns"} <= set(rows[0])
    kv = [row for row in rows if row["range"] == "kv_write"]
    assert [row["layer"] for row in kv] == list(range(8)) and all(row["kernels"] == 3 for row in kv)


def test_cli_import_then_summary_and_sql(reference, cli, store):
    r = cli("import", reference("nsys-kvwrite-fused.sqlite.gz"), "--name", "fused")
    assert r.returncode == 0, r.stderr
    assert (store / "fused" / "manifest.json").is_file()
    manifest = json.loads((store / "fused" / "manifest.json").read_text())
    assert manifest["counts"]["kernels"] == 144 and len(manifest["content_sha256"]) == 64
    r = cli("summary", "fused", "--by", "kernel", "--json")
    assert r.returncode == 0, r.stderr
    assert sum(row["kernels"] for row in json.loads(r.stdout)) == 144
    r = cli("sql", "fused", "select count(*) as n from projected where range = 'kv_write'", "--json")
    assert json.loads(r.stdout) == [{"n": 24}]
    r = cli("import", reference("nsys-kvwrite-fused.sqlite.gz"), "--name", "fused")
    assert r.returncode == 2 and "exists" in r.stderr
    assert sorted(p.name for p in store.iterdir()) == ["fused"]


def test_stored_trace_roundtrip_identical(reference, store):
    from workbench.trace import load_dir, save

    trace = import_file(reference("kineto-kvwrite-unfused-cache-bucketed.json.gz"))
    path = save(trace, "rt", store)
    back = load_dir(path)
    assert per_path(back) == per_path(trace)
    assert summary(back, by="layer").equals(summary(trace, by="layer"))


def test_stored_nsys_tables_exact_with_integers_delta_encoded(reference, store):
    import pandas as pd
    import pyarrow.parquet as pq

    from workbench.trace import TABLES, load_dir, save

    trace = import_file(reference("nsys-kvwrite-unfused.sqlite.gz"))
    path = save(trace, "exact", store)
    back = load_dir(path)
    for t in TABLES:
        pd.testing.assert_frame_equal(back.tables[t], trace.tables[t], check_exact=True)
    meta = pq.ParquetFile(path / "kernels.parquet").metadata
    encodings = {meta.schema.column(i).name: meta.row_group(0).column(i).encodings for i in range(meta.num_columns)}
    assert all("DELTA_BINARY_PACKED" in encodings[c] for c in ("start", "end", "correlation", "range_id"))
    assert "RLE_DICTIONARY" in encodings["name"]


def test_layer_pattern_variants():
    from workbench.analysis.layers import layer_pattern

    rx = layer_pattern()
    for name, idx in [("layer_03", 3), ("layers.3", 3), ("model.layers.3.self_attn", 3),
                      ("decoder_layer_12", 12), ("Layer7", 7)]:
        assert int(rx.search(name).group(1)) == idx
    for name in ("player1", "qkv", "layernorm"):
        assert rx.search(name) is None
