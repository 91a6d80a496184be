#!/usr/bin/env bash
# Create .venv (once) and install workbench with everything the demo, notebooks and tests use.
# Idempotent: a second run only checks. torch==2.13.0 resolves to the CPU wheel on local disk.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
.venv/bin/python -m pip install -q -c constraints.txt -e '.[capture,notebook,test,hf,ray,fast]' 2>&1 \
  | grep -v -e "^WARNING: Location 'file:" -e '^$' || true
.venv/bin/python -c "import workbench, torch, triton, plotly, ipywidgets, duckdb, ray" \
  || { echo "setup: installation incomplete" >&2; exit 1; }
.venv/bin/python -c "import workbench.trace.readers.nsys._sqlite_pages, workbench.trace.readers.kineto._kineto_scan" 2>/dev/null \
  || echo "setup: the C accelerators were not built (no C compiler?): imports work, slower" >&2
