"""Re-import stored captures from the raw file kept with them, with this revision's importer.

    python benchmarks/reimport.py traces/NAME [--as NEW_NAME] [--root traces] [--tables]

A capture stored with ``--keep-raw`` holds its Kineto JSON or SQLite export under ``raw/``.
When the importer learns something (Kineto graph kernels matched to their capture, say), a
trace captured on the GPU machine with an older revision is imported again here: its tables
and what the import derives (source, attribution, graph and compiled notes) are made anew,
while what only the capture knew (capture, timing, outputs, env, stored_at) is kept, as are the
compiler's call sites. ``--as`` stores it under another name (a capture made on another GPU
than its name says). A trace whose only raw file is its ``.nsys-rep`` is exported to SQLite
again first, which needs nsys (the GPU machine); ``--tables`` instead builds the trace again
from its stored tables (what the import infers made anew), on any machine.
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


def rederive(trace_dir: Path, name: str, root: Path) -> Path:
    """``--tables``: the trace built again from its stored tables, so that what the import
    infers (steps and layers from the kernel stream) is this revision's: its kernels, API
    calls and copies are the import's already, and the ranges the capture recorded (a
    library's own, cub's) are read again as they were; the inferred ones are dropped and found
    anew. Not for a trace with the compiler's call sites (their ranges come from provenance:
    re-import those from raw/). No raw file or nsys needed."""
    from workbench.trace import save
    from workbench.trace.assemble import build
    from workbench.trace.options import ImportOptions
    from workbench.trace.schema import RawTables
    from workbench.trace.store import load

    old = load(trace_dir)
    if old.sites is not None and len(old.sites):
        raise SystemExit(f"reimport: {trace_dir}: --tables: the trace has the compiler's call sites; re-import it from raw/")
    recorded = old.ranges[old.ranges["domain"].astype(str) != "inferred"]
    tables = {"kernels": old.kernels.drop(columns=["range_id"]).copy(), "api": old.api.copy(),
              "ranges": recorded[["name", "start", "end", "pid", "tid", "domain"]].reset_index(drop=True),
              "memcpy": old.memcpy.copy(), "memset": old.memset.copy()}
    hint = (old.meta.get("inferred") or {}).get("hint_layers")
    trace = build(RawTables(tables, {"source": dict(old.meta["source"])}), name, ImportOptions(layers=hint))
    for key in KEEP:
        if key in old.meta:
            trace.meta[key] = old.meta[key]
    extra = [trace_dir / e["file"] for e in old.meta.get("raw", [])]
    return save(trace, name, root=root, overwrite=True, raw=extra)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path, help="a stored trace directory")
    ap.add_argument("--as", dest="name", help="store it under this name (default: its own)")
    ap.add_argument("--root", type=Path, default=REPO / "traces", help="the store to write to")
    ap.add_argument("--tables", action="store_true",
                    help="build it again from its stored tables: steps and layers inferred anew, no nsys needed")
    args = ap.parse_args(argv)
    out = (rederive if args.tables else reimport)(args.trace, args.name or args.trace.name, args.root)
    meta = json.loads((out / "manifest.json").read_text())
    print(f"{out}: {meta['counts']['kernels']} kernels, {meta['counts']['ranges']} ranges; "
          f"{(meta.get('graph_kernels') or {}).get('note', 'no CUDA-graph kernels')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
