#!/usr/bin/env bash
# Issue 22 on a lent H200: the built-in `hf` workload at a Llama-3.2-1B shape (16 layers,
# hidden 2048, 32 heads, 8 KV heads, MLP 8192, vocab 128256, bf16), prompt 512 in a 1024-row
# cache, captured with both backends: attn eager vs sdpa, cache dynamic vs static, engines
# eager, cudagraph (decode replayed over the static cache) and compile (inductor, static cache).
# Two device calls (the `run` tool), each under its 10-minute limit; carry [".whl", ".debs"]
# (.whl also holds transformers and its dependencies for CPython 3.12):
#   PART=1 bash benchmarks/h200_hf.sh     eager and cudagraph, both backends
#   PART=2 bash benchmarks/h200_hf.sh     compile, both backends; then the results of both parts
# PART=2 reads part 1's traces, so copy them back into traces/ before it (the tool copies the
# working tree, and $OUT's tarball holds them). SIZE=tiny runs the same matrix at CPU-test
# sizes (for checking the script without a GPU: DEVICE=cpu). Every command and its output go
# to $OUT/commands-$PART.log; traces to $OUT/h200-hf-$PART.tar.gz; results (PART=2) to
# benchmarks/results/h200_hf.{json,md} by benchmarks/hf_results.py.
set -u
cd "$(dirname "$0")/.."
PART=${PART:-1}
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then source benchmarks/h200_setup.sh; else OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"; fi
LOG="$OUT/commands-$PART.log"
: > "$LOG"
wb() {  # run `workbench ARGS`, log the command as a user types it, its output and exit status
    echo "\$ workbench $*" | tee -a "$LOG"
    timeout 400 python3 -m workbench "$@" 2>&1 | tee -a "$LOG"
    echo "[exit ${PIPESTATUS[0]}]" | tee -a "$LOG"
}
if [ "${SIZE:-1b}" = tiny ]; then
    SHAPE=(--variant layers=4 --variant hidden=64 --variant heads=4 --variant kv_heads=2 --variant intermediate=128
           --variant vocab=256 --variant ctx=16 --variant max_len=64)
    RUNS=(--steps 3 --repeats 2 --warmup 1)
else
    SHAPE=(--variant layers=16 --variant hidden=2048 --variant heads=32 --variant kv_heads=8
           --variant intermediate=8192 --variant vocab=128256 --variant ctx=512 --variant max_len=1024)
    RUNS=(--steps 4 --repeats 10 --warmup 2)
fi
hf() {  # hf ATTN CACHE ENGINE BACKEND
    wb capture hf --variant arch=llama --variant "attn=$1" --variant "cache=$2" "${SHAPE[@]}" --engine "$3" \
        --backend "$4" --device "$DEVICE" "${RUNS[@]}" --name "h200-hf-attn$1-$2-$3-$4" --force --quiet
}
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
    nsys --version | tee -a "$LOG"
fi
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)" | tee -a "$LOG"
if [ "$PART" = 1 ]; then
    for attn in eager sdpa; do
        for cache in dynamic static; do
            hf $attn $cache eager torch
        done
        hf $attn static cudagraph torch
    done
    if [ "$DEVICE" = cuda ]; then
        hf sdpa static eager nsys
        hf eager static eager nsys
        hf sdpa dynamic eager nsys
        hf sdpa static cudagraph nsys
    fi
    wb summary h200-hf-attnsdpa-static-eager-torch --by phase
    wb summary h200-hf-attnsdpa-static-eager-torch --by range
    wb diff h200-hf-attneager-static-eager-torch h200-hf-attnsdpa-static-eager-torch --top 6
    wb diff h200-hf-attnsdpa-dynamic-eager-torch h200-hf-attnsdpa-static-eager-torch --top 6
    # The one bad variant a user is likely to try: one line, exit 2, nothing stored.
    wb capture hf --variant arch=mistral --device "$DEVICE"
    wb capture hf --variant cache=dynamic --engine cudagraph --device "$DEVICE"
else
    hf sdpa static compile torch
    hf eager static compile torch
    [ "$DEVICE" = cuda ] && hf sdpa static compile nsys
    wb diff h200-hf-attnsdpa-static-eager-torch h200-hf-attnsdpa-static-compile-torch --top 6
    python3 benchmarks/hf_results.py traces benchmarks/results/h200_hf 2>&1 | tee -a "$LOG"
    cp benchmarks/results/h200_hf.* "$OUT"/ 2>/dev/null
fi
ls traces | grep h200-hf | tee -a "$LOG"
du -sh traces/h200-hf-* | tee -a "$LOG"
tar czf "$OUT/h200-hf-$PART.tar.gz" traces/h200-hf-*
