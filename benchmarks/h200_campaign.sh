#!/usr/bin/env bash
# The whole H200 campaign of issue 3 in one device call (the `run` tool of this workplace):
#   command: bash benchmarks/h200_campaign.sh      carry: [".whl", ".debs"]
# .whl holds wheels the machine lacks (nvtx, orjson, duckdb, tqdm for CPython 3.12) and .debs
# Debian's libdw1 + libelf1, without which the nsys bundled with Nsight Compute writes only a
# .qdstrm (see GPU.md). Everything produced is packed into one $OUT/h200.tar.gz.
set -u
cd "$(dirname "$0")/.."
source benchmarks/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
nsys --version
mkdir -p benchmarks/results
timeout 90 python3 benchmarks/annotate_cost.py --device cuda --out benchmarks/results/annotate_cost_h200.json 2>&1 | tee "$OUT/annotate.log"
# Budget: stop starting captures after CAMPAIGN_BUDGET_S; the hard timeout leaves time to pack.
timeout "${CAMPAIGN_TIMEOUT_S:-380}" python3 benchmarks/live_campaign.py --device cuda --prefix h200 --root traces \
    --out benchmarks/results/h200_live --budget-s "${CAMPAIGN_BUDGET_S:-300}" 2>&1 | tee "$OUT/campaign.log"
# The GPU-only tests of the live loop (skipped on CI, which has no GPU).
timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/capture/test_engines.py 2>&1 | tail -5 | tee "$OUT/gpu_tests.log"
tar czf "$OUT/h200.tar.gz" traces/h200-* benchmarks/results/h200_live.* benchmarks/results/annotate_cost_h200.json
ls -la "$OUT"
du -sh traces/h200-* | sort -h | tail -5
