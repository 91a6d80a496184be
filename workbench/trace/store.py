"""The trace store: ``traces/<name>/`` holds one Parquet file per table and ``manifest.json``.

Writes are atomic: a trace is assembled in a hidden temporary directory beside its final
place and renamed into it, so a reader (or a crash, or ``kill -9``) sees the complete new
trace or nothing. Replacing a trace renames the old one away first and deletes it last.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..errors import WorkbenchError
from .model import SCHEMA, TABLES, Trace

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")


def default_root() -> Path:
    """``$WORKBENCH_TRACES`` or ``./traces``."""
    return Path(os.environ.get("WORKBENCH_TRACES", "traces"))


def check_name(name: str) -> str:
    """Reject names that could escape the store or hide files (``..``, ``/``, leading dot)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise WorkbenchError(
            name, "invalid trace name: use letters, digits and . _ + = - (no path separators, no leading dot, at most 128)"
        )
    return name


def is_trace_dir(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def _json_default(o: Any):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def content_hash(path: Path) -> str:
    """SHA-256 over the table files of a stored trace, in table order: its identity."""
    h = hashlib.sha256()
    for t in TABLES:
        f = path / f"{t}.parquet"
        h.update(t.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def save(trace: Trace, name: str, root: str | os.PathLike | None = None, *, overwrite: bool = False) -> Path:
    """Store ``trace`` as ``<root>/<name>/`` atomically and return that directory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_name(name)
    root = Path(root) if root is not None else default_root()
    final = root / name
    try:
        root.mkdir(parents=True, exist_ok=True)
        if final.exists() and not overwrite:
            raise WorkbenchError(final, "a trace with this name exists (choose another --name, or overwrite)")
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root))
    except OSError as e:
        raise WorkbenchError(root, f"cannot write to the trace store: {e.strerror or e}") from None
    try:
        for t in TABLES:
            table = pa.Table.from_pandas(trace.tables[t][list(SCHEMA[t])], preserve_index=False)
            # Fixed writer settings keep files byte-identical for identical tables.
            pq.write_table(table, tmp / f"{t}.parquet", compression="zstd", write_statistics=True)
        meta = dict(trace.meta)
        meta["name"] = name
        meta["format_version"] = FORMAT_VERSION
        meta["counts"] = {t: int(len(trace.tables[t])) for t in TABLES}
        meta["content_sha256"] = content_hash(tmp)
        with open(tmp / MANIFEST, "w") as fh:
            json.dump(meta, fh, indent=2, sort_keys=True, default=_json_default)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        _publish(tmp, final, overwrite)
    except OSError as e:  # disk full, permissions, a vanished directory: nothing is published
        shutil.rmtree(tmp, ignore_errors=True)
        raise WorkbenchError(final, f"cannot store trace: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    trace.name, trace.path, trace.meta = name, str(final), meta
    return final


def _publish(tmp: Path, final: Path, overwrite: bool) -> None:
    if not overwrite:
        try:
            os.rename(tmp, final)  # fails if another writer got there first: no clobbering
        except OSError:
            raise WorkbenchError(final, "a trace with this name exists (another writer stored it first)") from None
        return
    # Replace: swap the new directory with the old one in one atomic step (Linux renameat2
    # RENAME_EXCHANGE), so a kill at any point leaves the old or the new trace at ``final``,
    # never neither. Concurrent replacers each swap in turn; the last one's trace stays.
    for _ in range(100):
        swapped = _exchange(tmp, final)
        if swapped:
            shutil.rmtree(tmp, ignore_errors=True)  # now holds the old trace
            return
        if swapped is None:  # no renameat2 here: move the old trace aside, then rename
            old = Path(tempfile.mkdtemp(prefix=f".old-{final.name}-", dir=final.parent))
            try:
                os.rename(final, old / "trace")
            except FileNotFoundError:
                pass
        try:
            os.rename(tmp, final)
            if swapped is None:
                shutil.rmtree(old, ignore_errors=True)
            return
        except OSError as e:
            if swapped is None:
                shutil.rmtree(old, ignore_errors=True)
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            # another writer published between our two steps: swap with theirs
    raise WorkbenchError(final, "could not replace the trace: other writers keep replacing it")


def _exchange(a: Path, b: Path) -> bool | None:
    """Atomically swap two paths. True: swapped; False: ``b`` does not exist; None: unsupported."""
    global _renameat2
    if _renameat2 is None:
        try:
            import ctypes

            _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError):
            _renameat2 = False
    if _renameat2 is False:
        return None
    import ctypes

    at_fdcwd, rename_exchange = -100, 2
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        return False
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return None
    raise OSError(err, os.strerror(err), os.fspath(b))


_renameat2 = None


def load(path: str | os.PathLike) -> Trace:
    """Open a stored trace directory."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_dir():
        raise WorkbenchError(path, "not a directory")
    man = path / MANIFEST
    if not man.is_file():
        raise WorkbenchError(path, "not a trace directory (no manifest.json)")
    try:
        meta = json.loads(man.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise WorkbenchError(man, f"unreadable manifest: {e}") from None
    if not isinstance(meta, dict):
        raise WorkbenchError(man, "manifest is not a JSON object")
    tables = {}
    for t in TABLES:
        f = path / f"{t}.parquet"
        try:
            df = pq.read_table(f).to_pandas()
        except FileNotFoundError:
            raise WorkbenchError(path, f"trace is missing {t}.parquet") from None
        except Exception as e:  # pyarrow raises several types for damaged files
            raise WorkbenchError(f, f"damaged table: {str(e).splitlines()[0]}") from None
        missing = [c for c in SCHEMA[t] if c not in df]
        if missing:
            raise WorkbenchError(f, f"table lacks column(s) {', '.join(missing)}")
        if "path" in df:
            df["path"] = df["path"].astype("string")
        tables[t] = _checked(t, df, f)
    if not isinstance(meta.get("source", {}), dict):
        raise WorkbenchError(man, "manifest field 'source' is not an object")
    _check_tree(tables["ranges"], path / "ranges.parquet")
    return Trace(tables, meta, name=meta.get("name", path.name), path=str(path))


def _checked(table: str, df, f: Path):
    """A stored table has the types an import gives it; one edited on disk is re-typed (or
    refused: a NULL time, a name that is a number) before analysis sees it."""
    import numpy as np
    import pandas as pd

    def ok(col, dtype):
        s = df[col]
        if dtype == "category":
            return isinstance(s.dtype, pd.CategoricalDtype)
        if dtype == "string":
            return s.dtype == "string"
        return s.dtype == np.dtype(dtype)

    if all(ok(c, d) for c, d in SCHEMA[table].items()):
        return df
    from .model import _typed

    return _typed(table, df, str(f))


def _check_tree(r, f: Path) -> None:
    """The range tree as ``build`` derives it: ids 0..n-1, sorted by (pid, tid, start) per
    thread, parents in range, depth = parent's depth + 1 (so no cycles). Analysis relies on
    all of it; a crafted file that breaks it would index out of bounds or loop forever."""
    import numpy as np

    n = len(r)
    if not n:
        return
    idx = np.arange(n)
    parent, depth = r["parent"].to_numpy(), r["depth"].to_numpy()
    p, t, s = r["pid"].to_numpy(), r["tid"].to_numpy(), r["start"].to_numpy()
    good = bool((r["id"].to_numpy() == idx).all() and ((parent >= -1) & (parent < n) & (parent != idx)).all())
    if good:
        has = parent >= 0
        good = bool((depth[~has] == 0).all() and (depth[has] == depth[parent[has]] + 1).all())
    if good:
        same_p, same_t = p[1:] == p[:-1], t[1:] == t[:-1]
        good = bool(((p[1:] > p[:-1]) | (same_p & ((t[1:] > t[:-1]) | (same_t & (s[1:] >= s[:-1]))))).all())
    if not good:
        raise WorkbenchError(f, "damaged table: the range tree (id, parent, depth or order) is inconsistent")


def list_traces(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the stored traces under ``root``, sorted."""
    root = Path(root) if root is not None else default_root()
    if not root.is_dir():
        return []
    # Only names ``check_name`` accepts: a directory someone made by hand called "\x1b[31m"
    # (a terminal escape) or "a b" is not a trace the workbench stored and is not listed.
    return sorted(p.name for p in root.iterdir() if _NAME.fullmatch(p.name) and ".." not in p.name and is_trace_dir(p))
