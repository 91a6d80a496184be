"""Where stored traces live and what makes a directory one: the store's root, trace names,
the manifest, and a stored trace's identity (the hash of its tables)."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

from ... import settings
from ...errors import WorkbenchError
from ..compiled import FILE as COMPILED_FILE
from ..schema import TABLES


MANIFEST = "manifest.json"
# A trace set's manifest (``sets``): a directory holding one is a set, not a trace.
SET_MANIFEST = "set.json"


# 2: kernels carry range_id (format-1 traces get it derived on load).
FORMAT_VERSION = 2


# A trace or set name is a directory name on Linux, macOS and Windows alike: letters and
# digits of any script (str.isalnum) and these, a letter or digit first.
NAME_PUNCTUATION = "._+=-"
# At most this many characters, and bytes of UTF-8: a directory name holds 255 bytes, and a
# save's hidden ".tmp-<name>-xxxxxxxx" beside it adds 14.
MAX_NAME_CHARS, MAX_NAME_BYTES = 128, 200
# What Windows takes for a device, whatever follows the first dot ("nul.json" too).
_WINDOWS_DEVICES = {"con", "prn", "aux", "nul", *(f"{d}{i}" for d in ("com", "lpt") for i in range(1, 10))}
NAME_RULE = (f"use letters and digits (any script) and {' '.join(NAME_PUNCTUATION)}, a letter or digit first, at "
             f"most {MAX_NAME_CHARS} characters")


def default_root(search: bool = False) -> Path:
    """``$WORKBENCH_TRACES``, else ``./traces``. With ``search`` (for notebooks, which often
    run in ``notebooks/``): the first of ``./traces``, ``../traces`` and the ``traces/``
    beside the package (an editable checkout) that holds stored traces, resolved."""
    env = settings.read(settings.TRACES)
    if env:
        return Path(env)
    if not search:
        return Path("traces")
    beside = Path(__file__).resolve().parents[3] / "traces"
    for cand in (Path("traces"), Path("..") / "traces", beside):
        if cand.is_dir() and list_traces(cand):
            return cand.resolve()
    return Path("traces").resolve()


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a stored trace or set (None: it can): a path separator, a
    control character, ``..``, a hidden or Windows device name, or one too long."""
    if not isinstance(name, str) or not name:
        return "empty" if name == "" else f"not text: {type(name).__name__}"
    bad = next((c for c in name if not (c.isalnum() or c in NAME_PUNCTUATION)), None)
    if bad is not None:
        return f"{bad!r} is not allowed"
    if unicodedata.normalize("NFC", name) != name:
        # macOS stores names composed: "u" + U+0308 and "ü" would be one directory there.
        return "not in Unicode NFC form"
    if not name[0].isalnum():
        return f"it starts with {name[0]!r}"
    if ".." in name or name.endswith("."):
        return "'..' or a final '.' is not allowed"
    if name.split(".")[0].lower() in _WINDOWS_DEVICES:
        return "a device name on Windows"
    if len(name) > MAX_NAME_CHARS or len(name.encode()) > MAX_NAME_BYTES:
        return f"too long ({len(name)} characters, {len(name.encode())} bytes of UTF-8)"
    return None


def check_name(name: str) -> str:
    """``name``, or one line saying why it cannot name a trace (see :func:`name_problem`)."""
    problem = name_problem(name)
    if problem is not None:
        raise WorkbenchError(name, f"invalid trace name ({problem}): {NAME_RULE}")
    return name


def safe_name(text: str, fallback: str) -> str:
    """A legal trace name made from ``text`` (a file or program name): letters of any script
    kept, every other character ``_``, a letter or digit first, no ``..``, cut to the limits;
    ``fallback`` when nothing is left."""
    kept = "".join(c if c.isalnum() or c in NAME_PUNCTUATION else "_" for c in unicodedata.normalize("NFC", text))
    kept = re.sub(r"\.{2,}", ".", kept)
    kept = re.sub(r"^[\W_]+", "", kept)[:MAX_NAME_CHARS]
    while len(kept.encode()) > MAX_NAME_BYTES:
        kept = kept[:-1]
    kept = kept.rstrip(".")
    stem, dot, rest = kept.partition(".")
    if stem.lower() in _WINDOWS_DEVICES:
        kept = f"{stem}_{dot}{rest}"
    return kept if name_problem(kept) is None else fallback


def check_free(name: str, root: str | os.PathLike | None, overwrite: bool, derived_from: str | None = None) -> Path:
    """``<root>/<name>``, refused before any work where the name is bad, a trace set's, or a
    stored trace's (unless ``overwrite``). ``derived_from``: the file or program the name was
    made from, said in the refusal (two files can make one name)."""
    check_name(name)
    root = Path(root) if root is not None else default_root()
    final = root / name
    if (final / SET_MANIFEST).is_file():
        raise WorkbenchError(final, "a trace set has this name (choose another name)",
                             cli_problem="a trace set has this name (choose another --name)")
    if final.exists() and not overwrite:
        made = f"; the name was made from {derived_from!r}" if derived_from is not None else ""
        # The fix in the caller's words: a notebook re-running a cell passes overwrite=True.
        raise WorkbenchError(final, f"a trace with this name exists{made} (choose another name, or pass "
                                    "overwrite=True to replace it)",
                             cli_problem=f"a trace with this name exists{made} (choose another --name, or replace "
                                         "it with --force)")
    return final


def is_trace_dir(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def content_hash(path: Path) -> str:
    """SHA-256 over the table files of a stored trace, in table order: its identity.

    Only the tables: a raw capture kept under ``raw/`` is not part of it, so a trace imported
    with ``--keep-raw`` and without it has the same hash (reports list traces by it)."""
    h = hashlib.sha256()
    # The compiler's call sites are part of a trace that has them (and only of those).
    for t in [*TABLES, *(["compiled"] if (path / COMPILED_FILE).is_file() else [])]:
        f = path / f"{t}.parquet"
        h.update(t.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def list_traces(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the stored traces under ``root``, sorted."""
    root = Path(root) if root is not None else default_root()
    if not root.is_dir():
        return []
    # Only names ``check_name`` accepts: a directory someone made by hand called "\x1b[31m"
    # (a terminal escape) or "a b" is not a trace the workbench stored and is not listed.
    return sorted(p.name for p in root.iterdir() if name_problem(p.name) is None and is_trace_dir(p))
