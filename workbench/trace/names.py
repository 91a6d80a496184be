"""Kernel-name helpers shared by importers."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd


@lru_cache(maxsize=65536)
def short_kernel_name(name: str) -> str:
    """Reduce a demangled kernel signature to the bare function name, as nsys's shortName does.

    ``void at::native::vectorized_elementwise_kernel<4, F>(int, F)`` -> ``vectorized_elementwise_kernel``.
    """
    s = name.strip()
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
    codes = names.cat.codes.to_numpy()
    return pd.Categorical.from_codes(np.where(codes >= 0, inverse[codes], -1), categories=uniq.astype(str))
