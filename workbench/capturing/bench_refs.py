"""What ``bench`` times: each variant it is given, resolved before anything is built.

A variant is a stored trace whose manifest says how it was captured (a workload variant, or a
``--call`` capture's ``module:function``), or ``WORKLOAD:key=value,...`` given directly (see
:func:`parse_spec`). Code that a trace names, rather than the user, is imported only with
``trust_code``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WorkbenchError


@dataclass
class Variant:
    """One variant to time: what to build or call, and where its trace (if any) was captured."""

    label: str
    kind: str  # "workload" or "call"
    target: str  # the workload name or the call's module:function
    variant: dict = field(default_factory=dict)
    engine: str = "eager"
    steps: int = 3
    warmup: int = 2
    path: Path | None = None  # the stored trace it came from
    captured_on: str | None = None  # a stored trace's device, and GPU: ``cuda (NVIDIA H200)``
    cwd: str | None = None  # where a call was captured: its module imported from there
    run: object = None  # the built engine, or the function


def parse_spec(ref: str) -> tuple[str, dict[str, str]]:
    """``"decoder:kv_write=fused,engine=cudagraph"`` -> ``("decoder", {...})``; the settings
    follow the last ``:`` (``pkg.mod:WORKLOAD:k=v`` names a plugin)."""
    workload, _, settings = ref.rpartition(":")
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in settings.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise WorkbenchError(ref, f"bad setting {item!r}: write WORKLOAD:key=value,... (WORKLOAD: for its defaults)")
        out[key.strip()] = value.strip()
    if not workload:
        raise WorkbenchError(ref, "no workload before ':' (write WORKLOAD:key=value,...)")
    return workload, out


def _from_spec(ref: str, label: str, steps: int | None) -> Variant:
    from .. import engines, workloads

    workload, settings = parse_spec(ref)
    engine = engines.check_kind(settings.pop("engine", "eager"))
    return Variant(label, "workload", workload, workloads.resolve(workload, settings), engine, steps or 3)


def _from_trace(ref: str, label: str, root, steps: int | None, trust_code: bool) -> Variant:
    from .. import engines, workloads
    from ..trace.manifest import CAPTURE, ENV, capture_kind, section
    from ..trace.store import check_name, default_root, is_trace_dir, load

    path = Path(ref)
    if not is_trace_dir(path):
        check_name(ref)
        path = (Path(root) if root is not None else default_root()) / ref
        if not is_trace_dir(path):
            raise WorkbenchError(ref, f"no stored trace of that name under {path.parent}/ (bench takes stored "
                                      "traces, or WORKLOAD:key=value,...)")
    meta = load(path).meta
    cap = section(meta, CAPTURE)
    where = place(cap.get("device"), section(meta, ENV).get("gpu"))
    kind = capture_kind(meta)
    if kind == "command":
        raise WorkbenchError(ref, "a command capture ran another program: it cannot be re-timed in this process "
                                  "(bench takes workload and --call captures)")
    if kind not in ("workload", "call") or not isinstance(cap.get("workload" if kind == "workload" else "target"), str):
        what = f"a {kind} capture" if kind else "no record of how it was captured (an imported file?)"
        raise WorkbenchError(ref, f"{what}: bench re-times workload variants and --call captures only")
    target = cap["workload" if kind == "workload" else "target"]
    # Code a trace names is imported only when the user says so: a module:attribute read from
    # a manifest (a plugin workload, a call's function) may be anyone's. Workloads registered
    # by name (built in, or an installed plugin's entry point) are code the user installed.
    if ":" in target and not trust_code:
        raise WorkbenchError(ref, f"runs {target}, named by the trace: pass --trust-code (trust_code=True) to "
                                  "import and run it")
    warmup = _count(cap, "warmup", 2, ref)
    if kind == "call":
        return Variant(label, kind, target, warmup=warmup, path=path, captured_on=where,
                       cwd=cap.get("cwd") if isinstance(cap.get("cwd"), str) else None)
    variant = cap.get("variant") if isinstance(cap.get("variant"), dict) else {}
    try:
        variant = workloads.resolve(target, variant)
    except TypeError as e:  # a value of a type no option takes (a list, an object)
        raise WorkbenchError(ref, f"bad variant in the manifest: {e}") from None
    engine = engines.check_kind(str(cap.get("engine", "eager")))
    return Variant(label, kind, target, variant, engine, steps or _count(cap, "steps", 3, ref), warmup, path, where)


def _count(cap: dict, key: str, default: int, ref: str) -> int:
    """A positive whole number of the manifest's capture section (``default`` when absent)."""
    value = cap.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WorkbenchError(ref, f"bad capture.{key} in the manifest: {value!r}")
    return value


def place(device, gpu) -> str | None:
    """``cpu``, or ``cuda (GPU name)``: where samples were timed, as far as a manifest says."""
    if not isinstance(device, str):
        return None
    kind = device.split(":")[0]
    return f"{kind} ({gpu})" if kind == "cuda" and isinstance(gpu, str) and gpu else kind


def variants(refs: tuple, root, steps: int | None, store: bool, trust_code: bool) -> list[Variant]:
    """Each ref resolved, labelled as given (a stored ``Trace`` by its name; a repeat gets
    ``#2``), before anything is built."""
    if len(refs) < 2:
        raise WorkbenchError("bench", "give at least two variants: the first is compared with each other one")
    for r in refs:
        if hasattr(r, "meta") and not getattr(r, "path", None):
            raise WorkbenchError(getattr(r, "label", "trace"), "not a stored trace: bench re-times stored captures")
    # A stored Trace (what wb.capture returns) is its directory, labelled by its name.
    given = [(str(r.path), str(r.name or r.path), True) if hasattr(r, "meta") else (str(r), str(r), ":" not in str(r))
             for r in refs]
    names = [name for _, name, _ in given]
    labels = [n if n not in names[:i] else f"{n}#{names[:i].count(n) + 1}" for i, n in enumerate(names)]
    out = [_from_trace(ref, lab, root, steps, trust_code) if stored else _from_spec(ref, lab, steps)
           for (ref, _, stored), lab in zip(given, labels)]
    if len({v.kind for v in out}) > 1:
        raise WorkbenchError("bench", "workload variants (prefill, decode steps) and calls time different things: "
                                      "bench one kind at a time")
    stored = [v.path.resolve() for v in out if v.path is not None]
    if store and len(set(stored)) < len(stored):
        raise WorkbenchError("bench", "a trace is given twice: --store would write its samples twice")
    return out
