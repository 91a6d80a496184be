"""Kernel -> launch -> innermost range attribution at import, the per-range totals stored
with a trace, and stored traces read column by column: checked against straightforward
computations on real traces."""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pandas as pd
import pytest

from helpers import assert_same_frame
from workbench.analysis import BY, project, summary
from workbench.analysis.projection import NO_LAUNCH, NO_RANGE, _sorted_distinct, _spread, range_layers
from workbench.trace import import_file, load_dir, save
from workbench.trace.assemble.launches import _find, match_first



def _naive_first(t_pid, t_corr, q_pid, q_corr):
    first = {}
    for i, key in enumerate(zip(t_pid.tolist(), t_corr.tolist())):
        first.setdefault(key, i)
    return np.array([first.get(key, -1) for key in zip(q_pid.tolist(), q_corr.tolist())], dtype=np.int64)


@pytest.mark.parametrize("corr_span", [50, 10**12], ids=["dense-ids", "sparse-ids"])
@pytest.mark.parametrize("npids", [1, 3, 20])
def test_launch_match_is_the_first_row_of_the_same_pair(corr_span, npids):
    """Both strategies (direct-address table, sort + search) give the first API row with the
    same (pid, correlation id), duplicates and misses included."""
    rng = np.random.default_rng(npids)
    pids = rng.integers(0, 2**40, npids)
    t_pid = rng.choice(pids, 400)
    t_corr = rng.integers(0, corr_span, 400)
    q_pid = rng.choice(np.r_[pids, 7], 300)
    q_corr = np.r_[t_corr[:200], rng.integers(0, corr_span, 100)]
    got = match_first(t_pid, t_corr, q_pid, q_corr)
    assert (got == _naive_first(t_pid, t_corr, q_pid, q_corr)).all()
    by_corr = match_first(None, t_corr, None, q_corr)
    assert (by_corr == _naive_first(np.zeros_like(t_corr), t_corr, np.zeros_like(q_corr), q_corr)).all()


@pytest.mark.parametrize("case", ["rising", "rising-sparse", "rising-in-one-of-two-processes", "repeated", "other-processes"])
def test_launch_match_within_one_process(case):
    """One querying process: the search over rising ids (nsys's runtime table), dense or
    sparse, and the direct-address table give the first row of the pair too; none where
    the API calls are all another process's."""
    rng = np.random.default_rng(7)
    steps = rng.integers(1, 10 if case == "rising-sparse" else 3, 500)
    t_corr = np.cumsum(steps) if case != "repeated" else rng.integers(0, 300, 500)
    t_pid = rng.choice([11, 12], 500) if case == "rising-in-one-of-two-processes" else np.full(500, 11)
    q_corr = np.r_[rng.choice(t_corr, 300), rng.integers(0, 2000, 100)]
    q_pid = np.full(400, 11)
    if case == "other-processes":
        t_pid = rng.choice([12, 13], 500)
    got = match_first(t_pid, t_corr, q_pid, q_corr)
    assert (got == _naive_first(t_pid, t_corr, q_pid, q_corr)).all() and (got >= 0).any() == (case != "other-processes")


@pytest.mark.parametrize("matched", ["all", "some"])
def test_graph_launches_follow_the_launch_api_names(matched):
    """A kernel counts as CUDA-graph launched exactly where its launch API name (as the
    launch join gives it: the matched call's name, else the importer's own) is a graph
    launch, with missing names on either side."""
    from workbench.trace.assemble.launches import graph_launched, merge_names

    rng = np.random.default_rng(len(matched))
    api = pd.Series(pd.Categorical(rng.choice(["cudaLaunchKernel", "cudaGraphLaunch", "cuGraphLaunch_v2", None], 300)))
    own = pd.Series(pd.Categorical(rng.choice(["", "cudaGraphLaunch", "cudaLaunchKernel", None], 200)))
    found = None if matched == "all" else np.sort(rng.choice(200, 120, replace=False))
    m = rng.integers(0, 300, 200 if found is None else len(found))
    names = np.asarray(merge_names(own, api, found, m), dtype=object)
    want = np.array(["GraphLaunch" in str(x) for x in names])
    got = graph_launched(own, api, found, m)
    assert want.any() and (got == want).all()
    plain = pd.Series(pd.Categorical(["cudaLaunchKernel"] * 300))
    assert graph_launched(own.cat.set_categories(["", "cudaLaunchKernel"]), plain, found, m) is None


@pytest.mark.parametrize("order", ["rising", "random"])
def test_exact_lookup_finds_each_id_or_declines(order):
    """The launch join's exact lookup gives each query's row in a strictly rising table (-1
    where absent) and declines a table that does not rise strictly."""
    rng = np.random.default_rng(len(order))
    table = np.unique(rng.integers(-50, 600, 400))
    q = rng.integers(-100, 800, 1000)
    if order == "rising":
        q = np.sort(q)
    where = {v: i for i, v in enumerate(table.tolist())}
    assert (_find(table, q) == np.array([where.get(v, -1) for v in q.tolist()])).all()
    assert (_find(table[:0], q) == -1).all()
    assert _find(np.r_[table, table[:1]], q) is None


def test_import_hands_back_finished_tables(reference):
    """Every column is made before the import returns: the tables are plain frames in schema
    order, the same with one thread as with several, and a pickled copy is equal."""
    from workbench.trace import ImportOptions
    from workbench.trace.schema import SCHEMA, TABLES

    path = reference("nsys-kvwrite-unfused.sqlite.gz")
    trace = import_file(path)
    assert isinstance(trace.tables, dict)
    for table in TABLES:
        assert list(trace.tables[table].columns) == list(SCHEMA[table])
    assert trace.columns("kernels", ["launch_api"])["launch_api"].str.startswith("cu").all()
    one = import_file(path, ImportOptions(threads=1))
    copied = pickle.loads(pickle.dumps(trace))
    for table in TABLES:
        pd.testing.assert_frame_equal(one.tables[table], trace.tables[table], check_exact=True)
        pd.testing.assert_frame_equal(copied.tables[table], trace.tables[table], check_exact=True)


@pytest.mark.parametrize("names", [["a", "b"], ["", "x"], [NO_RANGE, "z"], ["", NO_RANGE, NO_LAUNCH, " ", "zz"], []])
def test_spread_places_the_labels_as_a_sort_would(names):
    """Per-kernel strings with the unattributed labels: categories sorted and merged with a
    range that bears a label's very name, as sorting every value would give."""
    rng = np.random.default_rng(len(names))
    values = np.array(sorted(set(names)), dtype=object)
    codes_r = rng.integers(-1, len(values), 40) if len(values) else np.full(40, -1)
    rid = rng.integers(-1, 40, 2000)
    has = rid >= 0
    nolaunch = ~has & (rng.random(2000) < 0.5)
    shown = np.bincount(rid[has & ~nolaunch], minlength=len(codes_r))
    got = _spread(codes_r, values, rid[has], has, nolaunch, shown)
    naive = np.array([(values[codes_r[r]] if codes_r[r] >= 0 else "") if h else (NO_LAUNCH if n else NO_RANGE)
                      for r, h, n in zip(rid, has, nolaunch)], dtype=object)
    assert list(got.categories) == sorted(set(naive))
    assert (np.asarray(got, dtype=object) == naive).all()


@pytest.mark.parametrize("values", [["b", "a", "b", "", "ä", "a/b", "Z", "😀", "a", "\uffff", "\U00010000"], ["x"], []])
def test_sorted_distinct_orders_as_python_does(values):
    """Arrow's byte order of UTF-8 is Python's code point order; repeats share a code; rows
    not kept have none (-1) and their strings are left out."""
    keep = np.arange(len(values)) % 3 != 1
    distinct, codes = _sorted_distinct(pd.Series(pd.array(values, dtype="string")), np.ones(len(values), dtype=bool))
    assert list(distinct) == sorted(set(values))
    assert [distinct[c] for c in codes] == values
    distinct, codes = _sorted_distinct(pd.Series(pd.array(values, dtype="string")), keep)
    assert list(distinct) == sorted({v for v, k in zip(values, keep) if k})
    assert [distinct[c] if k else c for c, k in zip(codes, keep)] == [v if k else -1 for v, k in zip(values, keep)]


def test_launch_times_are_exact_for_epoch_timestamps(external):
    """HTA's test trace has epoch-ns launch times (> 2**53): each kernel's launch_start is its
    API call's start to the nanosecond (a float64 join once rounded them by up to 128 ns)."""
    t = import_file(external("hta-trace-diff-test.json.gz"))
    k, a = t.kernels, t.api
    launched = k[k["launch_tid"] >= 0]
    first = a[a["correlation"] >= 0].drop_duplicates("correlation")
    m = launched.merge(first[["correlation", "start"]].rename(columns={"start": "api_start"}), on="correlation")
    assert len(m) == len(launched) > 9000
    assert (m["launch_start"].to_numpy() == m["api_start"].to_numpy()).all()
    assert int(launched["launch_start"].max()) > 2**53


def _innermost_naive(t):
    """O(kernels x ranges): the innermost (latest-starting, then shortest) range enclosing the
    launch on its thread, with half-open [start, end)."""
    r = t.ranges
    out = []
    for p, tid, ls in zip(t.kernels["pid"], t.kernels["launch_tid"], t.kernels["launch_start"]):
        if tid < 0:
            out.append(-1)
            continue
        m = r[(r["pid"] == p) & (r["tid"] == tid) & (r["start"] <= ls) & (ls < r["end"])]
        out.append(int(m["id"].iloc[int(np.argmax(m["depth"].to_numpy()))]) if len(m) else -1)
    return np.array(out)


@pytest.mark.parametrize("name", ["nsys-kvwrite-unfused.sqlite.gz", "kineto-kvwrite-fused-cache-full.json.gz"])
def test_range_ids_match_a_naive_search(reference, name):
    t = import_file(reference(name))
    assert (t.kernels["range_id"].to_numpy() == _innermost_naive(t)).all()


def _summary_naive(t, by):
    """The per-group tables the straightforward way: group the projected kernels with pandas."""
    p = project(t)
    if by == "kernel":
        return None
    keys = {"range": ["range"], "layer": ["layer", "range"], "path": ["path"], "step": ["step"], "phase": ["phase"]}[by]
    g = p.groupby(keys, observed=True, sort=True)["duration"]
    return pd.DataFrame({"kernels": g.size(), "gpu_time_ns": g.sum()}).reset_index()


@pytest.mark.parametrize("name", ["nsys-ai-mfu-2gpu-before.sqlite.gz", "hta-trace-diff-control.json.gz"])
def test_summaries_from_per_range_totals_equal_grouping_the_kernels(external, tmp_path, name):
    """summary() aggregates stored per-range totals; grouping every projected kernel gives the
    same rows, on the imported trace and on the stored one (read lazily)."""
    t = import_file(external(name))
    save(t, "t", tmp_path)
    stored = load_dir(tmp_path / "t")
    for by in BY:
        if by == "kernel":
            continue
        want = _summary_naive(t, by).sort_values(["kernels", "gpu_time_ns"] + ([] if by == "layer" else [by])).reset_index(drop=True)
        for trace in (t, stored):
            got = summary(trace, by=by)[list(want.columns)]
            got = got.astype({c: str for c in want.columns if c not in ("kernels", "gpu_time_ns", "layer")})
            exp = want.astype({c: str for c in want.columns if c not in ("kernels", "gpu_time_ns", "layer")})
            got = got.sort_values(list(exp.columns[-2:]) + [c for c in exp.columns[:-2]]).reset_index(drop=True)
            exp = exp.sort_values(list(exp.columns[-2:]) + [c for c in exp.columns[:-2]]).reset_index(drop=True)
            pd.testing.assert_frame_equal(got, exp, check_dtype=False)
    att = t.meta["attribution"]
    assert sum(v["kernels"] for v in att.values()) == len(t.kernels)
    s = summary(t, by="range")
    assert s.loc[s["range"] == NO_RANGE, "kernels"].sum() == att["no_range"]["kernels"]
    assert s.loc[s["range"] == NO_LAUNCH, "kernels"].sum() == att["no_launch"]["kernels"]


def test_stored_trace_reads_only_the_columns_a_summary_needs(external, tmp_path):
    t = import_file(external("nsys-ai-mfu-2gpu-after.sqlite.gz"))
    save(t, "t", tmp_path)
    stored = load_dir(tmp_path / "t")
    summary(stored, by="layer")
    assert not stored.tables._loaded  # no whole table was read
    assert "start" not in stored.tables._cols["kernels"]
    assert stored.rows("kernels") == len(t.kernels)
    assert_same_frame(stored.kernels, t.kernels)
    assert_same_frame(stored.ranges, t.ranges)


def test_format_1_trace_gets_its_attribution_derived(reference, tmp_path):
    """A trace stored before the importer attributed kernels (no range_id, no per-range
    totals, no attribution in the manifest) gives the same tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = import_file(reference("nsys-kvwrite-unfused.sqlite.gz"))
    d = save(t, "new", tmp_path)
    old = tmp_path / "old"
    shutil.copytree(d, old)
    for table, cols in (("kernels", ["range_id"]), ("ranges", ["kernels", "gpu_time_ns", "graph_kernels"])):
        f = old / f"{table}.parquet"
        pq.write_table(pa.Table.from_pandas(pq.read_table(f).to_pandas().drop(columns=cols), preserve_index=False), f)
    man = json.loads((old / "manifest.json").read_text())
    del man["attribution"]
    man["format_version"] = 1
    (old / "manifest.json").write_text(json.dumps(man))
    v1 = load_dir(old)
    for by in BY:
        assert_same_frame(summary(v1, by=by), summary(t, by=by))
    assert_same_frame(v1.kernels, t.kernels)
    assert_same_frame(v1.ranges, t.ranges)


def test_layers_inherit_through_deep_nesting():
    """Pointer jumping gives each range its own layer or its nearest ancestor's, at any depth."""
    n = 5000
    names = ["step"] + [f"layer_{i}" if i % 997 == 0 else f"op{i}" for i in range(1, n)]
    r = pd.DataFrame({"name": pd.Categorical(names), "parent": np.arange(-1, n - 1), "depth": np.arange(n)})
    got = range_layers(r)
    want, cur = [], -1
    for nm in names:
        if nm.startswith("layer_"):
            cur = int(nm.split("_")[1])
        want.append(cur)
    assert (got == np.array(want)).all()


def _nested(rng, lo: int, hi: int, out: list, budget: int) -> list:
    """Random properly nested ranges within [lo, hi]: siblings one after another (touching
    or not), each with its own children (as long as its parent, or empty, at times)."""
    at = lo
    for _ in range(rng.integers(0, 4)):
        if len(out) >= budget:
            break
        a = int(rng.integers(at, hi + 1))
        b = int(rng.integers(a, hi + 1))
        out.append((a, b))
        _nested(rng, a, b, out, budget)
        at = b
    return out


def _nesting_cases(rng) -> list[np.ndarray]:
    d = 3000
    cases = [np.array(_nested(rng, 0, 400, [], 300) or [(0, 1)]) for _ in range(20)]
    cases += [np.c_[np.arange(d), 2 * d - np.arange(d)], np.c_[np.zeros(d, int), np.full(d, 5)],
              np.c_[np.zeros(d, int), np.arange(d, 0, -1)], np.c_[np.arange(d), np.full(d, 2 * d)]]
    return cases


@pytest.mark.parametrize("seed", range(4))
def test_nesting_gives_the_stack_walks_answer(seed):
    """Boundary events come in the order a sort by (time, end before start, then the inner
    range first) gives, and the vectorised nesting has the stack walk's parents and
    timeline wherever ranges nest properly, at any depth (shuffled, deep, equal times, empty
    ranges); crossing ranges are left to the walk."""
    from workbench.trace.assemble import nesting

    rng = np.random.default_rng(seed)
    cases = _nesting_cases(rng)
    crossing = np.c_[np.arange(200), np.arange(200) + rng.integers(0, 30, 200)]
    for case, proper in [*((c, True) for c in cases), (crossing, False)]:
        case = case[rng.permutation(len(case))] if rng.random() < 0.5 else case
        start, end = case[:, 0].astype(np.int64), case[:, 1].astype(np.int64)
        live = end > start
        times, is_start, rid = nesting._events(start, end, live)
        ids = np.flatnonzero(live)
        t = np.r_[end[ids], start[ids]]
        s = np.r_[np.zeros(len(ids), bool), np.ones(len(ids), bool)]
        r = np.r_[ids, ids]
        order = np.lexsort((np.where(s, r, -r), np.where(s, -end[r], -start[r]), s, t))
        assert (times == t[order]).all() and (is_start == s[order]).all() and (rid == r[order]).all()
        parent, state = nesting._vector(times, is_start, rid, len(start))
        has = parent >= 0
        nested = (end[has] <= end[parent[has]]).all()
        assert nested == proper
        if nested:
            walked = nesting._walk(times, is_start, rid, len(start))
            assert (parent == walked[0]).all() and (state == walked[1]).all()


def test_api_calls_without_correlation_ids_leave_kernels_unlaunched(tmp_path):
    """A writer that gives no API call a correlation id: the kernels are counted as having no
    launch record, not an error."""
    import json

    from workbench.trace import import_file

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 3,
         "args": {"correlation": 5, "device": 0, "stream": 7}},
    ]
    path = tmp_path / "no-correlation.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = import_file(path)
    assert len(trace.kernels) == 1 and trace.meta["attribution"]["no_launch"]["kernels"] == 1
