"""An ``.nsys-rep`` read through the SQLite export that ``nsys export`` writes of it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ....errors import TraceFormatError, WorkbenchError


@contextmanager
def exported(path: Path) -> Iterator[Path]:
    """The SQLite export of the report at ``path``, written by the Nsight Systems CLI (which
    must be on PATH) to a private temp directory, removed when the block ends."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise WorkbenchError(
            path, "an .nsys-rep needs the Nsight Systems CLI: 'nsys' is not on PATH "
            "(install Nsight Systems, or export it elsewhere with 'nsys export --type sqlite' and import the .sqlite)"
        )
    with tempfile.TemporaryDirectory(prefix="workbench-nsys-") as tmp:
        out = Path(tmp) / "export.sqlite"
        proc = subprocess.run(
            [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out), str(path)],
            capture_output=True, text=True,
        )
        if proc.returncode != 0 or not out.exists():
            msg = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise TraceFormatError(path, f"nsys export failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
        yield out
