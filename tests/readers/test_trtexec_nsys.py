"""An Nsight Systems capture of a TensorRT engine running: kernels per engine layer.

TensorRT pushes an NVTX range per layer, named after the layer, in the domain "TensorRT" (with
``--profilingVerbosity=detailed``); the nsys importer puts each kernel under the range around its
launch. No real capture of trtexec exists here, so this export is CONSTRUCTED by hand to the
schema of a real one (the tables and columns the importer reads, with the names and types of
``../shared/reference-captures/h200/nsys-kvwrite-fused.sqlite.gz``), its ranges named after the
real ResNet-18 fp16 engine's layers (``tests/data/tensorrt``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers import DATA
import workbench as wb

ENGINE = DATA / "tensorrt" / "resnet18-a100-fp16"

# The real export's column names and types, for the columns the importer reads and those a
# real export declares NOT NULL.
SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
    gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
    graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
    correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,
    color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
"""

PID, TID = 4242, 4250
GLOBAL_PID = (1 << 48) | (PID << 24)  # nsys's serialized global ids: pid in bits 24-47
GLOBAL_TID = GLOBAL_PID | TID
PUSH_POP, DOMAIN_CREATE = 59, 75
DOMAIN_ID = 1
# The engine's first layers as they run, each with the kernels its tactic launches.
LAYERS = [
    ("Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1", ["copyPackedKernel"]),
    ("Conv_0 + Relu_1", ["trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc_nhwc_k64r7s7c4_stride2x2",
                         "cask_cudnn_splitK_reduce"]),
    ("MaxPool_2", ["poolingFwdNHWC"]),
    ("Conv_3 + Relu_4", ["sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc", "splitKreduce_kernel",
                         "cask_cudnn_bias_act"]),
]
ITERATIONS = 2


def write_export(path: Path) -> dict[str, int]:
    """The export of ``ITERATIONS`` inferences of the layers above; kernels per layer name."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings) + 1
            con.execute("insert into StringIds values (?, ?)", (strings[s], s))
        return strings[s]

    con.execute("insert into NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) values (?, NULL, ?, ?, ?, ?)",
                (1_000, DOMAIN_CREATE, "TensorRT", GLOBAL_TID, DOMAIN_ID))
    launch = sid("cudaLaunchKernel_v7000")
    t, corr, expected = 10_000, 0, {}
    for it in range(ITERATIONS):
        # A range in the default domain around each inference: not a layer.
        con.execute("insert into NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) values (?, ?, ?, ?, ?, 0)",
                    (t, t + 90_000, PUSH_POP, f"inference {it}", GLOBAL_TID))
        for n, (layer, kernels) in enumerate(LAYERS):
            t0 = t + 1_000
            for k, kernel in enumerate(kernels):
                corr += 1
                start = t0 + 500 + 3_000 * k
                con.execute("insert into CUPTI_ACTIVITY_KIND_RUNTIME values (?, ?, 0, ?, ?, ?, 0, NULL)",
                            (start, start + 2_000, GLOBAL_TID, corr, launch))
                con.execute("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, 0, 1, 7, ?, ?, ?, ?, 32, 64, 1, 1, "
                            "128, 1, 1, 0, 0, 0, 0, ?, NULL)",
                            (start + 40_000, start + 41_000 + 500 * k, corr, GLOBAL_PID, sid(kernel), sid(kernel), corr))
            end = t0 + 3_000 * len(kernels) + 1_000
            # Layer names both inline and registered (textId), as nsys writes either.
            text, text_id = (layer, None) if n % 2 else (None, sid(layer))
            con.execute("insert into NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
                        "values (?, ?, ?, ?, ?, ?, ?)", (t0, end, PUSH_POP, text, GLOBAL_TID, text_id, DOMAIN_ID))
            expected[layer] = expected.get(layer, 0) + len(kernels)
            t = end
        t += 100_000
    con.commit()
    con.close()
    return expected


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("nsys") / "trtexec-resnet18.sqlite"
    expected = write_export(path)
    return wb.import_file(path), expected


def test_kernels_under_their_layer_ranges(capture):
    trace, expected = capture
    assert len(trace.kernels) == sum(expected.values()) and trace.meta["attribution"]["no_range"]["kernels"] == 0
    r = trace.ranges
    layers = r[r["domain"].astype(str) == "TensorRT"]
    assert sorted(set(layers["name"].astype(str))) == sorted(expected)
    counts = layers.groupby(layers["name"].astype(str))["kernels"].sum().to_dict()
    assert counts == expected
    # The inference ranges (default domain) hold the layer ranges, and no kernel of their own.
    outer = r[r["domain"].astype(str) == "default"]
    assert len(outer) == ITERATIONS and (outer["kernels"] == 0).all()


def test_layer_kernels_joined_to_the_engine_graph(capture):
    trace, expected = capture
    per_layer = wb.layer_kernels(trace, ENGINE)
    ran = per_layer[per_layer["instances"] > 0]
    assert ran["name"].tolist() == [name for name, _ in LAYERS]  # in the engine's order
    assert dict(zip(ran["name"], ran["kernels"])) == expected
    assert (ran["instances"] == ITERATIONS).all()
    assert ran["kernels_per_instance"].tolist() == [len(k) for _, k in LAYERS]
    assert ran["type"].tolist() == ["Reformat", "CaskConvolution", "CudaPooling", "CaskConvolution"]
    assert set(ran["precision"]) == {"FP16"}
    # The engine's other layers did not run in this capture: listed, with none.
    assert len(per_layer) == 36 and (per_layer.loc[per_layer["instances"] == 0, "kernels"] == 0).all()
    # Without the graph: the layer ranges alone, in the order they first ran.
    assert wb.layer_kernels(trace)["name"].tolist() == [name for name, _ in LAYERS]


def test_layer_kernels_needs_tensorrt_ranges(tmp_path):
    path = tmp_path / "plain.sqlite"
    write_export(path)
    con = sqlite3.connect(path)
    con.execute("delete from NVTX_EVENTS where eventType = ?", (DOMAIN_CREATE,))
    con.execute("update NVTX_EVENTS set domainId = 0")
    con.commit()
    con.close()
    with pytest.raises(wb.WorkbenchError, match='no ranges in the NVTX domain "TensorRT"'):
        wb.layer_kernels(wb.import_file(path))
