import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    # The fused kv_write kernel runs under Triton's interpreter on CPU; on a GPU it must not.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib

ann = importlib.import_module("workbench.annotate")
from workbench.annotate import annotate


def _user_ranges(prof):
    return [e.name for e in prof.events() if e.name.startswith("r_")]


def test_ranges_reach_torch_profiler_nested_and_as_decorator():
    @annotate("r_decorated")
    def work(x):
        return x + 1

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with annotate("r_outer"):
            with annotate("r_inner", domain="other"):
                work(torch.ones(4))
    names = _user_ranges(prof)
    assert names.count("r_outer") == 1 and names.count("r_inner") == 1 and names.count("r_decorated") == 1
    ev = {e.name: e for e in prof.events() if e.name.startswith("r_")}
    outer, inner = ev["r_outer"].time_range, ev["r_inner"].time_range
    assert outer.start <= inner.start and inner.end <= outer.end


def test_disabled_emits_nothing_and_decorator_still_calls(monkeypatch):
    monkeypatch.setitem(ann._state, "enabled", False)

    @annotate("r_off_fn")
    def work():
        return 7

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with annotate("r_off"):
            assert work() == 7
    assert _user_ranges(prof) == []


def test_exceptions_close_the_range_and_propagate():
    with pytest.raises(ValueError):
        with annotate("r_raises"):
            raise ValueError("boom")
    # A closed range leaves the nvtx stack balanced: a fresh range still opens and closes.
    with annotate("r_after"):
        pass


def test_domain_setting(monkeypatch):
    monkeypatch.setitem(ann._state, "domain", "custom")
    with annotate("r_dom"):
        pass
    assert ("custom", "r_dom") in ann._attrs
