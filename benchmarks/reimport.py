"""Re-import stored captures from the raw file kept with them, with this revision's importer.

    python benchmarks/reimport.py traces/NAME [--as NEW_NAME] [--root traces]

A capture stored with ``--keep-raw`` holds its Kineto JSON or SQLite export under ``raw/``.
When the importer learns something (Kineto graph kernels matched to their capture, say), a
trace captured on the GPU machine with an older revision is imported again here: its tables
and what the import derives (source, attribution, graph and compiled notes) are made anew,
while what only the capture knew (capture, timing, outputs, env, stored_at) is kept, as are the
compiler's call sites. ``--as`` stores it under another name (a capture made on another GPU
than its name says). A trace whose only raw file is its ``.nsys-rep`` is exported to SQLite
again first, which needs nsys (the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# What only the capture knew: kept from the stored manifest.
KEEP = ("capture", "timing", "outputs", "env", "stored_at", "distributed")


def reimport(trace_dir: Path, name: str, root: Path) -> Path:
    from workbench.trace import import_file, save
    from workbench.trace.store import load

    old = load(trace_dir)
    kept_raw = old.meta.get("raw", [])
    reports = [e for e in kept_raw if str(e.get("file", "")).endswith((".nsys-rep", ".nsys-rep.gz"))]
    raw = [e for e in kept_raw if e not in reports] or reports
    if not raw:
        raise SystemExit(f"reimport: {trace_dir}: no raw capture kept under raw/")
    src = trace_dir / raw[0]["file"]
    with tempfile.TemporaryDirectory() as tmp:
        kept = Path(tmp) / src.name  # as stored (gzipped): the readers take it so
        shutil.copyfile(src, kept)
        if raw[0] in reports:  # exported to SQLite again: needs nsys (the GPU machine)
            from workbench.capturing.nsys_backend import export
            from workbench.trace.readers.compression import open_read

            rep = kept.with_name("capture.nsys-rep")
            with open_read(kept) as fin, open(rep, "wb") as fout:  # the project's one gzip choice
                shutil.copyfileobj(fin, fout)
            kept = export(rep, Path(tmp))
        sites = old.sites
        trace = import_file(kept, compiled=sites if sites is not None and len(sites) else None)
        for key in KEEP:
            if key in old.meta:
                trace.meta[key] = old.meta[key]
        trace.meta["source"]["file"] = raw[0]["source_name"]
        extra = [trace_dir / e["file"] for e in old.meta.get("raw", [])]
        return save(trace, name, root=root, overwrite=True, raw=extra)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path, help="a stored trace directory")
    ap.add_argument("--as", dest="name", help="store it under this name (default: its own)")
    ap.add_argument("--root", type=Path, default=REPO / "traces", help="the store to write to")
    args = ap.parse_args(argv)
    out = reimport(args.trace, args.name or args.trace.name, args.root)
    meta = json.loads((out / "manifest.json").read_text())
    print(f"{out}: {meta['counts']['kernels']} kernels, {meta['counts']['ranges']} ranges; "
          f"{(meta.get('graph_kernels') or {}).get('note', 'no CUDA-graph kernels')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
