import os
import threading

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    # The fused kv_write kernel runs under Triton's interpreter on CPU; on a GPU it must not.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import workbench
from workbench.instrument import ranges as ann
from workbench.instrument.ranges import annotate, torch_ranges


def _user_ranges(prof):
    return [e.name for e in prof.events() if e.name.startswith("r_")]


def _profile(**kw):
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kw)


def test_package_names_are_the_functions_not_modules():
    import workbench.instrument.ranges  # noqa: F401
    import workbench.capturing  # noqa: F401

    assert workbench.annotate is ann.annotate
    assert callable(workbench.capture) and workbench.capture.__module__ == "workbench.capturing.workload_capture"


def test_ranges_reach_torch_profiler_nested_and_as_decorator():
    @annotate("r_decorated")
    def work(x):
        return x + 1

    with _profile() as prof, torch_ranges():
        with annotate("r_outer"):
            with annotate("r_inner", domain="other"):
                work(torch.ones(4))
    names = _user_ranges(prof)
    assert names.count("r_outer") == 1 and names.count("r_inner") == 1 and names.count("r_decorated") == 1
    ev = {e.name: e for e in prof.events() if e.name.startswith("r_")}
    outer, inner = ev["r_outer"].time_range, ev["r_inner"].time_range
    assert outer.start <= inner.start and inner.end <= outer.end


def test_torch_ranges_only_inside_the_window_or_when_set():
    assert not ann.torch_ranges_on()
    with _profile() as prof:
        with annotate("r_no_window"):
            pass
        with torch_ranges():
            with torch_ranges():  # blocks overlap: on until the last closes
                pass
            assert ann.torch_ranges_on()
            with annotate("r_window"):
                pass
        assert not ann.torch_ranges_on()
        ann.set_torch_ranges(True)
        try:
            with annotate("r_set"):
                pass
        finally:
            ann.set_torch_ranges(False)
    assert sorted(_user_ranges(prof)) == ["r_set", "r_window"]


def test_disabled_emits_nothing_and_decorator_still_calls(monkeypatch):
    monkeypatch.setitem(ann._state, "enabled", False)

    @annotate("r_off_fn")
    def work():
        return 7

    with _profile() as prof, torch_ranges():
        with annotate("r_off"):
            assert work() == 7
    assert _user_ranges(prof) == []
    assert ann._tokens.stack == []


def test_a_range_open_when_the_setting_changes_closes_what_it_opened():
    a = annotate("r_toggle")
    with _profile() as prof, torch_ranges():
        with a:
            ann.set_enabled(False)
            try:
                with a:  # opens nothing; its exit must not close the outer range
                    pass
                assert len(ann._tokens.stack) == 1
            finally:
                ann.set_enabled(True)
        assert ann._tokens.stack == []
    assert _user_ranges(prof) == ["r_toggle"]


def test_exceptions_close_the_range_and_propagate():
    with pytest.raises(ValueError):
        with annotate("r_raises"):
            raise ValueError("boom")
    assert ann._tokens.stack == []
    # A closed range leaves the nvtx stack balanced: a fresh range still opens and closes.
    with annotate("r_after"):
        pass


def test_exits_out_of_order_close_their_own_range():
    """Generators (or tasks) suspended inside a range can close it after a later range opened."""

    def gen():
        with annotate("r_gen"):
            yield

    g = gen()
    with _profile() as prof, torch_ranges():
        next(g)
        with annotate("r_body"):
            g.close()  # r_gen closes while r_body is open
            assert [ann._owner(t).name for t in ann._tokens.stack] == ["r_body"]
    assert ann._tokens.stack == []
    assert sorted(_user_ranges(prof)) == ["r_body", "r_gen"]
    with pytest.raises(RuntimeError, match="not open"):
        annotate("r_never").__exit__(None, None, None)


def test_domain_setting(monkeypatch):
    monkeypatch.setitem(ann._state, "domain", "custom")
    with annotate("r_dom"):
        pass
    assert ("custom", "r_dom") in ann._attrs


THREADS, DEPTH, ROUNDS = 8, 3, 2


def test_one_object_nested_and_from_threads_with_kineto(tmp_path):
    """One ``annotate`` object, entered DEPTH deep by THREADS threads at once (and by the main
    thread): each thread's ranges come back from a real Kineto trace as ROUNDS chains nested
    DEPTH deep on that thread, and no thread sees another's open ranges."""
    shared = annotate("r_shared")
    barrier = threading.Barrier(THREADS)
    seen: dict[int, list] = {}
    errors: list[BaseException] = []

    def nest(level: int, record: list):
        with shared:
            record.append(len(ann._tokens.stack))
            if level < DEPTH:
                nest(level + 1, record)
            else:
                torch.ones(8).add_(1)
                barrier.wait(timeout=60)  # every thread this deep at once: their ranges overlap

    def worker():
        try:
            record = seen.setdefault(threading.get_native_id(), [])
            for _ in range(ROUNDS):
                nest(1, record)
            record.append(len(ann._tokens.stack))
        except BaseException as e:  # reported below: an assert in a thread would be lost
            errors.append(e)

    # torch.profiler records only the thread that started it unless told to record all.
    config = torch.profiler._ExperimentalConfig(profile_all_threads=True)
    with _profile(experimental_config=config) as prof, torch_ranges():
        with shared:
            threads = [threading.Thread(target=worker) for _ in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            main_stack = [ann._owner(t) for t in ann._tokens.stack]
    out = tmp_path / "threads.json"
    prof.export_chrome_trace(str(out))

    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    # Each thread saw only its own tokens: 1, 2, 3 deep per round, none left at the end.
    assert len(seen) == THREADS
    assert all(rec == [1, 2, 3] * ROUNDS + [0] for rec in seen.values())
    assert main_stack == [shared] and ann._tokens.stack == []

    trace = workbench.import_file(out)
    r = trace.ranges
    r = r[r["name"] == "r_shared"]
    by_tid = {tid: g.sort_values(["start", "depth"]) for tid, g in r.groupby("tid")}
    workers = {tid: g for tid, g in by_tid.items() if len(g) == DEPTH * ROUNDS}
    assert set(workers) == set(seen), {tid: len(g) for tid, g in by_tid.items()}
    main = [g for tid, g in by_tid.items() if tid not in workers]
    assert len(main) == 1 and len(main[0]) == 1  # the main thread's one range
    ids = r.set_index("id")
    for tid, g in workers.items():
        base = int(g["depth"].min())
        for chain in range(ROUNDS):
            rows = g.iloc[chain * DEPTH:(chain + 1) * DEPTH]
            assert list(rows["depth"] - base) == list(range(DEPTH)), (tid, rows)
            for outer, inner in zip(rows.itertuples(), rows.iloc[1:].itertuples()):
                assert inner.parent == outer.id
                assert outer.start <= inner.start and inner.end <= outer.end
            # A worker's outermost range opened on its own thread: no range of another encloses it.
            assert rows.iloc[0]["parent"] not in ids.index
            assert str(rows.iloc[-1]["path"]) == "/".join(["r_shared"] * DEPTH)
