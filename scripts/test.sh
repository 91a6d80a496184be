#!/usr/bin/env bash
# Set up (venv, Python packages, Debian chromium for the browser tests), then run every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "test: could not install chromium; browser tests will fail" >&2
  else
    echo "test: /usr/bin/chromium missing and not root: run 'sudo apt-get install chromium'" >&2
  fi
fi
exec .venv/bin/python -m pytest -q -ra -p no:cacheprovider tests "$@"
