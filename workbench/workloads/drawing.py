"""How figures and reports draw a workload's traces (:class:`Presentation`). Plain data: the
views read it without importing any workload."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class PairSpec:
    """How to find a workload's default A/B pair among stored traces: two trace names that
    differ only by the word ``a`` -> ``b`` and hold every word of ``tokens`` (see
    :func:`workbench.viz.find_pair`, which takes these fields as its arguments)."""

    a: str
    b: str
    tokens: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # words a trace of the pair must not hold
    prefer: tuple[str, ...] = ()  # among several pairs, the one whose names hold most of these


@dataclass(frozen=True)
class Presentation:
    """What figures and reports ask a workload; every field may stay empty.

    * ``regions``: range names the workload opens inside a layer, in execution order; a
      timeline fills these ranges with their colour and leaves other ranges grey.
    * ``colors``: region name or variant value -> CSS colour. A trace label is coloured by the
      variant values (keys that are not regions) it holds as words, the first in this order
      when it holds several (``ref-h200-kvwrite-fused-cache-bucketed``).
    * ``default_pair``: the A/B pair a diff widget opens with when given no traces.
    """

    regions: tuple[str, ...] = ()
    colors: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    default_pair: PairSpec | None = None


NO_PRESENTATION = Presentation()
