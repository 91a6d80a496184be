"""Kernels of compiled code, given the compiler's call sites (the ``compiled`` table): each run
of a compiled graph found in the kernel stream, and its kernels put in ranges named by the
modules their call sites compute.

Code inside ``torch.compile`` opens no range (module hooks and NVTX do not run in it), so the
launch rule puts its kernels in whatever range was open around the compiled call, or in none.
The compiler said, per graph, which kernels it calls in which order and what module each call
computes. Here:

1. **Runs.** The kernel stream is cut into sequences (the kernels of one CUDA-graph launch; any
   other kernels per process, device, stream and launching thread), in start order. A run of a
   graph is where the graph's generated kernels (named by inductor, unique per graph and call
   order) follow each other in that order, other kernels between them allowed; the longest
   graph that matches there wins.
2. **Library calls.** The kernels between two matched generated kernels belong to the library
   calls between those two call sites: one call takes them all; as many kernels as calls, one
   each; otherwise a kernel that continues a library call (a split-K reduce, ``splitKreduce``,
   cuDNN's ``*_reduce``) stays with the call before it, and where that still does not split
   them into as many calls, they go to the calls' common module. Calls before a graph's first
   generated kernel and after its last take as many kernels on that side.
3. **Ranges.** Each run gets a range named by its graph's root (the root module's class, as an
   eager capture's module ranges name it), under the range its first kernel was in, and below
   it, per kernel, the module ranges an eager capture would have had (``vocabulary.MODULE_RANGES``
   of its call site's module path: the layer, the layer's child, embeddings, norm, head). A range
   spans its kernels' launch calls on their thread; its domain is ``compiled``, which is how a
   view tells these ranges from the program's own. A kernel whose own range differs from its
   run's first (the program opened one inside) keeps it: real ranges win.

So a compiled decode step reads like an eager one: ``LlamaForCausalLM > model.layers.3 >
model.layers.3.self_attn``, and a trace with no step ranges takes each run as a model call.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...vocabulary import MODULE_RANGES
from ..compiled import GENERATED
from .graph_ranges import merged

DOMAIN = "compiled"
# A generated C++ kernel records itself to the profiler as graph_<n>_<name>.
_CPP_PREFIX = re.compile(r"^graph_\d+_")
# Library kernels that finish the call before them rather than start one (cuBLAS split-K
# reduces, cuDNN attention's reduction after its fused kernel).
_CONTINUES = re.compile(r"splitKreduce|split_k_reduce|_reduce_kernel|reduce_kernel|Reduce|lean_reduction", re.IGNORECASE)
_SELECTED = [re.compile(p) for p in MODULE_RANGES]


def compiled_ranges(kernels: pd.DataFrame, ranges: pd.DataFrame, sites: pd.DataFrame):
    """``(ranges, range_id, counts)``: the ranges with the runs' ranges added and each kernel's
    range id in them (None, None where nothing matched), and ``counts``: ``runs``, ``kernels``
    (matched), ``generated`` (kernels named as some graph's generated kernels) and
    ``unmatched`` (of those, the ones in no run), ``graph_kernels`` (matched ones replayed from
    CUDA graphs)."""
    counts = {"runs": 0, "kernels": 0, "generated": 0, "unmatched": 0, "graph_kernels": 0}
    if not len(sites) or not len(kernels):
        return None, None, counts
    graphs = _graphs(sites)
    gen_names = {n: i for i, n in enumerate(sorted({n for g in graphs for n in g["gen_names"]}))}
    for g in graphs:
        g["gen"] = np.array([gen_names[n] for n in g["gen_names"]], dtype=np.int64)
    names = kernels["name"].cat
    cat_gen = np.array([gen_names.get(_CPP_PREFIX.sub("", str(c)), -1) for c in names.categories], dtype=np.int64)
    codes = names.codes.to_numpy()
    gen = np.where(codes >= 0, cat_gen[np.maximum(codes, 0)], -1) if len(cat_gen) else np.full(len(codes), -1)
    counts["generated"] = int((gen >= 0).sum())
    if not counts["generated"]:
        return None, None, counts
    site_of = np.full(len(kernels), -1, dtype=np.int64)  # row in `sites`
    run_of = np.full(len(kernels), -1, dtype=np.int64)
    runs: list[int] = []  # graph index per run
    for seq in _sequences(kernels, gen):
        for gi, pos in _match(gen[seq], [g["gen"] for g in graphs]):
            run = len(runs)
            runs.append(gi)
            _assign(seq, pos, graphs[gi], kernels, site_of, run_of, run)
    matched = run_of >= 0
    counts.update(runs=len(runs), kernels=int(matched.sum()), unmatched=int(((gen >= 0) & ~matched).sum()),
                  graph_kernels=int((matched & kernels["graph"].to_numpy()).sum()))
    if not runs:
        return None, None, counts
    added, range_id = _ranges(kernels, ranges, sites, graphs, runs, run_of, site_of)
    if added is None:
        return None, None, counts
    # The names and domain the added ranges brought: one categorical for the whole table.
    ranges = ranges.assign(name=ranges["name"].astype(added["name"].dtype),
                           domain=ranges["domain"].astype(added["domain"].dtype))
    return (*merged(ranges, added, range_id), counts)


def _graphs(sites: pd.DataFrame) -> list[dict]:
    """Per graph: its rows in call order, its generated kernels' names, and for each generated
    call the library calls before it (``before[j]``), and those after the last (``after``)."""
    out = []
    for graph, rows in sites.groupby("graph", observed=True, sort=False):
        rows = rows.sort_values("call", kind="stable")
        index = rows.index.to_numpy()
        generated = (rows["kind"] == GENERATED).to_numpy()
        gen_rows = index[generated]
        if not len(gen_rows):
            continue
        before, pending = [], []
        for i, is_gen in zip(index, generated):
            if is_gen:
                before.append(pending)
                pending = []
            else:
                pending.append(int(i))
        out.append({"graph": graph, "rows": index, "gen_rows": gen_rows,
                    "gen_names": [str(k) for k in rows["kernel"].to_numpy()[generated]],
                    "before": before, "after": pending})
    return out


def _sequences(kernels: pd.DataFrame, gen: np.ndarray):
    """Row indices of each sequence that holds a generated kernel, in start order: the kernels of
    one CUDA-graph launch, or the other kernels of one (process, device, stream, thread)."""
    col = kernels.__getitem__
    graph = col("graph").to_numpy()
    launch = np.where(graph, col("correlation").to_numpy(), -1)
    keys = [col("pid").to_numpy(), np.where(graph, -2, col("device").to_numpy()),
            np.where(graph, -2, col("stream").to_numpy()), np.where(graph, -2, col("launch_tid").to_numpy()), launch]
    order = np.lexsort((col("start").to_numpy(), *reversed(keys)))
    sorted_keys = [k[order] for k in keys]
    cut = np.flatnonzero(np.any([k[1:] != k[:-1] for k in sorted_keys], axis=0)) + 1 if len(order) > 1 else []
    has = gen[order] >= 0
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(order)]):
        if has[lo:hi].any():
            yield order[lo:hi]


def _match(seq_gen: np.ndarray, graph_gens: list[np.ndarray]) -> list[tuple[int, np.ndarray]]:
    """The runs in one sequence: ``(graph index, positions of its generated kernels)``, left to
    right; at each generated kernel the longest graph whose generated kernels follow in order."""
    pos = np.flatnonzero(seq_gen >= 0)
    names = seq_gen[pos]
    starts: dict[int, list[int]] = {}
    for gi, g in enumerate(graph_gens):
        starts.setdefault(int(g[0]), []).append(gi)
    for lst in starts.values():
        lst.sort(key=lambda gi: -len(graph_gens[gi]))
    out, i = [], 0
    while i < len(names):
        found = next((gi for gi in starts.get(int(names[i]), ())
                      if i + len(graph_gens[gi]) <= len(names)
                      and np.array_equal(names[i:i + len(graph_gens[gi])], graph_gens[gi])), None)
        if found is None:
            i += 1
            continue
        n = len(graph_gens[found])
        out.append((found, pos[i:i + n]))
        i += n
    return out


def _assign(seq: np.ndarray, pos: np.ndarray, g: dict, kernels: pd.DataFrame, site_of: np.ndarray,
            run_of: np.ndarray, run: int) -> None:
    """Give one run's kernels their call sites: the generated ones by position, the library
    kernels between (and around) them by the rules of the module docstring."""
    names = kernels["name"]
    rows = seq[pos]
    site_of[rows] = g["gen_rows"]
    run_of[rows] = run
    for j in range(len(pos) + 1):
        calls = g["before"][j] if j < len(pos) else g["after"]
        if not calls:
            continue
        if 0 < j < len(pos):
            between = seq[pos[j - 1] + 1:pos[j]]
        elif j == 0:
            between = _side(seq[:pos[0]][::-1], run_of, len(calls), names)[::-1]
        else:
            between = _side(seq[pos[-1] + 1:], run_of, len(calls), names)
        between = between[run_of[between] < 0]
        if len(between):
            site_of[between] = _split(between, calls, names)
            run_of[between] = run


def _side(candidates: np.ndarray, run_of: np.ndarray, calls: int, names: pd.Series) -> np.ndarray:
    """The kernels next to a run (nearest first) that its ``calls`` library calls there launched:
    up to ``calls`` kernels that start a call, each with the kernels that continue it."""
    taken, starts = [], 0
    for k in candidates:
        if run_of[k] >= 0:
            break
        starts += 0 if _CONTINUES.search(str(names.iat[k])) else 1
        if starts > calls:
            break
        taken.append(k)
    return np.array(taken, dtype=np.int64)


def _split(kernels_between: np.ndarray, calls: list[int], names: pd.Series) -> np.ndarray:
    """The call (row in ``sites``) of each kernel between two generated ones."""
    n, m = len(kernels_between), len(calls)
    if m == 1:
        return np.full(n, calls[0], dtype=np.int64)
    if n == m:
        return np.array(calls, dtype=np.int64)
    start = np.array([not _CONTINUES.search(str(names.iat[k])) for k in kernels_between])
    start[0] = True
    if int(start.sum()) == m:
        return np.array(calls, dtype=np.int64)[np.cumsum(start) - 1]
    return np.full(n, -2 - calls[0], dtype=np.int64)  # ambiguous: the calls' common module (see _module_of)


def _module_of(site: np.ndarray, sites: pd.DataFrame, graphs: list[dict], runs: list[int],
               run_of: np.ndarray) -> np.ndarray:
    """Each matched kernel's module path: its call site's; for a kernel of ambiguous library
    calls, the common ancestor of the modules of the calls it lay between."""
    module = sites["module"].astype(str).to_numpy()
    out = np.empty(len(site), dtype=object)
    ok = site >= 0
    out[ok] = module[site[ok]]
    for k in np.flatnonzero(~ok & (run_of >= 0)):
        first = -2 - int(site[k])
        g = graphs[runs[run_of[k]]]
        group = next((c for c in [*g["before"], g["after"]] if first in c), [first])
        parts = [module[c].split(".") if module[c] else [] for c in group]
        common = []
        for level in zip(*parts):
            if len(set(level)) != 1:
                break
            common.append(level[0])
        out[k] = ".".join(common)
    return out


def _chain(path: str) -> list[str]:
    """The module ranges an eager capture would open for a kernel of ``path``, outermost first."""
    parts = path.split(".") if path else []
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return [p for p in prefixes if any(rx.search(p) for rx in _SELECTED)]


def _ranges(kernels, ranges, sites, graphs, runs, run_of, site_of):
    """The added ranges (one per run, and per run its module ranges) and each kernel's range id."""
    k = kernels
    matched = np.flatnonzero((run_of >= 0) & (k["launch_tid"].to_numpy() >= 0))
    if not len(matched):
        return None, None
    module = _module_of(site_of, sites, graphs, runs, run_of)
    root = sites["root"].astype(str).to_numpy()
    old = k["range_id"].to_numpy()
    pid, tid = k["pid"].to_numpy(), k["launch_tid"].to_numpy()
    t0, t1 = k["launch_start"].to_numpy(), k["launch_end"].to_numpy()
    depth = ranges["depth"].to_numpy()
    n = len(ranges)
    made: dict[tuple, int] = {}
    rows: list[list] = []  # name, start, end, pid, tid, parent, depth
    range_id = old.copy()
    first_of_run: dict[int, int] = {}
    for kk in matched:  # matched kernels, in kernel order; runs' kernels share launch threads
        first_of_run.setdefault(int(run_of[kk]), int(kk))
    for kk in matched:
        run = int(run_of[kk])
        head = first_of_run[run]
        if old[kk] != old[head]:
            continue  # a range the program opened inside the run: real ranges win
        up = int(old[head])
        below = int(depth[up]) + 1 if up >= 0 else 0
        g = graphs[runs[run]]
        names = [root[g["rows"][0]], *_chain(module[kk])]
        for d, name in enumerate(names):
            key = (run, d, name)
            at = made.get(key)
            if at is None:
                at = made[key] = n + len(rows)
                rows.append([name, t0[kk], t1[kk], pid[kk], tid[kk], up, below + d])
            else:
                row = rows[at - n]
                row[1], row[2] = min(row[1], t0[kk]), max(row[2], t1[kk])
            up = at
        range_id[kk] = up
    if not rows:
        return None, None
    name, start, end, p, t, parent, d = zip(*rows)
    cats = list(ranges["name"].cat.categories)
    new = [x for x in dict.fromkeys(name) if x not in set(cats)]
    name_dtype = pd.CategoricalDtype([*cats, *new])
    domain_dtype = pd.CategoricalDtype(list(dict.fromkeys([*ranges["domain"].cat.categories, DOMAIN])))
    added = pd.DataFrame({
        "name": pd.Categorical(list(name), dtype=name_dtype), "start": np.array(start, dtype=np.int64),
        "end": np.array(end, dtype=np.int64), "pid": np.array(p, dtype=np.int64), "tid": np.array(t, dtype=np.int64),
        "domain": pd.Categorical([DOMAIN] * len(rows), dtype=domain_dtype),
        "id": np.arange(n, n + len(rows), dtype=np.int64), "parent": np.array(parent, dtype=np.int64),
        "depth": np.array(d, dtype=np.int64),
    })
    return added, range_id
