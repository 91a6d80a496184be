"""What a report, a diff or a display calls the work it counts, chosen once from the traces' own
record (here in the trace layer, since it reads only the manifest: analysis displays word
themselves with it as reports do).

A GPU capture's kernel table holds kernels, timed on the device; a CPU-only capture's holds its
top-level CPU ops (``source.work_units == "cpu_op"``), timed on threads; a TensorRT engine's
profile holds its layers (``trt_layer``), each timed by trtexec's per-layer profile on a
timeline of one average inference, so not device work this report can find busy. Every heading, row
label, note and figure caption of a report takes its words from :func:`words`, so a CPU trace is
never described as GPU work, and only device work gets a busy fraction.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trace.manifest import work_units


@dataclass(frozen=True)
class Words:
    unit: str  # one work unit: "kernel"
    units: str  # "kernels"
    launches: str  # what a step issues: "kernel launches"
    time: str  # their summed duration: "GPU time"
    lane: str  # where they run side by side: "stream"
    device: bool  # the units are device work: busy time and a host/launch-bound label apply

    @property
    def Unit(self) -> str:  # noqa: N802 - the capitalized form, for the start of a title
        return self.unit[:1].upper() + self.unit[1:]

    @property
    def Units(self) -> str:  # noqa: N802
        return self.units[:1].upper() + self.units[1:]

    @property
    def Launches(self) -> str:  # noqa: N802
        return self.launches[:1].upper() + self.launches[1:]


GPU = Words("kernel", "kernels", "kernel launches", "GPU time", "stream", True)
CPU = Words("CPU op", "CPU ops", "CPU ops", "CPU op time", "thread", False)
TRT_LAYER = Words("layer", "layers", "layers", "layer time (profile)", "thread", False)
_BY_UNIT = {"kernel": GPU, "cpu_op": CPU, "trt_layer": TRT_LAYER}


def trace_words(meta: dict) -> Words:
    """The words for one trace, from its manifest's ``source.work_units``."""
    return unit_words(work_units(meta))


def unit_words(unit: str) -> Words:
    """The words for work units of kind ``unit`` (``kernel``, ``cpu_op``, ``trt_layer``, ...:
    :func:`~workbench.trace.manifest.work_units`)."""
    if unit in _BY_UNIT:
        return _BY_UNIT[unit]
    name = unit.replace("_", " ")
    return Words(name, f"{name}s", f"{name}s", f"{name} time", "thread", False)


def words(metas) -> Words:
    """The words for traces with these manifests: :func:`joined` of each one's."""
    return joined(trace_words(m) for m in metas)


def joined(each) -> Words:
    """One set of words for several traces' (``each``): theirs when they agree, else both
    spelled out (``kernel/CPU op``), with no device claim."""
    found = []
    for w in each:
        if w not in found:
            found.append(w)
    if len(found) == 1:
        return found[0]
    found.sort(key=lambda w: (not w.device, w.unit))

    def join(attr: str) -> str:
        return "/".join(getattr(w, attr) for w in found)

    return Words(join("unit"), join("units"), join("launches"), join("time"), join("lane"), False)
