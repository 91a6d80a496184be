"""Kernel names as the structure finder compares them: one token per kernel.

A token is the kernel's short name (template and call arguments already cut by the reader or
``trace.names.short_kernel_name``) with trailing numeric suffixes removed: the compiler numbers
the kernels it generates (``triton_red_fused_add_mean_mul_6`` in one layer, ``..._8`` in the
first), so the same work in two layers can carry two numbers. Computed once per distinct name.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..names import short_kernel_name

_SUFFIX = re.compile(r"(?:_\d+)+$")


def normalized(name: str) -> str:
    """``triton_red_fused_add_mean_mul_6`` -> ``triton_red_fused_add_mean_mul``;
    ``void f<4, F>(int)`` -> ``f``."""
    short = short_kernel_name(name)
    return _SUFFIX.sub("", short) or short


def tokens(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel of a categorical name column: its token (int64 code) and the tokens' texts."""
    cats = [normalized(str(c)) for c in names.cat.categories]
    codes, uniq = pd.factorize(np.asarray(cats + [""], dtype=object))
    per_cat = codes.astype(np.int64)
    raw = names.cat.codes.to_numpy().astype(np.int64)
    return per_cat[raw], np.asarray(uniq, dtype=object)
