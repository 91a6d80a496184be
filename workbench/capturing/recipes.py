"""Nsight Systems recipes run on a stored trace's own capture, their output kept with the trace.

``run_recipe("nvtx_gpu_proj_sum", trace)`` takes the ``.nsys-rep`` kept under the trace's
``raw/`` (``--keep-raw`` captures and imports), runs ``nsys recipe NAME --input REP --output
DIR`` on it and puts DIR at ``<trace>/recipes/NAME/`` (replacing an earlier run's), so nsys's
own numbers sit beside the workbench's (:mod:`workbench.analysis.gpu_projection` computes
``nvtx_gpu_proj_*`` from the trace and is checked against this output). The store reads
nothing under ``recipes/``: the trace's identity is its tables alone.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import WorkbenchError
from ..trace.schema import Trace
from .nsys_backend import find_nsys

RECIPES = "recipes"
# A recipe's name is a directory name of nsys's recipe package: nothing that leaves it.
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def kept_report(trace: Trace) -> Path:
    """The trace's kept ``.nsys-rep`` (gzipped in ``raw/``), or one clear error."""
    if not trace.path:
        raise WorkbenchError(trace.label, "not a stored trace: save it with its capture (--keep-raw) first")
    kept = trace.meta.get("raw")  # a list of files: see trace/store/raw.py
    kept = kept if isinstance(kept, list) else []
    reps = [e["file"] for e in kept if isinstance(e, dict) and str(e.get("source_name", "")).endswith(".nsys-rep")]
    if not reps:
        raise WorkbenchError(trace.label, "keeps no .nsys-rep to run a recipe on: capture or import it with "
                                          "--keep-raw and --backend nsys")
    return Path(trace.path) / reps[0]


def run_recipe(name: str, trace: Trace, args: list[str] | None = None) -> Path:
    """Run the nsys recipe ``name`` (extra ``args`` passed on) on the trace's kept capture and
    keep its output at ``<trace>/recipes/<name>/``; returns that directory."""
    if not _NAME.match(name):
        raise WorkbenchError(name, "not a recipe name (letters, digits and _ only)")
    rep = kept_report(trace)
    nsys = find_nsys()
    dest = Path(trace.path) / RECIPES / name
    with tempfile.TemporaryDirectory(prefix="workbench-recipe-", dir=Path(trace.path)) as tmp:
        work = Path(tmp)
        plain = work / "capture.nsys-rep"
        with gzip.open(rep, "rb") as src, open(plain, "wb") as out:
            shutil.copyfileobj(src, out)
        made = work / "out"
        done = subprocess.run([nsys, "recipe", name, "--input", str(plain), "--output", str(made), *(args or [])],
                              capture_output=True, text=True)
        if done.returncode != 0 or not made.is_dir():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise WorkbenchError(f"nsys recipe {name}", f"exit {done.returncode}: {tail[0]}")
        (made / "nsys-recipe.log").write_text(done.stdout + done.stderr)
        # Replaced whole, never merged with an earlier run's files.
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(exist_ok=True)
        made.rename(dest)
    return dest
