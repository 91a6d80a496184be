"""Makes the profiles the C accelerators are compiled with (``workbench/trace/pgo/``).

    .venv/bin/python scripts/pgo_profiles.py [TRACE ...]

Builds the accelerators instrumented (``setup.py`` with ``WORKBENCH_PGO=generate``) in a
copy of the package,
imports the given real captures with that copy (by default the H200 reference captures and
the other tools' traces under ``../shared``: Kineto JSON and nsys exports, none of them the
generated benchmark traces), and stores the counts GCC wrote, with the GCC release and the
sources they describe. ``setup.py`` uses them only with that release and those sources; run
this again after changing a ``.c`` file (``tests/test_pgo_profiles.py`` fails until then),
then ``scripts/setup.sh`` to rebuild.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "workbench" / "trace" / "pgo"
# The accelerators' sources, each its extension module's name (as setup.py builds them).
SOURCES = {c.stem: str(c.relative_to(ROOT)) for c in sorted((ROOT / "workbench" / "trace").glob("*.c"))}
DEFAULT_TRACES = [
    *sorted((ROOT.parent / "shared" / "reference-captures" / "h200").glob("*.gz")),
    *sorted((ROOT.parent / "shared" / "external-traces").glob("*.gz")),
]
TRAIN = "import sys\nfrom workbench.trace import import_file\nfor f in sys.argv[1:]:\n    import_file(f)\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="*", type=Path, default=DEFAULT_TRACES, help="real captures to train on")
    args = ap.parse_args(argv)
    if not args.traces:
        ap.error("no traces given, and none found under ../shared")
    cc = os.environ.get("CC", "gcc")
    gcc = subprocess.run([cc, "-dumpfullversion"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="workbench-pgo-") as tmp:
        src = Path(tmp) / "src"
        # The same relative source paths as a real build: GCC checks them against the profile.
        shutil.copytree(ROOT / "workbench", src / "workbench",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "pgo"))
        for f in ("setup.py", "pyproject.toml", "README.md"):
            shutil.copy(ROOT / f, src / f)
        (src / OUT.relative_to(ROOT)).mkdir()  # where the instrumented code writes its counts
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--force", "--build-temp", "obj"],
                       cwd=src, env=dict(os.environ, WORKBENCH_PGO="generate"), check=True)
        subprocess.run([sys.executable, "-c", TRAIN, *map(str, args.traces)], cwd=src, check=True)
        OUT.mkdir(exist_ok=True)
        made = {}
        for module, source in SOURCES.items():
            shutil.copyfile(src / OUT.relative_to(ROOT) / f"{module}.gcda", OUT / f"{module}.gcda")
            made[module] = {"source": source, "sha256": hashlib.sha256((ROOT / source).read_bytes()).hexdigest()}
    (OUT / "profiles.json").write_text(json.dumps({
        "gcc": gcc,
        "made_by": "scripts/pgo_profiles.py",
        "trained_on": [p.name for p in args.traces],
        "profiles": made,
    }, indent=2) + "\n")
    print(f"profiles for GCC {gcc} in {OUT.relative_to(ROOT)}, from {len(args.traces)} traces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
