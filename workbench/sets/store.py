"""Trace sets in the store: ``<root>/<set>/set.json`` (the set's manifest: its members and
their roles) beside the members, each an ordinary stored trace ``<root>/<set>/<member>/``.

A set is written whole in a hidden directory beside its final place and renamed into it, as a
trace is (``write``): a reader sees every member or no set, and a failed import leaves
nothing. ``list_traces`` does not list a set (it has no ``manifest.json``); ``open_trace``
opens a member by its directory.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import WorkbenchError
from ..trace.store.layout import SET_MANIFEST, check_name, default_root, is_trace_dir, list_traces
from ..trace.manifest import STORED_AT
from ..trace.store.write import TMP_PREFIX, dump_manifest, publish_dir, stored_now, sweep_unfinished

SET_FORMAT = 1
# What each member is in the job: its rank, its rank on its host, the host, the run it is a
# part of (one nightly run, one benchmark repetition) and the variant it ran.
ROLES = ("rank", "local_rank", "host", "run_id", "variant")


def is_set_dir(path: Path) -> bool:
    return path.is_dir() and (path / SET_MANIFEST).is_file()


def list_sets(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the trace sets under ``root``, sorted."""
    root = Path(root) if root is not None else default_root()
    if not root.is_dir():
        return []
    names = []
    for p in root.iterdir():
        try:
            check_name(p.name)
        except WorkbenchError:  # a hand-made directory, as list_traces skips it
            continue
        if is_set_dir(p):
            names.append(p.name)
    return sorted(names)


def set_rows(root: str | os.PathLike | None = None) -> list[dict]:
    """A row per stored set, as ``trace.store.listing`` gives a trace's: kind ``set``, its
    members' size together, and the job's command line or the files it was imported from."""
    from ..trace.store.listing import stored_row

    root = Path(root) if root is not None else default_root()
    rows = []
    for name in list_sets(root):
        try:
            meta = json.loads((root / name / SET_MANIFEST).read_text())
        except (OSError, UnicodeDecodeError, ValueError):  # listed all the same, with what is known
            meta = {}
        meta = meta if isinstance(meta, dict) else {}
        line = (meta.get("capture") or {}).get("command_line") if isinstance(meta.get("capture"), dict) else None
        files = [Path(str(s)).name for s in meta.get("sources") or []] if isinstance(meta.get("sources"), list) else []
        source = str(line) if line else f"import {files[0]}" + (f" +{len(files) - 1} more" if len(files) > 1 else "") \
            if files else ""
        rows.append(stored_row(root / name, meta, kind="set", source=source))
    return rows


def set_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """A stored set's directory, from its name or its path; raises if there is none."""
    p = Path(name)
    if is_set_dir(p):
        return p
    if os.sep in str(name):
        raise WorkbenchError(name, "not a trace set directory (no set.json)")
    stored = Path(root) if root is not None else default_root()
    check_name(name)
    if not is_set_dir(stored / name):
        raise WorkbenchError(name, f"no trace set of that name under {stored}/")
    return stored / name


def find_set(name: str | os.PathLike, root: str | os.PathLike | None = None) -> Path | None:
    """The set ``name`` names (as :func:`set_dir` finds it), None where it names none."""
    try:
        return set_dir(os.fspath(name), root)
    except WorkbenchError:
        return None


def read_set(path: Path) -> dict:
    """A set's manifest, checked: its members are listed with every role, and stored."""
    man = path / SET_MANIFEST
    try:
        meta = json.loads(man.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise WorkbenchError(man, f"unreadable set manifest: {e}") from None
    members = meta.get("members") if isinstance(meta, dict) else None
    if not isinstance(members, list) or not all(isinstance(m, dict) for m in members):
        raise WorkbenchError(man, "set manifest has no list of members")
    stored = set(list_traces(path))
    for m in members:
        if not all(k in m for k in ("member", *ROLES)):
            raise WorkbenchError(man, f"a member lacks one of the fields member, {', '.join(ROLES)}")
        if m["member"] not in stored:
            raise WorkbenchError(path / str(m["member"]), "a member of the set is missing from its directory")
    return meta


def new_set_dir(name: str, root: str | os.PathLike | None, overwrite: bool) -> tuple[Path, Path]:
    """A hidden directory to write the set ``name`` in, and the set's final place; refuses a
    set or trace of that name unless ``overwrite`` (and then only a set)."""
    check_name(name)
    root = Path(root) if root is not None else default_root()
    final = root / name
    if is_trace_dir(final):
        raise WorkbenchError(final, "a trace with this name exists (choose another name)",
                             cli_problem="a trace with this name exists (choose another --set NAME)")
    if final.exists() and not overwrite:
        raise WorkbenchError(final, "a trace set with this name exists (choose another name, or pass overwrite=True "
                                    "to replace it)",
                             cli_problem="a trace set with this name exists (choose another --set NAME, or replace "
                                         "it with --force)")
    try:
        root.mkdir(parents=True, exist_ok=True)
        sweep_unfinished(root)
        return Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{name}-", dir=root)).resolve(), final
    except OSError as e:
        raise WorkbenchError(root, f"cannot write to the trace store: {e.strerror or e}") from None


def publish_set(tmp: Path, final: Path, meta: dict, overwrite: bool) -> Path:
    """Write ``meta`` as the set manifest in ``tmp`` and rename ``tmp`` into ``final`` (swapped
    with the old set where ``overwrite``); ``tmp`` is removed if that fails."""
    try:
        with open(tmp / SET_MANIFEST, "w") as fh:
            dump_manifest({**meta, "format_version": SET_FORMAT, "name": final.name, STORED_AT: stored_now()}, fh)
        publish_dir(tmp, final, overwrite)
    except OSError as e:
        discard(tmp)
        raise WorkbenchError(final, f"cannot store trace set: {e.strerror or e}") from None
    except BaseException:
        discard(tmp)
        raise
    return final


def discard(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
