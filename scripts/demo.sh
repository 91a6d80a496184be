#!/usr/bin/env bash
# Set up, then run the main job: summarize and diff the committed traces, capture the reference
# decoder (on the GPU when there is one, else on the CPU) and write a report under out/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/workbench demo --sweep benchmarks/results/h200_live.json "$@"
