#!/usr/bin/env bash
# Set up (venv, Python packages, Debian chromium for the browser tests), then run every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
bash .ci/browser-deps || echo "test: could not install chromium; the browser tests will be skipped" >&2
exec .venv/bin/python -m pytest -q -ra -p no:cacheprovider tests "$@"
