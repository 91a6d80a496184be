#!/usr/bin/env bash
# Regenerate the example reports from committed traces and committed sweep results only.
# Same inputs -> byte-identical files; `git diff --exit-code reports/` after running this
# shows whether the committed reports are current.
set -euo pipefail
cd "$(dirname "$0")/.."
WB=${WB:-.venv/bin/workbench}
[ -x "$WB" ] || WB=workbench
export WORKBENCH_TRACES=traces

# Case 1: KV write fusion on the H200, eager engine, Nsight Systems captures.
$WB report h200-kvwrite-unfused-eager-nsys h200-kvwrite-fused-eager-nsys \
    --title "KV write fusion: unfused vs fused kv_write (H200, eager, Nsight Systems)" \
    -o reports/fusion.html --md reports/fusion.md

# Case 1 again with CUDA graphs, where the decode step is launch-bound no more.
$WB report h200-kvwrite-unfused-cudagraph-nsys h200-kvwrite-fused-cudagraph-nsys \
    --title "KV write fusion under CUDA graphs (H200, Nsight Systems)" \
    -o reports/fusion-cudagraph.html --md reports/fusion-cudagraph.md

# Case 2: KV cache bucketing at 512 cached rows (eager: per-layer attention ranges), plus the
# sweep over context lengths (eager and CUDA-graph decode latency, attention time per layer).
$WB report h200-cache-full-ctx512-eager-torch h200-cache-bucketed-ctx512-eager-torch \
    --sweep benchmarks/results/h200_live.json \
    --title "KV cache bucketing: full vs bucketed attention at 512 cached rows, and the context sweep (H200)" \
    -o reports/bucketing.html --md reports/bucketing.md

# A transformers model nobody here wrote: the hf workload at a Llama-3.2-1B shape, eager vs sdpa
# attention, per layer from its module ranges (benchmarks/h200_hf.sh).
$WB report h200-hf-attn-eager-static-nsys h200-hf-attn-sdpa-static-nsys \
    --title "HF Llama (1B shape): eager vs sdpa attention, per layer (H200, Nsight Systems)" \
    -o reports/hf-attention.html --md reports/hf-attention.md
