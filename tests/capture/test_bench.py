"""``workbench bench``: interleaved A/B timing on the CPU, of two reference-decoder variants at
tiny sizes and of two ``--call`` captures made here; ``--store`` and the diff that then uses
the stored samples; the one-line refusals. No assertion is about how fast anything ran."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from helpers import TRACES
import workbench as wb
from workbench.capturing import capture
from workbench.capturing.bench_refs import parse_spec
from workbench.cli import main
from workbench.errors import WorkbenchError

SMALL = dict(layers=2, heads=2, head_dim=16, index_dim=16, mlp_dim=64, vocab=128, page_size=16, rows=256,
             bucket=64, ctx=16)
SPEC = "decoder:" + ",".join(f"{k}={v}" for k, v in {**SMALL, "cache_rows": "bucketed"}.items())
TARGET = '''
import torch

torch.manual_seed(0)
_w, _x = torch.randn(32, 32), torch.randn(4, 32)


def small():
    return torch.relu(_x @ _w)


def large():
    h = _x
    for _ in range(4):
        h = torch.relu(h @ _w)
    return h


def needs(x):
    return x
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    for rows in ("full", "bucketed"):
        capture("decoder", {**SMALL, "cache_rows": rows}, engine="eager", backend="torch", name=f"cpu-{rows}",
                steps=2, repeats=2, warmup=1, device="cpu", root=root, progress=False)
    return root


@pytest.fixture(scope="module")
def calls(store, tmp_path_factory):
    """Two --call captures of functions in a module of their own, importable while it lasts."""
    src = tmp_path_factory.mktemp("calls")
    (src / "bench_target.py").write_text(TARGET)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(src))
        for fn in ("small", "large"):
            wb.profile_call(f"bench_target:{fn}", name=f"call-{fn}", repeats=3, root=store, progress=False)
        yield store


def _cli(capsys, store, *argv) -> tuple[int, str, str]:
    code = main(["--root", str(store), *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_two_decoder_variants_interleaved(store):
    r = wb.bench("cpu-full", "cpu-bucketed", rounds=3, device="cpu", root=store, progress=False)
    assert r.labels == ["cpu-full", "cpu-bucketed"] and r.rounds == 3 and r.device == "cpu"
    for label in r.labels:
        s = r.samples[label]
        assert len(s["prefill_ms"]) == len(s["decode_step_ms_per_repeat"]) == 3  # one repetition per round
        assert len(s["decode_step_ms"]) == 3 * 2  # each trace's own decode steps
        assert r.timing[label]["timer"] == "host" and r.timing[label]["variants"] == r.labels
    assert [sorted(o) for o in r.orders] == [sorted(r.labels)] * 3
    (comparisons,) = r.comparisons.values()
    assert [c.metric for c in comparisons] == ["decode_step_ms", "prefill_ms"]
    # Three rounds are too few for an interval (analysis.stats.MIN_SAMPLES): the ratio, no verdict.
    assert all(c.n_a == c.n_b == 3 and not c.interval and c.verdict == "n = 3: no interval" for c in comparisons)
    # The order of each round is shuffled from a fixed seed: the same on every run.
    again = wb.bench("cpu-full", "cpu-bucketed", rounds=3, device="cpu", root=store, progress=False)
    assert again.orders == r.orders
    # Nothing was stored without store=True.
    assert "timing_bench" not in wb.open_trace(store / "cpu-full").meta


def test_a_workload_variant_given_directly(store):
    r = wb.bench(wb.open_trace(store / "cpu-full"), SPEC, "cpu-full", rounds=2, device="cpu", root=store,
                 progress=False)
    assert r.labels == ["cpu-full", SPEC, "cpu-full#2"]
    assert list(r.comparisons) == [SPEC, "cpu-full#2"]


def test_spec_syntax():
    assert parse_spec("decoder:") == ("decoder", {})
    assert parse_spec("decoder:kv_write=fused, engine=cudagraph") == ("decoder", {"kv_write": "fused",
                                                                                  "engine": "cudagraph"})
    assert parse_spec("pkg.mod:WORKLOAD:hidden=128") == ("pkg.mod:WORKLOAD", {"hidden": "128"})
    for bad in ("decoder:kv_write", ":kv_write=fused"):
        with pytest.raises(WorkbenchError):
            parse_spec(bad)


def test_store_then_diff_uses_the_bench_samples(store, capsys, tmp_path):
    import shutil

    for name in ("cpu-full", "cpu-bucketed"):  # copies: the other tests see the traces unbenched
        shutil.copytree(store / name, tmp_path / name)
    store = tmp_path
    before = {n: json.loads((store / n / "manifest.json").read_text()) for n in ("cpu-full", "cpu-bucketed")}
    code, out, err = _cli(capsys, store, "bench", "cpu-full", "cpu-bucketed", "--rounds", "3", "--store", "--quiet")
    assert code == 0, err
    assert "cpu-bucketed against cpu-full:" in out and "stored as timing_bench in" in out
    benched = [ln for ln in out.splitlines() if ln.startswith("  decode step:")]
    for name, old in before.items():
        meta = wb.open_trace(store / name).meta  # the stored trace still opens
        assert meta["timing_bench"]["rounds"] == 3 and meta["timing_bench"]["source"] == "workbench bench"
        assert meta["content_sha256"] == old["content_sha256"] and meta["timing"] == old["timing"]
    assert not [p for p in (store / "cpu-full").iterdir() if p.name.startswith(".")]  # no temporary left
    code, out, err = _cli(capsys, store, "diff", "cpu-full", "cpu-bucketed")
    assert code == 0, err
    assert "[interleaved bench samples]" in out
    assert [ln for ln in out.splitlines() if ln.startswith("  decode step:")] == benched  # what the bench compared
    code, out, _ = _cli(capsys, store, "diff", "cpu-full", "cpu-bucketed", "--json")
    assert {(t["samples_a"], t["samples_b"]) for t in json.loads(out)["timing"]} == {("timing_bench", "timing_bench")}


def test_calls_are_timed_from_their_reference(calls):
    with pytest.raises(WorkbenchError, match="--trust-code"):  # code a trace names runs only when asked
        wb.bench("call-small", "call-large", rounds=2, root=calls, progress=False)
    r = wb.bench("call-small", "call-large", rounds=3, root=calls, trust_code=True, progress=False)
    assert all(len(r.samples[label]["call_ms"]) == 3 for label in r.labels)
    (comparisons,) = r.comparisons.values()
    assert [c.metric for c in comparisons] == ["call_ms"]


def test_refusals_are_one_line_and_write_nothing(store, calls, capsys):
    manifests = {p: p.read_bytes() for p in store.glob("*/manifest.json")}
    committed = TRACES
    cases = [
        ((store, "bench", "cpu-full"), "at least two variants"),
        ((store, "bench", "cpu-full", "nope"), "no stored trace of that name"),
        ((store, "bench", "cpu-full", "decoder:kv_write"), "bad setting"),
        ((store, "bench", "cpu-full", "decoder:bogus=1"), "unknown variant key"),
        ((store, "bench", "cpu-full", "decoder:engine=warp"), "unknown engine"),
        ((store, "bench", "cpu-full", "call-small", "--trust-code"), "time different things"),
        ((store, "bench", "cpu-full", "cpu-bucketed", "--rounds", "1"), "--rounds 1: expected a whole number of at least 2"),
        ((store, "bench", "cpu-full", "cpu-full", "--store"), "given twice"),
        ((committed, "bench", "h200-user-mlp-nsys", "h200-user-mlp-torch"), "cannot be re-timed in this process"),
        ((committed, "bench", "ref-h200-kvwrite-unfused-nsys", "ref-h200-kvwrite-fused-nsys"),
         "no record of how it was captured"),
        ((committed, "bench", "h200-kvwrite-unfused-eager-nsys", "h200-kvwrite-fused-eager-nsys", "--device", "cpu",
          "--store"), "captured on cuda"),
    ]
    for (root, *argv), message in cases:
        code, out, err = _cli(capsys, root, *argv)
        assert code == 2 and message in err and err.count("\n") == 1 and err.startswith("workbench: "), (argv, err)
    assert {p: p.read_bytes() for p in store.glob("*/manifest.json")} == manifests
