"""Each range's path: the names from its root down, joined by "/"."""

from __future__ import annotations

import numpy as np
import pandas as pd


# A path longer than this keeps its first and last PATH_MAX/2 characters around "/…/", so a
# 10,000-deep nesting or a 50 MB range name costs bounded memory per range (not O(depth)).
PATH_MAX = 1024


def _clip(paths: np.ndarray) -> np.ndarray:
    long = np.flatnonzero(np.fromiter(map(len, paths), dtype=np.int64, count=len(paths)) > PATH_MAX)
    if len(long):
        half = PATH_MAX // 2 - 2
        paths = paths.copy()
        paths[long] = [p[:half] + "/…/" + p[-half:] for p in paths[long]]
    return paths


def range_paths(names: pd.Series, parent: np.ndarray, depth: np.ndarray):
    """Each range's path, level by level (a level only reads the finished level above it),
    joined by Arrow: no Python string per range until a path needs clipping."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cats = _clip(np.asarray(names.cat.categories.astype(str), dtype=object))
    codes = names.cat.codes.to_numpy()
    own = pc.take(pa.array(np.append(cats, ""), pa.large_string()), np.where(codes >= 0, codes, len(cats)))
    order = np.argsort(depth, kind="stable")
    cuts = np.flatnonzero(np.diff(depth[order])) + 1
    at = np.empty(len(depth), dtype=np.int64)  # each range's place in its level
    levels = []
    for level in np.split(order, cuts):
        at[level] = np.arange(len(level))
        mine = pc.take(own, level)
        if depth[level[0]] > 0:
            mine = pc.binary_join_element_wise(pc.take(levels[-1], at[parent[level]]), mine, pa.scalar("/", pa.large_string()))
            if pc.max(pc.utf8_length(mine)).as_py() > PATH_MAX:
                mine = pa.array(_clip(np.asarray(mine.to_pylist(), dtype=object)), pa.large_string())
        levels.append(mine)
    inverse = np.empty(len(depth), dtype=np.int64)
    inverse[order] = np.arange(len(depth))
    return pd.array(pc.take(pa.chunked_array(levels, pa.large_string()), inverse), dtype="string")
