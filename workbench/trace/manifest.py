"""The manifest: everything a stored trace records besides its tables, and how it is read.

A stored trace is a directory of Parquet tables (:mod:`.schema`) and ``manifest.json``; in
memory the manifest is ``Trace.meta``. It is one JSON object whose top-level keys are the
sections of :data:`SECTIONS`, each written by one stage of the loop:

* the importer (``trace/readers``): ``source`` (format, file, tool, ``work_units``, a
  ``note``), ``env`` (GPU, driver, versions), and where the file says so ``distributed``
  (the rank's place in its job), ``tensorrt`` (a trtexec engine and its layers) and
  ``timing`` (trtexec's per-iteration latencies);
* assembling the tables (``trace/assemble``): ``attribution`` (work units and their time by
  how they were attributed to ranges), ``graph_kernels`` (CUDA-graph kernels) and ``compiled``
  (kernels of torch.compile'd code matched to the compiler's call sites, ``trace/compiled.py``)
  and ``inferred`` (steps and layers found in the kernel stream of an uninstrumented trace,
  ``trace/inferred``);
* the store (``trace/store``): ``name``, ``format_version``, ``counts`` (rows per table),
  ``content_sha256`` (the tables' identity), ``stored_at`` (when) and ``raw`` (the original
  capture kept beside);
* a workbench capture (``capturing``): ``capture`` (how: kind, backend, device, workload,
  variant, engine, command, settings), ``env``, ``timing`` (per phase: median, min, max, n,
  samples) and ``outputs`` (what it computed); a rank of a multi-rank capture or a member of
  an imported trace set also ``set`` (its set and roles);
* ``workbench bench --store``: ``timing_bench``, samples of variants timed interleaved,
  which comparisons prefer to ``timing`` (:func:`recorded_timing`);
* analysis: ``analysis``, the step and prefill regexes chosen for the trace.

Manifests can be hand-edited, written by an older workbench, or fuzzed, so every read here is
defensive: :func:`section` is always a mapping (``{}`` for a section that is missing or not a
JSON object), :func:`lookup` None for any missing step of a path, and the named helpers fall
back to their defaults. Only the store checks a manifest strictly (``store.read.read_manifest``:
a JSON object whose ``source`` is one), and only the store writes manifest files
(``store.write``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Section name -> what it holds, in the order the loop writes them. The code writes every one
# of these (tests/store/test_manifest.py checks that a capture writes nothing else) except the last
# four, which are only read where an older or hand-written manifest has them.
SECTIONS: dict[str, str] = {
    "source": "what was imported: format, file, bytes, tool and tool_version, work_units, command, note, part",
    "env": "the machine and versions: GPU, driver, CUDA, torch, triton, nsys, Python, OS, git, hostname",
    "distributed": "a rank's place in a torch.distributed job: rank, local_rank, world_size, backend, pid",
    "tensorrt": "a trtexec engine: build, model and inference options, its layers in order, count, total_ms",
    "attribution": "work units, their time and their CUDA-graph ones by status: range, no_range, no_launch",
    "graph_kernels": "CUDA-graph kernels: how many, under their capture-time ranges, in compiled modules, a note",
    "compiled": "compiled code: graphs and call sites the compiler recorded, runs and kernels matched, a note",
    "inferred": "steps and layers found in the kernel stream: steps, kernels_per_step, layers, confidence, rests_on, applied",
    "capture": "how the workbench captured it: kind, backend, device, workload, variant, engine, command, ...",
    "timing": "the capture's timing: its timer, and per phase (decode_step_ms, call_ms, ...) median/min/max/n/samples",
    "timing_bench": "the timing a `workbench bench --store` measured (variants interleaved), preferred to timing",
    "outputs": "what the capture computed (logits and tokens, or a call's items), for outputs_equal",
    "set": "a trace-set member's place: the set's name, rank, local_rank, host, run_id, variant",
    "analysis": "the step_regex and prefill_regex chosen for this trace (analysis.steps.set_phases)",
    "raw": "the original capture files kept under raw/: name, size, SHA-256 of each",
    "name": "the trace's name in its store",
    "format_version": "the store layout the tables were written in (store.layout.FORMAT_VERSION)",
    "counts": "rows per table: kernels, ranges, api, memcpy, memset",
    "content_sha256": "the SHA-256 of the stored tables: the trace's identity (store.layout.content_hash)",
    "stored_at": "when the store wrote the trace, UTC, ISO 8601 to the second (workbench list shows it)",
    "workload": "read only: the workload's name, in manifests older than capture.workload",
    "variant": "read only: the variant, in manifests older than capture.variant",
    "gaps": "read only: what the capture could not do, listed in a report (also read under capture)",
    "not_run": "read only: as gaps",
    "skipped": "read only: as gaps",
}

# The names code reads or writes in more than one place (``meta[CAPTURE]``, ``section(meta, ENV)``).
SOURCE, ENV, DISTRIBUTED, TENSORRT = "source", "env", "distributed", "tensorrt"
ATTRIBUTION, GRAPH_KERNELS, CAPTURE, TIMING = "attribution", "graph_kernels", "capture", "timing"
TIMING_BENCH, OUTPUTS, SET, ANALYSIS = "timing_bench", "outputs", "set", "analysis"
NAME, COUNTS, CONTENT_SHA256, COMPILED = "name", "counts", "content_sha256", "compiled"
INFERRED, STORED_AT = "inferred", "stored_at"


def _found(meta, name: str) -> Mapping | None:
    """Section ``name`` of ``meta`` where it is a JSON object, else None."""
    value = meta.get(name) if isinstance(meta, Mapping) else None
    return value if isinstance(value, Mapping) else None


def section(meta, name: str) -> Mapping[str, Any]:
    """Section ``name`` of a manifest: the mapping it holds, ``{}`` where it is missing or not
    an object (or ``meta`` itself is not one). The manifest's own, not a copy: read it."""
    found = _found(meta, name)
    return {} if found is None else found


def lookup(meta, *path: str):
    """The value at ``path`` (``lookup(meta, "capture", "variant", "dtype")``), None where any
    step is missing or not an object."""
    for p in path:
        if not isinstance(meta, Mapping) or p not in meta:
            return None
        meta = meta[p]
    return meta


def source_format(meta, default: str = "") -> str:
    """The format the importer read (``nsys-sqlite``, ``nsys-rep``, ``kineto``, ``chrome``,
    ``trtexec``, ...), ``default`` where it is not recorded."""
    return str(section(meta, SOURCE).get("format", default))


def work_units(meta) -> str:
    """What a trace's kernel table holds, from its manifest: ``kernel`` (device kernels, the
    default), ``cpu_op`` (a CPU-only capture's top-level CPU ops, timed on threads) or
    ``trt_layer`` (a TensorRT engine's profiled layers)."""
    return str(section(meta, SOURCE).get("work_units") or "kernel")


def source_note(meta) -> str | None:
    """What the importer said of its source, in a line (``source.note``: GPU activity it did not
    import, one process assumed, ...); None where it said nothing."""
    note = section(meta, SOURCE).get("note")
    return str(note) if note else None


def capture_kind(meta) -> Any:
    """How the workbench captured the trace: ``workload``, ``command`` or ``call`` as
    ``capture.kind`` says (a manifest that names only its workload is a workload's), None for
    an imported file."""
    cap = section(meta, CAPTURE)
    return cap.get("kind") or ("workload" if cap.get("workload") else None)


def workload_name(meta: Mapping | None) -> str | None:
    """The workload a trace's manifest names (``workload``, else ``capture.workload``), or None."""
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("workload")
    if name is None:
        name = section(meta, CAPTURE).get("workload")
    return None if name is None else str(name)


def recorded_timing(meta) -> tuple[str, Mapping]:
    """Which timing a trace is compared by, and it: ``timing_bench`` (an interleaved
    ``workbench bench --store``) when the manifest holds it, else the capture's ``timing``
    (``("timing", {})`` when there is none)."""
    for key in (TIMING_BENCH, TIMING):
        found = _found(meta, key)
        if found is not None:
            return key, found
    return TIMING, {}


def graph_counts(meta) -> tuple[int, int]:
    """A trace's CUDA-graph kernels, and how many of them are under the ranges open when
    their graph was captured, from its manifest."""
    totals = section(meta, ATTRIBUTION)
    n = sum(int(v.get("graph_kernels", 0)) for v in totals.values() if isinstance(v, Mapping))
    return n, min(n, int(section(meta, GRAPH_KERNELS).get("by_capture", 0)))


def graph_note(meta) -> str | None:
    """How a trace's CUDA-graph kernels were attributed, in a line (None: it has none): under
    the ranges open when their graph was captured (``graph_kernels``, see
    ``assemble/graph_ranges.py``), in the modules the compiler says they compute
    (``assemble/compiled_runs.py``), or only under the range around the graph launch, and why."""
    n, by_capture = graph_counts(meta)
    if not n:
        return None
    if by_capture >= n:
        return f"{n} CUDA-graph kernels, each under the ranges open when its graph was captured"
    by_compiler = min(n - by_capture, int(section(meta, GRAPH_KERNELS).get("by_compiler", 0) or 0))
    parts = [f"{by_capture} under the ranges open at their capture"] if by_capture else []
    if by_compiler:
        parts.append(f"{by_compiler} in the modules the compiler says they compute")
    rest = n - by_capture - by_compiler
    if not rest:
        return f"{n} CUDA-graph kernels: " + ", ".join(parts)
    head = f"{n} CUDA-graph kernels: " + ", ".join(parts) + f", {rest}" if parts else f"{n} CUDA-graph kernels"
    if section(meta, INFERRED).get("applied"):  # no range around them: the inferred ones hold them
        return f"{head} in the steps and layers inferred from the kernel stream (no range was open at their capture)"
    fmt = source_format(meta)
    kineto = fmt.startswith("kineto") or fmt == "chrome"
    why = ("no range was open where the trace holds their graph's capture, or it does not hold the capture: record "
           "it inside the recorded window" + ("" if kineto else " (nsys --cuda-graph-trace=node)")
           + ", with ranges open around it")
    ambiguous = min(rest, int(section(meta, GRAPH_KERNELS).get("ambiguous", 0) or 0))
    if ambiguous:  # torch.profiler: replays matched to captures by size (assemble/captured_launches.py)
        why = (f"{ambiguous} in replays that match several captured graphs of their size, as torch.profiler does not "
               "record which graph a launch replays" + ("" if ambiguous == rest else f"; the rest: {why}"))
    return f"{head} only under the range around their graph launch ({why})"


def inferred_note(meta) -> str | None:
    """What the trace's inferred steps and layers rest on, in a line (None: none were searched
    for, the trace had ranges): the ranges ``step_<i>`` / ``inferred_layer_<NN>`` of domain ``inferred``
    (``trace/inferred``), or why none were added."""
    info = section(meta, INFERRED)
    if not info:
        return None
    what = (f"{info.get('steps')} steps of {info.get('kernels_per_step')} kernels, {info.get('layers')} layers "
            f"of {info.get('kernels_per_layer')} kernels (confidence {info.get('confidence')})")
    if info.get("applied"):
        return (f"steps and layers INFERRED from the kernel stream (the trace has no ranges around its kernels): "
                f"{what}; rests on {info.get('rests_on')}; `--layers N` on import gives the search a hint")
    return (f"no steps or layers inferred from the kernel stream: the best reading, {what}, is too unsure "
            f"(rests on {info.get('rests_on')}); add NVTX ranges, or re-import with --layers N")


_INTERPRETER = "triton-interpreter"


def interpreter_note(meta) -> str | None:
    """A line for a capture whose Triton kernels ran under Triton's interpreter
    (``TRITON_INTERPRET=1``: numpy on the host, the only way Triton runs on a CPU; a capture
    records it as an engine setting whose value is ``triton-interpreter``), None otherwise: the
    time of those ops measures the interpreter, not the kernel, so no view may read it as such."""
    info = lookup(meta, "capture", "engine_info")
    keys = sorted(str(k) for k, v in info.items() if v == _INTERPRETER) if isinstance(info, Mapping) else []
    if not keys:
        return None
    return (f"its Triton kernels ({', '.join(keys)}) ran under the Triton interpreter (numpy on the host): their "
            "times measure the interpreter, not the kernels; their counts still hold")
