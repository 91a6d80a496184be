#!/usr/bin/env bash
# Regenerate the example reports from committed traces (and committed sweep results) only.
# Same inputs -> byte-identical files; `git diff --exit-code reports/` after running this
# shows whether the committed reports are current.
set -euo pipefail
cd "$(dirname "$0")/.."
WB=${WB:-.venv/bin/workbench}
[ -x "$WB" ] || WB=workbench
export WORKBENCH_TRACES=traces

# Case 1: KV write fusion, Nsight Systems captures.
$WB report ref-h200-kvwrite-unfused-nsys ref-h200-kvwrite-fused-nsys \
    --title "KV write fusion: unfused vs fused (H200, Nsight Systems)" \
    -o reports/fusion.html --md reports/fusion.md

# Case 2: KV cache bucketing, torch.profiler captures.
$WB report ref-h200-kvwrite-fused-cache-full-torch ref-h200-kvwrite-fused-cache-bucketed-torch \
    --title "KV cache bucketing: full vs bucketed attention (H200, torch.profiler)" \
    -o reports/bucketing.html --md reports/bucketing.md
