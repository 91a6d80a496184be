#!/usr/bin/env bash
# Issue 22 on a lent H200: the built-in `hf` workload at a Llama-3.2-1B shape (16 layers,
# hidden 2048, 32 heads, 8 KV heads, MLP 8192, vocab 128256, bf16), prompt 512 in a 1024-row
# cache, captured with both backends: attn eager vs sdpa, cache dynamic vs static, engines
# eager and cudagraph (decode replayed over the static cache). One device call (the `run`
# tool), carry [".whl", ".debs"] (.whl also holds transformers and its dependencies for
# CPython 3.12; duckdb left out to keep the carry under 64 MiB):
#   bash benchmarks/h200_hf.sh
# Captures run most important first and each stored trace is tarred into $OUT at once, so a
# call cut short by its time limit still brings back what it finished. The results
# (benchmarks/results/h200_hf.{json,md}) are made from the traces afterwards, on any machine:
#   python3 benchmarks/hf_results.py traces benchmarks/results/h200_hf
# PART=eager runs only the eager-engine captures, PART=graph only the CUDA-graph ones (so the
# matrix can be split over two device calls); unset, both. SIZE=tiny runs the same matrix at CPU-test sizes (DEVICE=cpu: checking the script without a
# GPU). Every command and its output go to $OUT/commands.log.
set -u
cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then source benchmarks/h200_setup.sh; else OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"; fi
LOG="$OUT/commands.log"
source benchmarks/campaign_log.sh
if [ "${SIZE:-1b}" = tiny ]; then
    SHAPE=(--variant layers=4 --variant hidden=64 --variant heads=4 --variant kv_heads=2 --variant intermediate=128
           --variant vocab=256 --variant ctx=16 --variant max_len=64)
    RUNS=(--steps 3 --repeats 2 --warmup 1)
else
    SHAPE=(--variant layers=16 --variant hidden=2048 --variant heads=32 --variant kv_heads=8
           --variant intermediate=8192 --variant vocab=128256 --variant ctx=512 --variant max_len=1024)
    RUNS=(--steps 4 --repeats 5 --warmup 1)
fi
hf() {  # hf ATTN CACHE ENGINE BACKEND; the eager engine is left out of the name, so that
        # "eager" in it is the attention (the hf workload's default pair is attn eager -> sdpa)
    local name="h200-hf-attn-$1-$2-$3-$4"
    [ "$3" = eager ] && name="h200-hf-attn-$1-$2-$4"
    # Committed traces are kept (the tree travels with them): a campaign resumes where the
    # last call stopped. REDO=1 captures them again.
    if [ -d "traces/$name" ] && [ -z "${REDO:-}" ]; then echo "kept traces/$name" | tee -a "$LOG"; return; fi
    wb capture hf --variant arch=llama --variant "attn=$1" --variant "cache=$2" "${SHAPE[@]}" --engine "$3" \
        --backend "$4" --device "$DEVICE" "${RUNS[@]}" --name "$name" --force --quiet
    # Each trace tarred at once: a call cut short still brings back what it finished (the tool
    # returns a limited number of files, so one archive per trace).
    tar czf "$OUT/$name.tar.gz" "traces/$name" 2>/dev/null
}
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
    nsys --version | tee -a "$LOG"
fi
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)" | tee -a "$LOG"
if [ "${PART:-all}" != graph ]; then
    hf sdpa static eager nsys        # attn eager -> sdpa, both backends
    hf eager static eager nsys
    hf sdpa static eager torch
    hf eager static eager torch
    hf sdpa dynamic eager torch      # cache dynamic -> static
    [ "$DEVICE" = cuda ] && hf sdpa dynamic eager nsys
fi
if [ "${PART:-all}" != eager ] && [ "$DEVICE" = cuda ]; then
    hf sdpa static cudagraph nsys    # the fastest engine here: decode replayed from CUDA graphs
    hf sdpa static cudagraph torch
fi
wb summary h200-hf-attn-sdpa-static-nsys --by phase
wb diff h200-hf-attn-eager-static-nsys h200-hf-attn-sdpa-static-nsys --top 4
# The bad variant a user is likely to try: one line, exit 2, nothing stored.
wb capture hf --variant arch=mistral --device "$DEVICE"
du -sh traces/h200-hf-* | tee -a "$LOG"
