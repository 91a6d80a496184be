#!/usr/bin/env bash
# Create .venv (once) and install workbench with everything the demo, notebooks and tests use.
# torch==2.13.0 resolves to the CPU wheel on local disk.
# Idempotent: when .venv was installed from the same pyproject.toml, setup.py, constraints.txt
# and C sources (the stamp .venv/setup.stamp) and everything imports from this checkout, a run
# only checks (seconds).
# Quiet: one line per stage. pip's whole output (setuptools' editable-install notice, pip's
# notes on file: indexes, ...) goes to .venv/setup.log; a failure prints the log's tail and path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
LOG=.venv/setup.log
STAMP=.venv/setup.stamp
START=$SECONDS

failed() {  # $1: the stage that failed; the log says why
  echo "setup: $1 failed; the end of $LOG:" >&2
  tail -n 25 "$LOG" | sed 's/^/  /' >&2
  echo "setup: full log: $PWD/$LOG" >&2
  exit 1
}

inputs() {  # what an install depends on: a change to any of these means install again
  sha256sum pyproject.toml setup.py constraints.txt $(find workbench -name '*.c' | sort)
}

installed() {  # everything the demo and tests need imports, and workbench from this checkout
  .venv/bin/python - <<'EOF'
import pathlib, sys
import workbench, torch, triton, plotly, ipywidgets, duckdb, ray  # noqa: F401
here = pathlib.Path("workbench").resolve()
sys.exit(pathlib.Path(workbench.__file__).resolve().parent != here)
EOF
}

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  out=$("$PY" -m venv .venv 2>&1) || { echo "setup: '$PY -m venv .venv' failed:" >&2; echo "$out" >&2; exit 1; }
  : >"$LOG"
  .venv/bin/python -m pip install --upgrade pip >>"$LOG" 2>&1 || failed "upgrading pip"
elif [ -f "$STAMP" ] && [ "$(inputs)" = "$(cat "$STAMP")" ] && installed >>"$LOG" 2>&1; then
  echo "setup: .venv is up to date"
  exit 0
else
  : >"$LOG"
fi

echo "setup: installing workbench and its dependencies (log: $LOG)"
.venv/bin/python -m pip install -c constraints.txt -e '.[capture,notebook,test,hf,ray,fast]' >>"$LOG" 2>&1 \
  || failed "pip install"
installed >>"$LOG" 2>&1 || failed "the import check (installation incomplete)"
.venv/bin/python -c "import workbench.trace.readers.nsys._sqlite_pages, workbench.trace.readers.kineto._kineto_scan" \
  2>/dev/null || echo "setup: the C accelerators were not built (no C compiler?): imports work, slower" >&2
inputs >"$STAMP"
echo "setup: done in $((SECONDS - START)) s"
