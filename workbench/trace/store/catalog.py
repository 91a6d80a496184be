"""Which stored trace to use for a case: the trace store a notebook reads, a one-line summary
of it, and the traces (or pairs of traces) whose names or captures hold given tokens.

Live captures (stored traces whose name does not start with ``ref-`` and that recorded GPU
kernels) are preferred over the committed reference traces (``ref-h200-*``); set
``WORKBENCH_PREFER_LIVE=0`` to use the reference traces only.
"""

from __future__ import annotations

import re
from pathlib import Path

from ... import settings
from ..schema import work_units
from .layout import default_root, list_traces
from .read import manifest_or_empty

REFERENCE_PREFIX = "ref-"


def traces_root() -> Path:
    """The trace store a notebook uses (see ``trace.store.default_root``, searching)."""
    return default_root(search=True)


def store_summary(root=None) -> str:
    """One line on the trace store a notebook reads: where it is and what it holds (how many
    live captures and committed references). ``wb.list_traces(root)`` lists them."""
    root = Path(root) if root is not None else traces_root()
    names = list_traces(root)
    live = sum(_is_live(n, manifest_or_empty(root / n)) for n in names)
    ref = sum(n.startswith(REFERENCE_PREFIX) for n in names)
    other = len(names) - live - ref
    prefer = "live captures preferred" if _prefer_live(None) and live else "references preferred"
    return (f"trace store {root}: {len(names)} traces ({live} live captures, {ref} {REFERENCE_PREFIX}* references"
            f"{f', {other} other' if other else ''}); {prefer}")


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


def _variant_tokens(meta: dict) -> set[str]:
    v = (meta.get("capture") or {}).get("variant") or meta.get("variant") or {}
    out: set[str] = set()
    if isinstance(v, dict):
        for key, val in v.items():  # {"kv_write": "fused"} -> kvwrite, fused
            out |= _tokens(str(val)) | {str(key).replace("_", "").lower()}
    return out


def _is_live(name: str, meta: dict) -> bool:
    if name.startswith(REFERENCE_PREFIX):
        return False
    counts = meta.get("counts") or {}
    return int(counts.get("kernels", 0) or 0) > 0 and work_units(meta) == "kernel"


def _catalog(root: Path, tokens, exclude) -> tuple[list[tuple[str, set]], list[tuple[str, set]]]:
    """(live, reference) traces whose name or capture (variant values and keys, backend,
    engine) holds every token and none of ``exclude``, each with its name's tokens."""
    want = {t.lower() for t in tokens}
    avoid = {t.lower() for t in exclude}
    live, ref = [], []
    for name in list_traces(root):
        meta = manifest_or_empty(root / name)
        cap = meta.get("capture") or {}
        own = _tokens(name)
        have = own | _variant_tokens(meta) | _tokens(str(cap.get("backend", ""))) | _tokens(str(cap.get("engine", "")))
        if not want <= have or (avoid & have):
            continue
        if _is_live(name, meta):
            live.append((name, own))
        elif name.startswith(REFERENCE_PREFIX):
            ref.append((name, own))
    return live, ref


def _prefer_live(prefer_live: bool | None) -> bool:
    if prefer_live is None:
        return settings.flag(settings.PREFER_LIVE)
    return prefer_live


def find_trace(*tokens: str, root=None, prefer_live: bool | None = None, exclude: tuple[str, ...] = (),
               prefer: tuple[str, ...] = ()) -> str | None:
    """Name of the stored trace for a case: its name (split at non-alphanumerics) or its
    captured variant, backend or engine holds every token in ``tokens`` and none in ``exclude``.

    ``find_trace("kvwrite", "unfused", "nsys")`` -> ``ref-h200-kvwrite-unfused-nsys`` unless a
    live capture matches. Among several matches, the one whose *name* holds most of
    ``tokens`` + ``prefer`` wins, then the last by name. None when nothing matches.
    """
    root = Path(root) if root is not None else traces_root()
    live, ref = _catalog(root, tokens, exclude)
    pool = (live or ref) if _prefer_live(prefer_live) else (ref or live)
    if not pool:
        return None
    ranked = {t.lower() for t in tokens} | {t.lower() for t in prefer}
    return max(pool, key=lambda x: (len(ranked & x[1]), len({t.lower() for t in prefer} & x[1]), x[0]))[0]


def find_pair(a: str, b: str, *tokens: str, root=None, prefer_live: bool | None = None,
              exclude: tuple[str, ...] = (), prefer: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """Two stored traces that differ only by ``a`` -> ``b`` in their names (the same capture
    otherwise), both holding ``tokens`` and none of ``exclude``: ``find_pair("unfused",
    "fused", "kvwrite")`` -> (``h200-kvwrite-unfused-eager-nsys``, ``h200-kvwrite-fused-eager-nsys``)
    or the reference pair. Live pairs first (unless ``prefer_live`` is False); among several,
    the one whose names hold most ``prefer`` tokens, then the last by name."""
    root = Path(root) if root is not None else traces_root()
    live, ref = _catalog(root, tokens, exclude)
    names = set(list_traces(root))
    rx = re.compile(rf"(?<![a-z0-9]){re.escape(a.lower())}(?![a-z0-9])")

    def pairs(pool):
        out = []
        for name, own in pool:
            if a.lower() not in own:
                continue
            other = rx.sub(b.lower(), name.lower())
            match = next((n for n in names if n.lower() == other), None)
            if match is not None and match != name:
                out.append((name, match, own))
        return out

    lp, rp = pairs(live), pairs(ref)
    pool = (lp or rp) if _prefer_live(prefer_live) else (rp or lp)
    if not pool:
        return None
    pref = {t.lower() for t in prefer}
    best = max(pool, key=lambda x: (len(pref & x[2]), x[0]))
    return best[0], best[1]
