"""Tensor-parallel decoder (issue 28, the part a CPU allows): ``--variant tp=2`` runs as two gloo
ranks whose logits equal tp=1's; its capture is one trace set, a member per rank with its own
timing; kv_write goes 15 -> 1 work units per layer on every rank; each all-reduce is attributed
to the layer that issued it; a bad tp or a failing rank is one line, exit 2, and no set."""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # the fused kv_write under Triton's interpreter

from helpers import assert_one_line, run_cli, store_entries  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import engines, workloads
from workbench.capturing import run  # noqa: E402
from workbench.capturing.session import decode_outputs  # noqa: E402
from workbench.cli import main  # noqa: E402

SMALL = dict(layers=2, heads=2, head_dim=16, index_dim=16, mlp_dim=64, vocab=128, page_size=16, rows=256,
             bucket=64, ctx=16)
STEPS = 2
IN_PROCESS = wb.Executor("local", workers=1)


def _variant(**more) -> list[str]:
    return [a for k, v in {**SMALL, **more}.items() for a in ("--variant", f"{k}={v}")]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("tp-traces")


@pytest.fixture(scope="module")
def sets(root):
    """tp=2 on the CPU: unfused (from the command line, as a user runs it), fused and bucketed
    (wb.capture), torch backend."""
    r = run_cli("--root", root, "capture", "decoder", *_variant(tp=2), "--name", "tp2-unfused", "--steps", STEPS,
                "--repeats", 2, "--warmup", 1, "--device", "cpu", "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trace set of 2 ranks" in r.stdout and "decode step median rank 0" in r.stdout, r.stdout
    out = {"unfused": wb.open_set("tp2-unfused", root=root, executor=IN_PROCESS)}
    for key, more in (("fused", {"kv_write": "fused"}), ("bucketed", {"cache_rows": "bucketed"})):
        ts = wb.capture("decoder", {**SMALL, "tp": 2, **more}, name=f"tp2-{key}", steps=STEPS, repeats=2, warmup=1,
                        device="cpu", root=root, progress=False)
        assert isinstance(ts, wb.TraceSet)
        ts.executor = IN_PROCESS
        out[key] = ts
    return out


def _tp1_outputs(**more):
    variant = workloads.resolve("decoder", {**SMALL, **more})
    engine = engines.build("decoder", variant, "eager", "cpu")
    return run.generate(engine, STEPS, keep=True)


@pytest.mark.parametrize("key, more", [("unfused", {}), ("fused", {"kv_write": "fused"}),
                                       ("bucketed", {"cache_rows": "bucketed"})])
def test_tp2_logits_equal_tp1(sets, key, more):
    logits, tokens = _tp1_outputs(**more)
    for rank in (0, 1):
        got_logits, got_tokens = decode_outputs(sets[key].trace(rank).meta["outputs"])
        same = run.compare(logits, tokens, got_logits, got_tokens, "float32")
        assert same["equal"], (key, rank, same)


def test_a_set_of_two_members_with_their_roles_and_timing(sets, root):
    ts = sets["unfused"]
    assert list(ts.members["member"]) == ["rank0", "rank1"]
    assert list(ts.members["rank"]) == [0, 1] and list(ts.members["local_rank"]) == [0, 1]
    assert ts.members["variant"].str.contains("tp=2").all() and ts.members["host"].str.len().min() > 0
    assert ts.meta["capture"]["ranks"] == 2 and ts.meta["capture"]["backend"] == "torch"
    assert set(ts.meta["timing"]["decode_step_ms_median"]) == {"rank0", "rank1"}
    pids = set()
    for rank in (0, 1):
        meta = ts.trace(rank).meta
        assert meta["distributed"]["rank"] == rank and meta["distributed"]["world_size"] == 2
        assert meta["distributed"]["backend"] == "gloo"
        assert meta["set"]["name"] == "tp2-unfused" and meta["set"]["rank"] == rank
        assert meta["capture"]["variant"]["tp"] == 2 and meta["capture"]["engine_info"]["rank"] == rank
        timing = meta["timing"]
        assert timing["decode_step_ms"]["n"] == 2 * STEPS and timing["timer"] == "host"
        pids.add(meta["distributed"]["pid"])
    assert len(pids) == 2  # one process per rank
    # The command line recorded is the one that ran.
    assert "tp=2" in ts.meta["capture"]["command_line"]
    assert not [n for n in store_entries(root) if n.startswith(".")]


def _kv_write(trace) -> set[int]:
    by_path = wb.summary(trace, by="path")
    rows = by_path[by_path["path"].astype(str).str.endswith("/kv_write")]
    assert len(rows) == SMALL["layers"] * STEPS  # every layer of every recorded step
    return set(rows["kernels"])


def test_kv_write_15_to_1_on_every_rank(sets):
    for rank in (0, 1):
        assert _kv_write(sets["unfused"].trace(rank)) == {15}
        assert _kv_write(sets["fused"].trace(rank)) == {1}
    # Rank against rank (TraceSet.diff): 14 fewer work units per layer and step on each rank.
    d = sets["unfused"].diff(sets["fused"])
    assert list(d["rank"]) == [0, 1] and set(d["status"]) == {"both"}
    assert list(d["kernels_per_step_a"] - d["kernels_per_step_b"]) == [14 * SMALL["layers"]] * 2
    for rank in (0, 1):
        # Of each rank's ranges, the kv_write of every layer is the one whose work changed.
        r = wb.diff(sets["unfused"].trace(rank), sets["fused"].trace(rank)).ranges
        kernels = r[r["changed"] == "kernels"]
        assert sorted(kernels["range"]) == [f"layer_{i:02d}/kv_write" for i in range(SMALL["layers"])]
        assert set(kernels["kernels_a"]) == {15} and set(kernels["kernels_b"]) == {1}


def test_all_reduce_attributed_to_the_layer_that_issues_it(sets):
    ts = sets["unfused"]
    for rank in (0, 1):
        by_path = wb.summary(ts.trace(rank), by="path")
        paths = by_path[by_path["path"].astype(str).str.contains("allreduce")]
        want = {f"step_{s}/layer_{i:02d}/{region}/allreduce" for s in range(STEPS) for i in range(SMALL["layers"])
                for region in ("attention", "mlp")}
        assert set(paths["path"].astype(str)) == want
        assert set(paths["kernels"]) == {1}  # the c10d op, one per all-reduce
    # gloo runs each on a thread of its own: analysis.ranks gives it the layer of the op.
    c = ts.collectives()
    decode = c[c["step"].astype(str).str.startswith("step_")]
    assert set(decode["layer"]) == set(range(SMALL["layers"]))
    assert set(decode["collectives"]) == {2}  # attention's and the MLP's, per layer and step
    assert len(decode) == 2 * SMALL["layers"] * STEPS
    steps = ts.steps()
    assert set(steps["collectives"]) == {2 * SMALL["layers"]}
    assert set(ts.stragglers()["straggler"]) <= {0, 1}


@pytest.mark.parametrize("more, match", [
    ({"tp": 0}, "variant tp: must be positive"),
    ({"tp": 3}, "3 ranks do not divide heads 2"),
    ({"tp": 2, "mlp_dim": 63}, "2 ranks do not divide mlp_dim 63"),
    ({"tp": 32, "heads": 32}, "at most 16 gloo ranks"),
    ({"tp": "two"}, "expected int"),
])
def test_bad_tp_is_one_line(tmp_path, capsys, more, match):
    store = tmp_path / "store"
    assert main(["--root", str(store), "capture", "decoder", *_variant(**more), "--device", "cpu", "--quiet"]) == 2
    assert_one_line(capsys.readouterr().err, match)
    assert store_entries(store) == []


FAILING = '''
import torch.distributed as dist
from workbench.workloads.decoder import DECODER


class Failing:
    options = DECODER.options

    def create(self, variant, device):
        if dist.get_rank() == 1:
            raise RuntimeError("rank 1 lost its device")
        return DECODER.create(variant, device)


WORKLOAD = Failing()
'''


def test_a_failing_rank_is_one_line_and_no_set(tmp_path):
    (tmp_path / "tp_failing.py").write_text(FAILING)
    store = tmp_path / "store"
    r = run_cli("--root", store, "capture", "tp_failing:WORKLOAD", *_variant(tp=2), "--name", "broken",
                "--repeats", 1, "--warmup", 1, "--steps", 1, "--device", "cpu", "--quiet",
                env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr[-2000:])
    assert_one_line(r.stderr, "rank 1: workload tp_failing:WORKLOAD: create failed: RuntimeError: rank 1 lost its device")
    assert store_entries(store) == []  # no set, no hidden directory


def test_tp_needs_its_processes():
    variant = workloads.resolve("decoder", {**SMALL, "tp": 2})
    with pytest.raises(wb.WorkbenchError, match="runs as 2 processes"):
        workloads.get("decoder").create(variant, "cpu")


def test_set_manifest_is_json_of_the_job(sets):
    meta = json.loads((sets["fused"].path / "set.json").read_text())
    assert meta["kind"] == "trace_set" and meta["split"] == "none"
    assert meta["capture"]["variant"]["kv_write"] == "fused"
    assert [m["member"] for m in meta["members"]] == ["rank0", "rank1"]


HF_TINY = dict(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=256, ctx=8, max_len=32)


def test_hf_tp2_through_the_models_own_tp_plan(root):
    """The hf workload split by its transformers tp plan: logits equal tp=1's, and each layer's
    two all-reduces (o_proj's and down_proj's) are c10d ops inside that layer's module ranges."""
    pytest.importorskip("transformers")
    from workbench.analysis.projection import project

    ts = wb.capture("hf", {**HF_TINY, "tp": 2}, name="hf-tp2", steps=STEPS, repeats=1, warmup=1, device="cpu",
                    root=root, progress=False)
    ts.executor = IN_PROCESS
    assert list(ts.members["rank"]) == [0, 1]
    built = engines.build("hf", workloads.resolve("hf", HF_TINY), "eager", "cpu")
    logits, tokens = run.generate(built, STEPS, keep=True)
    for rank in (0, 1):
        trace = ts.trace(rank)
        got = decode_outputs(trace.meta["outputs"])
        assert run.compare(logits, tokens, *got, "float32")["equal"]
        p = project(trace)
        ops = p[(p["name"].astype(str) == "c10d::allreduce_") & (p["phase"].astype(str) == "decode")]
        per_layer = ops.groupby(["step", "layer"], observed=True).size()
        assert set(per_layer.index.get_level_values("layer")) >= {0, 1}
        assert all(per_layer[(s, i)] == 2 for s in (f"step_{k}" for k in range(STEPS)) for i in (0, 1))
        ranges = set(ops[ops["layer"] >= 0]["range"].astype(str))
        assert ranges <= {"self_attn", "mlp"}, ranges


def test_hf_bad_tp_is_one_line(tmp_path, capsys):
    pytest.importorskip("transformers")
    args = [a for k, v in {**HF_TINY, "tp": 3}.items() for a in ("--variant", f"{k}={v}")]
    assert main(["--root", str(tmp_path / "store"), "capture", "hf", *args, "--device", "cpu", "--quiet"]) == 2
    assert_one_line(capsys.readouterr().err, "3 ranks do not divide heads 4")


def test_an_nsys_export_of_the_ranks_is_split_to_the_ranks_by_pid(external):
    """The nsys half of a job's capture, on a real 2-GPU export (nsys-ai's): one trace per
    process, given to the rank that reported its pid; pids that match none (another pid
    namespace) fall back to (GPU, pid) order; a process count that is not the job's is one line."""
    from pathlib import Path

    from workbench.capturing.multirank import _split

    src = Path(external("nsys-ai-mfu-2gpu-before.sqlite.gz"))
    by_order = _split(src, [{"pid": -1}, {"pid": -2}])
    parts = [t.meta["source"]["part"] for t in by_order]
    assert [p["device"] for p in parts] == [0, 1]
    # Rank 0 reported the pid of the process on GPU 1: it gets that process.
    swapped = _split(src, [{"pid": parts[1]["pid"]}, {"pid": parts[0]["pid"]}])
    assert [t.meta["source"]["part"]["device"] for t in swapped] == [1, 0]
    assert set(swapped[0].kernels["device"]) == {1} and set(swapped[1].kernels["device"]) == {0}
    with pytest.raises(wb.WorkbenchError, match="2 processes ran kernels in the capture, expected 4 ranks"):
        _split(src, [{"pid": i} for i in range(4)])
