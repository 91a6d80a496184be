"""Trace diff: match ranges of two traces by path, compare kernel counts and GPU time per
range, per layer and per step, and align the kernel sequences inside each matched range.

Ranges are matched by their path with the step level removed (``step_2/layer_03/kv_write``
and ``step_0/layer_03/kv_write`` are both ``layer_03/kv_write``), so traces with different
step counts or numbering compare. The step level is that of the kernel's step range, at any
depth (:mod:`.steps`): ``decode/step_2/layer_03/kv_write`` -> ``decode/layer_03/kv_write``; a
kernel launched directly in its step range has the key ``(step)``, wherever the step is.
Counts are reported per step: ``kernels_a`` of ``layer_03/kv_write`` is the kernels that range
launches in one step of A (the total over the captured steps divided by the number of decode
steps); totals are kept as ``kernels_total_a``. A trace without steps counts as one step.

Prefill is its own phase (:mod:`.steps`): a range key in prefill (``prefill/...``; for model
calls, the first call's step level becomes ``prefill``) is counted per prefill, never divided
into the decode steps, and stays out of the per-layer table. The per-step totals
(``kernels_per_step_a``) count the kernels in decode steps; work outside every step (set-up,
a ``generate`` loop's own ops between model calls) is counted per step in its own rows and
in ``outside_steps_kernels_a``, not in those totals. A trace without steps is one step of all
its non-prefill work.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.arrays import group_sums
from ..trace.manifest import work_units
from ..trace.schema import Trace
from .alignment import Alignment, align
from .per_step import per_layer, time_moved
from .projection import NO_LAUNCH, NO_RANGE, project
from .gpu_projection import step_projection
from .inferred.timing import timing as trace_timing
from .steps import DECODE, NO_STEP, PHASES, PREFILL, step_parts, trace_steps_info
from .trace_diff import PREFILL_KEY, STEP_KEY, TraceDiff



def _strings(values: pd.Categorical) -> tuple[np.ndarray, np.ndarray]:
    """A categorical column as indices into its values as text: its categories, then "nan"
    for a missing value (which a projection's columns do not hold)."""
    cats = values.categories
    names = np.append(np.asarray(cats if cats.inferred_type == "string" else cats.astype(str), dtype=object), "nan")
    codes = values.codes.astype(np.int64)
    return np.where(codes >= 0, codes, len(names) - 1), names


def _first_rows(key: np.ndarray, n: int) -> np.ndarray:
    """The first row of each of the keys 0..n-1 in ``key`` (``len(key)`` for one absent)."""
    first = np.full(n, len(key), dtype=np.int64)
    np.minimum.at(first, key, np.arange(len(key)))
    return first


@dataclass
class _Side:
    """One trace's kernels as the diff sees them, as codes: each kernel's step-free range key
    (into ``keys``, sorted), and what is compared about it."""

    p: pd.DataFrame  # the projection
    key: np.ndarray  # per kernel, index into keys
    keys: np.ndarray  # distinct keys, sorted (object array of str)
    phase: np.ndarray  # per key: OTHER, PREFILL or DECODE
    steps: int  # decode steps (1 for a trace with none)
    prefills: int
    stepped: bool  # the trace has decode steps
    range_key: pd.Series  # per range that launched kernels (index: its id): its key

    def sums(self) -> pd.DataFrame:
        """Per key: its first kernel's range name and layer, kernels and GPU time in all steps
        and per step."""
        nk = len(self.keys)
        first = _first_rows(self.key, nk)
        codes, names = _strings(self.p["range"].array)
        out = pd.DataFrame({
            "name": names[codes[first]], "layer": self.p["layer"].to_numpy()[first],
            "phase": np.asarray(PHASES, dtype=object)[self.phase],
            "kernels_total": np.bincount(self.key, minlength=nk).astype(np.int64),
            "gpu_time_total_ns": group_sums(self.key, self.p["duration"].to_numpy(), nk),
        }, index=pd.Index(self.keys, name="key"))
        per = self.per_key()
        out["kernels"] = out["kernels_total"] / per
        out["gpu_time_ns"] = out["gpu_time_total_ns"] / per
        out["per_step"] = self.counted()
        return out

    def counted(self) -> np.ndarray:
        """Per key: whether it is decode-step work, the work every per-decode-step number counts
        (:mod:`.per_step`): a key in decode steps, or for a trace without steps any key but
        prefill."""
        return self.phase == DECODE if self.stepped else self.phase != PREFILL

    def per_key(self) -> np.ndarray:
        """What each key's totals are divided by: its prefills for a prefill key, else the steps."""
        return np.where(self.phase == PREFILL, self.prefills, self.steps)

    def name_counts(self, wanted: list[str]) -> dict[str, Counter]:
        """Per wanted key: its kernels' short names over all its instances, counted."""
        index = {k: i for i, k in enumerate(self.keys)}
        want = np.zeros(len(self.keys), dtype=bool)
        want[[index[k] for k in wanted if k in index]] = True
        rows = np.flatnonzero(want[self.key])
        codes, names = _strings(self.p["short_name"].array)
        pairs, counts = np.unique(np.stack([self.key[rows], codes[rows]]), axis=1, return_counts=True)
        out: dict[str, Counter] = {}
        for (k, c), n in zip(pairs.T.tolist(), counts.tolist()):
            out.setdefault(self.keys[k], Counter())[names[c]] = n
        return out

    def decode_totals(self) -> tuple[int, float]:
        """Kernels and GPU time (ns) that the per-step totals divide: those of the keys
        :meth:`counted` holds."""
        counted = self.counted()[self.key]
        return int(counted.sum()), float(self.p["duration"].to_numpy()[counted].sum())

    def sequences(self, wanted: list[str]) -> dict[str, list[str]]:
        """Kernel names, in launch order, of the first instance of each wanted range key."""
        wanted = set(wanted)
        want = np.fromiter((k in wanted for k in self.keys), dtype=bool, count=len(self.keys))
        rows = np.flatnonzero(want[self.key])
        if not len(rows):
            return {}
        p = self.p
        rows = rows[np.lexsort((p["start"].to_numpy()[rows], p["launch_start"].to_numpy()[rows]))]
        key, rid = self.key[rows], p["range_id"].to_numpy()[rows]
        # First instance = the range of the earliest kernel of that key (or all unattributed).
        first_rid = np.append(rid, -1)[_first_rows(key, len(self.keys))]  # -1: keys not wanted, never looked up
        sel = rid == first_rid[key]
        rows, key = rows[sel], key[sel]
        order = np.argsort(key, kind="stable")  # grouped by key, each in launch order
        rows, key = rows[order], key[order]
        codes, names = _strings(p["short_name"].array)
        cuts = np.flatnonzero(key[1:] != key[:-1]) + 1
        return {self.keys[k[0]]: names[codes[r]].tolist() for k, r in zip(np.split(key, cuts), np.split(rows, cuts))}

    def count_phase(self, phase: int) -> int:
        """Kernels whose key is of ``phase``."""
        return int((self.phase[self.key] == phase).sum())

    def count(self, labels: tuple[str, ...]) -> int:
        """Kernels whose key is one of ``labels``."""
        return int(np.bincount(self.key, minlength=len(self.keys))[np.isin(self.keys, labels)].sum())


def _side(trace: Trace, step_regex: str | None, layer_regex: str | None) -> _Side:
    """Each kernel's range path with its step level removed: ``step_0/layer_03/kv_write`` ->
    ``layer_03/kv_write``, ``decode/step_0/layer_03`` -> ``decode/layer_03``, ``(step)`` for a
    kernel launched directly in a step; a model call taken as the prefill has its step level
    replaced by ``prefill``. Made once per range that launched kernels (its path and its step
    are one) and spread as codes: a million kernels make no strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    p = project(trace, layer_regex)
    rid = p["range_id"].to_numpy()
    status = p["status"].array.codes  # 0: in a range; 1, 2: labelled, in no step
    every = bool((status == 0).all())
    r = trace.columns("ranges", ["kernels", "path"])
    # The ranges that kernels show: from the per-range totals where every kernel is in one.
    shown = r["kernels"].to_numpy() > 0 if every else np.bincount(rid[status == 0], minlength=len(r)) > 0
    used = np.flatnonzero(shown)
    # The labels of the kernels in no range that occur, after the ranges' paths.
    present = [] if every else [c for c in (1, 2) if (status == c).any()]
    labels = [(NO_RANGE, NO_LAUNCH)[c - 1] for c in present]
    info = trace_steps_info(trace, step_regex)
    level = np.r_[step_parts(trace, step_regex)[used], np.zeros(len(labels), np.int64)]  # 1 + the step's part, 0: none
    phase = np.r_[info.phase[used], np.zeros(len(labels), np.int8)]
    renamed = (phase == PREFILL) & info.calls
    column = pa.array(r["path"], pa.large_string())
    shown_paths = column.take(used)
    # Joined chunk by chunk: an in-memory column can come as a chunked array, which a list
    # given to pa.chunked_array would convert row by row.
    paths = pa.concat_arrays([*getattr(shown_paths, "chunks", [shown_paths]), pa.array(labels, pa.large_string())])
    codes, keys = step_free(paths, level > 0, level - 1, renamed)
    # A range outside every step whose step-free path is a decode range's (a warm-up's
    # `layer_00/mm` beside `step_0/layer_00/mm`, the graph replaying it) keeps a key of its
    # own, so it is not counted as decode work: "(no step)/" and its path.
    decode_keys = np.bincount(codes[phase == DECODE], minlength=len(keys)) > 0
    clash = (phase != DECODE) & (phase != PREFILL) & decode_keys[codes]
    if clash.any():
        prefixed = pc.binary_join_element_wise(pa.scalar(NO_STEP, pa.large_string()), paths,
                                               pa.scalar("/", pa.large_string()))
        codes, keys = step_free(pc.if_else(pa.array(clash), prefixed, paths), level > 0, level - 1, renamed)
    key_phase = np.zeros(len(keys), dtype=np.int8)
    key_phase[codes] = phase
    key_r = np.zeros(len(r), dtype=np.int64)
    key_r[used] = codes[:len(used)]
    if every:
        key = key_r[rid]
    else:
        key = np.zeros(len(rid), dtype=np.int64)
        key[status == 0] = key_r[rid[status == 0]]
        for i, c in enumerate(present):
            key[status == c] = codes[len(used) + i]
    # Steps are counted by their keys: the ranges of one step on several threads or processes
    # (one per rank) are one step, and steps numbered afresh in each window (``prefill/step_0``,
    # ``decode/step_0``) are several. A step that launched nothing still counts, as in
    # launches_per_step and the report.
    n_steps, n_prefills = info.count(DECODE), info.count(PREFILL)
    range_key = pd.Series(keys[codes[:len(used)]], index=used, dtype=object)
    return _Side(p, key, keys, key_phase, max(n_steps, 1), max(n_prefills, 1), n_steps > 0, range_key)


def step_free(paths: np.ndarray, stepped: np.ndarray, part: np.ndarray | None = None,
              renamed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``paths`` (numpy or Arrow strings) with its step level cut out where ``stepped``:
    its "/"-separated part number ``part`` (default 0: a top-level step), ``(step)`` for a path
    that ends there; where ``renamed``, the level becomes ``prefill`` instead. Returned as
    codes into the distinct results, sorted; by Arrow, which makes Python strings only of
    those."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = pa.array(paths, pa.large_string())
    part = np.zeros(len(paths), dtype=np.int64) if part is None else np.asarray(part)
    renamed = np.zeros(len(paths), dtype=bool) if renamed is None else np.asarray(renamed, dtype=bool)
    # One pass per distinct place of the step (a program has one or two: its steps nest alike).
    for d, into in {(int(d), bool(r)) for d, r in zip(part[stepped], renamed[stepped])}:
        sel = stepped & (part == d) & (renamed == into)
        sub = keys.filter(pa.array(sel))
        above = "[^/]*/" * d  # spelled out: RE2 bounds a counted repetition at 1000
        rest = pc.replace_substring_regex(sub, pattern=f"^({above})[^/]*/",
                                          replacement=r"\1prefill/" if into else r"\1", max_replacements=1)
        end = PREFILL_KEY if into else STEP_KEY
        cut = pc.if_else(pc.match_substring_regex(sub, f"^{above}[^/]*/"), rest, pa.scalar(end, pa.large_string()))
        keys = pc.replace_with_mask(keys, pa.array(sel), cut)
    encoded = pc.dictionary_encode(keys)
    distinct = encoded.dictionary
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[pc.array_sort_indices(distinct).to_numpy()] = np.arange(len(distinct))
    ordered = np.empty(len(distinct), dtype=object)
    ordered[rank] = distinct.to_numpy(zero_copy_only=False)
    return rank[encoded.indices.to_numpy()], ordered


def diff(a: Trace, b: Trace, *, layer_regex: str | None = None, step_regex: str | None = None) -> TraceDiff:
    """Compare two traces range by range; see the module docstring for the matching rule."""
    from ..trace import open_trace

    a = a if isinstance(a, Trace) else open_trace(a)
    b = b if isinstance(b, Trace) else open_trace(b)
    fa, fb = _side(a, step_regex, layer_regex), _side(b, step_regex, layer_regex)
    na, nb = fa.steps, fb.steps
    ka, kb = fa.sums(), fb.sums()
    r = ka.join(kb, how="outer", lsuffix="_a", rsuffix="_b")
    r["status"] = np.where(r["kernels_a"].isna(), "only_b", np.where(r["kernels_b"].isna(), "only_a", "both"))
    r["name"] = r["name_a"].fillna(r["name_b"])
    r["phase"] = r["phase_a"].fillna(r["phase_b"])
    r["per_step"] = r["per_step_a"].fillna(False).astype(bool) | r["per_step_b"].fillna(False).astype(bool)
    r["layer"] = r["layer_a"].fillna(r["layer_b"]).astype(np.int64)
    for col in ("kernels", "gpu_time_ns", "kernels_total", "gpu_time_total_ns"):
        for s in ("a", "b"):
            r[f"{col}_{s}"] = r[f"{col}_{s}"].fillna(0)
    for col in ("kernels_total_a", "kernels_total_b", "gpu_time_total_ns_a", "gpu_time_total_ns_b"):
        r[col] = r[col].astype(np.int64)
    r["delta_kernels"] = r["kernels_b"] - r["kernels_a"]
    r["delta_gpu_time_ns"] = r["gpu_time_ns_b"] - r["gpu_time_ns_a"]
    with np.errstate(divide="ignore", invalid="ignore"):
        r["delta_gpu_time_pct"] = np.where(r["gpu_time_ns_a"] > 0, 100.0 * r["delta_gpu_time_ns"] / r["gpu_time_ns_a"], np.nan)
    r = r.reset_index().rename(columns={"key": "range"})
    r = r[["range", "name", "layer", "phase", "per_step", "status", "kernels_a", "kernels_b", "delta_kernels", "gpu_time_ns_a",
           "gpu_time_ns_b", "delta_gpu_time_ns", "delta_gpu_time_pct", "kernels_total_a", "kernels_total_b",
           "gpu_time_total_ns_a", "gpu_time_total_ns_b"]]

    both = r.loc[r["status"] == "both", "range"].tolist()
    sa, sb = fa.sequences(both), fb.sequences(both)
    alignments: dict[str, Alignment] = {}
    memo: dict[tuple, Alignment] = {}
    for k in both:
        pair = (tuple(sa.get(k, ())), tuple(sb.get(k, ())))
        if pair not in memo:  # every layer usually has the same pair: align it once
            memo[pair] = align(list(pair[0]), list(pair[1]))
        alignments[k] = memo[pair]
    # A range of one side only: its kernels (first instance) all removed or all added.
    for side, status, op in ((fa, "only_a", "removed"), (fb, "only_b", "added")):
        for k, seq in side.sequences(r.loc[r["status"] == status, "range"].tolist()).items():
            alignments[k] = Alignment([(op, seq)])
    _count_changes(r, alignments, fa, fb)
    moved = time_moved(r["gpu_time_ns_a"].to_numpy(), r["gpu_time_ns_b"].to_numpy())
    kernels_changed = (r["delta_kernels"] != 0) | r["range"].map(
        lambda k: bool(alignments[k].removed or alignments[k].added) if k in alignments else False)
    r["changed"] = np.where(kernels_changed, "kernels", np.where(moved, "time", ""))

    layers = per_layer(r[r["per_step"]])
    (ka_dec, ga_dec), (kb_dec, gb_dec) = fa.decode_totals(), fb.decode_totals()
    totals = {
        "steps_a": na, "steps_b": nb,
        "kernels_per_step_a": ka_dec / na, "kernels_per_step_b": kb_dec / nb,
        "gpu_time_per_step_ns_a": ga_dec / na, "gpu_time_per_step_ns_b": gb_dec / nb,
        # Nsight Systems' span of a step's GPU work (:mod:`.gpu_projection`), beside the summed time.
        "gpu_proj_per_step_ns_a": step_projection(a, step_regex), "gpu_proj_per_step_ns_b": step_projection(b, step_regex),
        "prefill_kernels_a": fa.count_phase(PREFILL), "prefill_kernels_b": fb.count_phase(PREFILL),
        "outside_steps_kernels_a": len(fa.key) - ka_dec - fa.count_phase(PREFILL),
        "outside_steps_kernels_b": len(fb.key) - kb_dec - fb.count_phase(PREFILL),
        "kernels_a": len(fa.key), "kernels_b": len(fb.key),
        **{f"{k}_ranges": int((r["status"] == s).sum()) for k, s in (("common", "both"), ("only_a", "only_a"),
                                                                      ("only_b", "only_b"))},
        "unattributed_a": fa.count((NO_RANGE, NO_LAUNCH)), "unattributed_b": fb.count((NO_RANGE, NO_LAUNCH))}
    return TraceDiff(a.label, b.label, r, layers, {"a": na, "b": nb}, alignments, totals,
                     trace_timing(a, b), (work_units(a.meta), work_units(b.meta)),
                     (fa.range_key, fb.range_key))


def _count_changes(r: pd.DataFrame, alignments: dict[str, Alignment], fa: _Side, fb: _Side) -> None:
    """A range whose kernels per step changed while its first instances align equal (the
    change is in later instances): its kernels compared as per-step counts over all
    instances, so a removed or added kernel is always listed."""
    quiet = r[(r["status"] == "both") & (r["delta_kernels"] != 0)]
    quiet = [k for k in quiet["range"] if not (alignments[k].removed or alignments[k].added)]
    if not quiet:
        return
    ca, cb = fa.name_counts(quiet), fb.name_counts(quiet)
    per_a, per_b = dict(zip(fa.keys, fa.per_key())), dict(zip(fb.keys, fb.per_key()))
    for k in quiet:
        a, b = ca.get(k, Counter()), cb.get(k, Counter())
        ops = [("equal", [n for op, ns in alignments[k].ops if op == "equal" for n in ns])]
        for name in sorted(set(a) | set(b)):
            delta = b[name] / per_b[k] - a[name] / per_a[k]
            if delta:
                times = max(1, int(round(abs(delta))))
                ops.append(("added" if delta > 0 else "removed", [name] * times))
        alignments[k] = Alignment([op for op in ops if op[1]])
