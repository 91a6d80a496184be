"""Storing a trace: one Parquet file per table and ``manifest.json`` under ``<root>/<name>/``.

Writes are atomic: a trace is assembled in a hidden temporary directory beside its final
place and renamed into it, so a reader (or a crash, or ``kill -9``) sees the complete new
trace or nothing. Replacing a trace swaps the new directory with the old one and deletes the
old one last. The hidden directory a killed writer leaves behind is removed by a later save
once it is an hour old.

The store is the only writer of manifest files: a stored trace's manifest alone is changed
with :func:`replace_manifest` (``workbench bench --store``, a set member's roles).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import WorkbenchError
from ..manifest import COUNTS, CONTENT_SHA256, NAME, STORED_AT
from ..options import DEFAULT, ImportOptions
from ..compiled import COLUMNS as COMPILED_COLUMNS, FILE as COMPILED_FILE
from ..schema import SCHEMA, TABLES, Trace
from .layout import FORMAT_VERSION, MANIFEST, check_free, content_hash, default_root
from .raw import RAW, check_raw, store_raw


# Hidden directories of a save: the trace being written, and the old one moved aside to be
# deleted where a replace cannot swap the two in one step.
TMP_PREFIX, _OLD = ".tmp-", ".old-"
_STALE_S = 3600


def _json_default(o: Any):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def stored_now() -> str:
    """This moment as a manifest's ``stored_at``: UTC, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def dump_manifest(meta: dict, fh) -> None:
    """Write ``meta`` to the open file ``fh`` as every manifest is written (indented, keys
    sorted, a final newline) and flush it to disk."""
    json.dump(meta, fh, indent=2, sort_keys=True, default=_json_default)
    fh.write("\n")
    fh.flush()
    os.fsync(fh.fileno())


def save(trace: Trace, name: str, root: str | os.PathLike | None = None, *, overwrite: bool = False,
         options: ImportOptions = DEFAULT, raw: Sequence[str | os.PathLike] | None = None) -> Path:
    """Store ``trace`` as ``<root>/<name>/`` atomically and return that directory (the tables
    written by ``options``' threads).

    ``raw``: the original capture's files, kept under ``raw/`` in the same atomic step (see
    ``store.raw``); without it a trace is stored without them, even one loaded with some.
    """
    raw = check_raw(raw) if raw is not None else []
    root = Path(root) if root is not None else default_root()
    try:
        final = check_free(name, root, overwrite)
        root.mkdir(parents=True, exist_ok=True)
        sweep_unfinished(root)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{name}-", dir=root))
    except OSError as e:
        raise WorkbenchError(root, f"cannot write to the trace store: {e.strerror or e}") from None
    try:
        # Two tables at a time (Arrow writes without the GIL): the kernels' and the API
        # calls' are the largest, of about the same size.
        with options.pool(2, "workbench-save") as pool:
            for done in [pool.submit(_write_table, trace.tables[t][list(SCHEMA[t])], tmp / f"{t}.parquet") for t in TABLES]:
                done.result()
        if trace.sites is not None and len(trace.sites):  # the compiler's call sites, where recorded
            _write_table(trace.sites[list(COMPILED_COLUMNS)], tmp / COMPILED_FILE)
        meta = dict(trace.meta)
        # A loaded trace's manifest may list raw files that this directory will not hold.
        meta.pop(RAW, None)
        if raw:
            meta[RAW] = store_raw(raw, tmp)
        meta[NAME] = name
        meta["format_version"] = FORMAT_VERSION
        meta[COUNTS] = {t: int(len(trace.tables[t])) for t in TABLES}
        meta[CONTENT_SHA256] = content_hash(tmp)
        meta[STORED_AT] = stored_now()
        with open(tmp / MANIFEST, "w") as fh:
            dump_manifest(meta, fh)
        publish_dir(tmp, final, overwrite)
    except OSError as e:  # disk full, permissions, a vanished directory: nothing is published
        shutil.rmtree(tmp, ignore_errors=True)
        raise WorkbenchError(final, f"cannot store trace: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    trace.name, trace.path, trace.meta = name, str(final), meta
    return final


def replace_manifest(path: Path, meta: dict, *, doing: str) -> None:
    """Replace the manifest of the stored trace directory ``path`` with ``meta``, whole and
    atomically: the JSON is written to a hidden file in the trace's own directory (the same
    file system), flushed to disk, then renamed over ``manifest.json``, so a reader sees the
    old manifest or the new one, never part of one. Only the manifest changes: the tables, and
    so the trace's ``content_sha256``, stay as they were. Two writers replacing one manifest
    at once each write a whole one; the later one's stays. ``doing`` names the change in the
    error a failed write raises (``store the bench samples``)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST}-", dir=path)
    except OSError as e:
        raise WorkbenchError(path, f"cannot write to the trace: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w") as fh:
            dump_manifest(meta, fh)
        # mkstemp makes the file private: the new manifest keeps the old one's permissions.
        os.chmod(tmp, stat.S_IMODE(os.stat(path / MANIFEST).st_mode))
        os.replace(tmp, path / MANIFEST)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise WorkbenchError(path / MANIFEST, f"cannot {doing}: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_table(df, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    # Integers delta-encoded: timestamps, ids and counters rise or repeat, which that encoding
    # stores in a few bits per value. Fixed writer settings keep files byte-identical for
    # identical tables.
    pq.write_table(table, path, compression="zstd", write_statistics=True,
                   use_dictionary=[c for c in table.column_names if c not in ints],
                   column_encoding=dict.fromkeys(ints, "DELTA_BINARY_PACKED"))


def sweep_unfinished(root: Path) -> None:
    """Removes what writers killed mid-save left behind (``kill -9``, a power cut): temporary
    directories untouched for longer than any save takes. A live writer's directory changes
    with every table it writes, so it is never this old."""
    now = time.time()
    for p in [*root.glob(f"{TMP_PREFIX}*"), *root.glob(f"{_OLD}*")]:
        try:
            stale = p.is_dir() and not p.is_symlink() and now - p.lstat().st_mtime > _STALE_S
        except OSError:  # gone meanwhile: another writer swept it
            continue
        if stale:
            shutil.rmtree(p, ignore_errors=True)


def publish_dir(tmp: Path, final: Path, overwrite: bool) -> None:
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
            old = Path(tempfile.mkdtemp(prefix=f"{_OLD}{final.name}-", dir=final.parent))
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


_renameat2 = None  # libc's renameat2, looked up on first use (False: there is none)


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

