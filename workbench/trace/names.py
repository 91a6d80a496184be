"""Kernel-name helpers shared by importers."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd


# Only a name's first 64 KiB is scanned: real signatures are far shorter, and a 50 MB name
# must not cost a Python loop over every character.
_SCAN_MAX = 1 << 16


@lru_cache(maxsize=65536)
def short_kernel_name(name: str) -> str:
    """Reduce a demangled kernel signature to the bare function name, as nsys's shortName does.

    ``void at::native::vectorized_elementwise_kernel<4, F>(int, F)`` -> ``vectorized_elementwise_kernel``.
    """
    s = name.strip()[:_SCAN_MAX]
    if s.startswith("void "):
        s = s[5:]
    s = s.replace("(anonymous namespace)", "anonymous_namespace")
    depth = 0
    out = []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    base = "".join(out).strip()
    base = base.rsplit("::", 1)[-1].strip()
    if " " in base:  # a return type left in front ("float2 foo")
        base = base.rsplit(" ", 1)[-1]
    return base or s[:200]


def short_names(names: pd.Series) -> pd.Categorical:
    """Short names of a categorical column of kernel names, computed once per distinct name."""
    cats = names.cat.categories
    short = np.array([short_kernel_name(str(c)) for c in cats], dtype=object)
    uniq, inverse = np.unique(short, return_inverse=True) if len(short) else (short, np.zeros(0, np.int64))
    # One gather, straight into the codes' dtype: a missing name's -1 reads the -1 put last.
    short_codes = np.append(inverse, -1).astype(code_dtype(len(uniq)))
    return pd.Categorical.from_codes(short_codes[names.cat.codes.to_numpy()], categories=uniq.astype(str))


def categorical(values) -> pd.Categorical:
    """``pd.Categorical(values)`` without first turning every element into its own string copy:
    a 50 MB name shared by 10,000 events is stored once, not 10,000 times."""
    values = np.asarray(values, dtype=object)
    try:
        codes, uniq = pd.factorize(values, sort=True)
    except TypeError:  # mixed types do not sort
        codes, uniq = pd.factorize(values, sort=False)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniq))


def code_dtype(categories: int) -> type:
    """The dtype pandas keeps a categorical's codes in, the narrowest that holds the category
    count: codes made in it are not cast once more."""
    return next((t for t in (np.int8, np.int16, np.int32) if categories < np.iinfo(t).max), np.int64)


def constant(value: str, n: int, dtype: str | None = None) -> pd.Categorical:
    """A categorical column holding one string: ``n`` codes, not ``n`` references to it."""
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([value], dtype=dtype))


def categorical_take(values, codes) -> pd.Categorical:
    """``categorical(values[codes])``, factorizing only ``values`` (say the name of each
    distinct id) instead of making one object per row."""
    values = np.asarray(values, dtype=object)
    codes = np.asarray(codes).reshape(-1)
    if all(isinstance(v, str) for v in values.tolist()):  # else the order may be first appearance in rows
        small = categorical(values)
        small_codes = small.codes[codes]
        used = np.zeros(len(small.categories), dtype=bool)
        used[small_codes] = True
        if used.all():
            return pd.Categorical.from_codes(small_codes, dtype=small.dtype)
        # Only the values rows use are categories (they stay sorted).
        kept = np.flatnonzero(used)
        remap = np.full(len(used), -1, dtype=code_dtype(len(kept)))
        remap[kept] = np.arange(len(kept))
        return pd.Categorical.from_codes(remap[small_codes], categories=small.categories[kept], validate=False)
    return categorical(values[codes])


def _template_args(name: str) -> list[str]:
    """The top-level template arguments of a demangled kernel signature's function, e.g.
    ``["(int)4", "at::native::CUDAFunctor_add<float>", ...]``; [] when it has none."""
    s = name.strip()[:_SCAN_MAX]
    depth, args, cur, started = 0, [], [], False
    for ch in s:
        if ch == "(" and depth == 0:
            if started:
                break
            continue  # a return type or cast before the function: not its template list
        if ch == "<":
            depth += 1
            if depth == 1:
                started, cur = True, []
                continue
        elif ch == ">":
            depth -= 1
            if depth == 0 and started:
                args.append("".join(cur).strip())
                return args
        elif ch == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            continue
        if depth >= 1:
            cur.append(ch)
    return args


_QUALIFIER = re.compile(r"\b[A-Za-z_]\w*::")
_NOISE = re.compile(r"\((?:int|unsigned long|long|bool)\)|\[lambda[^\]]*\]|\(anonymous namespace\)|<unnamed>"
                    r"|\bvoid |\([^()]*\)|\boperator ?|\bconst\b")


def _brief(arg: str, width: int = 40) -> str:
    """A template argument without namespaces, casts, parameter lists and lambda markers, at
    most ``width`` characters."""
    text = " ".join(_NOISE.sub("", _QUALIFIER.sub("", arg)).split()).strip(":, ")
    text = re.sub(r"(::)+", "::", text).rstrip(":")
    return text if len(text) <= width else text[: width - 1] + "…"


def display_names(names) -> list[str]:
    """A readable name per kernel name (``names``: distinct demangled signatures) that still
    tells different kernels apart: the short name where no other name has the same one, else
    the short name with the template arguments that differ among those names
    (``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>``), numbered where even they
    do not differ."""
    names = [str(n) for n in names]
    short = [short_kernel_name(n) for n in names]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(short):
        groups.setdefault(s, []).append(i)
    out = list(short)
    for s, members in groups.items():
        if len(members) < 2:
            continue
        args = [_template_args(names[i]) for i in members]
        width = max(len(a) for a in args)
        differ = [p for p in range(width) if len({a[p] if p < len(a) else None for a in args}) > 1]
        for i, a in zip(members, args):
            if differ:
                shown = [_brief(a[p]) for p in differ if p < len(a)]
                out[i] = f"{s}<{', '.join(x for x in shown if x)}>"
        # Signatures that differ only in what the brief form drops: numbered, in name order.
        seen: dict[str, int] = {}
        for i in members:
            seen[out[i]] = seen.get(out[i], 0) + 1
        counter: dict[str, int] = {}
        for i in members:
            if seen[out[i]] > 1:
                counter[out[i]] = counter.get(out[i], 0) + 1
                out[i] = f"{out[i]} #{counter[out[i]]}"
    return out
