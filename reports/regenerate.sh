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

# Case 2: KV cache bucketing at Phi-4-mini-like size (32 layers, 24 heads of 128, MLP 8192, vocab
# 32064, bf16) under CUDA graphs, where the GPU decides the decode step: full vs bucketed at 2048
# cached rows (per-layer attention from the graphs' capture-time ranges), plus the sweep over
# 512, 2048 and 8192 cached rows (benchmarks/h200_graphs.sh).
$WB report h200-phi4-cache-full-ctx2048-cudagraph-nsys h200-phi4-cache-bucketed-ctx2048-cudagraph-nsys \
    --sweep benchmarks/results/h200_phi4.json \
    --title "KV cache bucketing at Phi-4-mini-like size under CUDA graphs: full vs bucketed attention at 2048 cached rows, and the context sweep (H200)" \
    -o reports/bucketing.html --md reports/bucketing.md

# A transformers model nobody here wrote: the hf workload at a Llama-3.2-1B shape, eager vs sdpa
# attention, per layer from its module ranges (benchmarks/h200_hf.sh).
$WB report h200-hf-attn-eager-static-nsys h200-hf-attn-sdpa-static-nsys \
    --title "HF Llama (1B shape): eager vs sdpa attention, per layer (H200, Nsight Systems)" \
    -o reports/hf-attention.html --md reports/hf-attention.md
