#!/usr/bin/env bash
# Compiled and graph-replayed code on a lent H200 or H100 (issue 36; with the provenance-off window
# capture of issue 37 and the recipe outputs of issue 40). One device call per part, carry
# [".whl", ".debs"] (benchmarks/h200_setup.sh):
#   PART=hf bash benchmarks/h200_compiled.sh        # transformers' compiled generate(), nsys
#   PART=hf2 bash benchmarks/h200_compiled.sh       # the same under torch.profiler; the window
#   PART=decoder bash benchmarks/h200_compiled.sh   # the decoder's compile engine
#   PART=graphs-torch bash benchmarks/h200_compiled.sh  # CUDA graphs under torch.profiler
# PART=hf: benchmarks/user_programs/hf_compiled_generate.py (Llama-3.2-1B shape, 16 layers,
# bf16, random weights; generate() over a static cache compiles the decode step with
# mode="reduce-overhead", so each decode step is one CUDA-graph replay), attn sdpa vs eager,
# captured as a user would: `workbench capture --backend nsys|torch --modules -- python3 ...`;
# the eager twins (--no-compile); the sdpa pair again with provenance off and a
# cudaProfilerStart window around a second generate() (no graph capture in the recording);
# nsys's recipes nvtx_gpu_proj_sum/_trace and cuda_gpu_kern_sum on the eager twin's .nsys-rep,
# kept beside its trace (traces/NAME/recipes/).
# PART=decoder: `workbench capture decoder --engine compile` (decode step compiled whole under
# CUDA graphs), kv_write unfused vs fused, nsys and torch, and their eager twins on the same GPU.
# PART=graphs-torch: the graph probe (benchmarks/graph_probe.py --kineto) under torch.profiler on
# every thread, its Kineto JSON as $OUT/kineto-graph-probe.json.gz (the fixture of
# tests/analysis/test_kineto_graph_ranges.py), and the decoder's cudagraph engine, kv_write unfused
# vs fused, under torch (graphs captured again inside the recording), raw JSON kept.
# Each part's traces are tarred as they are made (the tool brings back 8 files at most).
# SIZE=tiny DEVICE=cpu checks the script without a GPU (torch backend, tiny shapes). BACKENDS=nsys
# captures with that backend alone; NO_TWINS=1 leaves the eager twins and recipes as they are.
set -u
cd "$(dirname "$0")/.."
source benchmarks/campaign_device.sh
PART=${PART:-hf}
P=${PREFIX:-$P}
LOG="$OUT/commands-$PART.log"
source benchmarks/campaign_log.sh
PROG=benchmarks/user_programs/hf_compiled_generate.py
if [ "${SIZE:-full}" = tiny ]; then
    HF=(--shape tiny --prompt 8 --new-tokens 4 --device "$DEVICE")
    DEC=(--variant layers=2 --variant heads=2 --variant head_dim=16 --variant mlp_dim=64 --variant ctx=16 --variant rows=64
         --steps 3 --repeats 2 --warmup 1)
    BACKENDS=(torch)
else
    HF=(--shape 1b --prompt 128 --new-tokens 8 --device "$DEVICE")
    DEC=(--steps 3 --repeats 30 --warmup 3)
    read -ra BACKENDS <<< "${BACKENDS:-nsys torch}"  # BACKENDS=nsys: that one alone
fi
pack() {  # pack ARCHIVE TRACE...: the traces that exist, in one archive under $OUT
    local archive=$1; shift
    local have=(); for t in "$@"; do [ -d "traces/$t" ] && have+=("traces/$t"); done
    [ ${#have[@]} -gt 0 ] && tar czf "$OUT/$archive.tar.gz" "${have[@]}"
}
keep() {  # keep BACKEND: every capture keeps its raw file (.nsys-rep: recipes; Kineto JSON: re-import)
    echo --keep-raw
}
[ "$DEVICE" = cuda ] && { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nsys --version; } | tee -a "$LOG"
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)" | tee -a "$LOG"

if [ "$PART" = hf ]; then  # the compiled pair under the first backend, the eager twins, the recipes
    b=${BACKENDS[0]}
    for attn in sdpa eager; do
        wb capture --backend "$b" --modules $(keep "$b") --name "$P-hfc-$attn-compile-$b" --force --quiet \
            -- python3 "$PROG" --attn "$attn" "${HF[@]}"
    done
    pack "hfc-compile-$b" "$P-hfc-sdpa-compile-$b" "$P-hfc-eager-compile-$b"
    [ -n "${NO_TWINS:-}" ] || for attn in sdpa eager; do  # the eager twins (nsys: it sees graph captures)
        wb capture --backend "$b" --modules $(keep "$b") --name "$P-hfc-$attn-eager-$b" --force --quiet \
            -- python3 "$PROG" --attn "$attn" --no-compile "${HF[@]}"
    done
    rep=$(find "traces/$P-hfc-sdpa-eager-$b" -name '*.nsys-rep*' 2>/dev/null | head -1)
    if [ -z "${NO_TWINS:-}" ] && [ -n "$rep" ]; then  # nsys's own GPU projections, beside the trace
        case "$rep" in *.gz) gunzip -c "$rep" > /tmp/recipe-input.nsys-rep; rep=/tmp/recipe-input.nsys-rep;; esac
        for r in nvtx_gpu_proj_sum nvtx_gpu_proj_trace cuda_gpu_kern_sum; do
            timeout 120 nsys recipe "$r" --input "$rep" --output "traces/$P-hfc-sdpa-eager-$b/recipes/$r" \
                2>&1 | tail -3 | tee -a "$LOG"
        done
    fi
    [ -n "${NO_TWINS:-}" ] || pack hfc-eager "$P-hfc-sdpa-eager-$b" "$P-hfc-eager-eager-$b"
    wb summary "$P-hfc-sdpa-compile-$b" --by step
    wb summary "$P-hfc-sdpa-compile-$b" --by layer
    wb diff "$P-hfc-eager-compile-$b" "$P-hfc-sdpa-compile-$b" --top 6
fi

if [ "$PART" = hf2 ]; then  # the compiled pair under torch.profiler; the uninstrumented window
    for attn in sdpa eager; do
        wb capture --backend torch --modules --name "$P-hfc-$attn-compile-torch" --force --quiet \
            -- python3 "$PROG" --attn "$attn" "${HF[@]}"
    done
    pack hfc-compile-torch $P-hfc-sdpa-compile-torch $P-hfc-eager-compile-torch
    if [ "$DEVICE" = cuda ]; then  # an engine nobody instrumented: no provenance, no module ranges,
        # the recording opened by the program after its graphs were captured
        for attn in sdpa eager; do
            wb capture --backend nsys --no-provenance --windows --keep-raw --name "$P-hfc-$attn-compile-window-nsys" \
                --force --quiet -- python3 "$PROG" --attn "$attn" --window "${HF[@]}"
        done
        pack hfc-window $P-hfc-sdpa-compile-window-nsys $P-hfc-eager-compile-window-nsys
    fi
    wb diff $P-hfc-eager-compile-torch $P-hfc-sdpa-compile-torch --top 6
fi

if [ "$PART" = decoder ]; then
    for b in "${BACKENDS[@]}"; do
        for kv in unfused fused; do
            wb capture decoder --variant "kv_write=$kv" --engine compile --backend "$b" $(keep "$b") \
                --name "$P-kvwrite-$kv-compile-$b" --device "$DEVICE" "${DEC[@]}" --force --quiet
        done
        pack "kvwrite-compile-$b" "$P-kvwrite-unfused-compile-$b" "$P-kvwrite-fused-compile-$b"
        [ -n "${NO_TWINS:-}" ] && continue
        for kv in unfused fused; do  # the eager twins, on the same GPU
            wb capture decoder --variant "kv_write=$kv" --engine eager --backend "$b" $(keep "$b") \
                --name "$P-kvwrite-$kv-eager-$b" --device "$DEVICE" "${DEC[@]}" --force --quiet
        done
        pack "kvwrite-eager-$b" "$P-kvwrite-unfused-eager-$b" "$P-kvwrite-fused-eager-$b"
    done
    wb summary "$P-kvwrite-unfused-compile-${BACKENDS[0]}" --by layer
    wb diff "$P-kvwrite-unfused-compile-${BACKENDS[0]}" "$P-kvwrite-fused-compile-${BACKENDS[0]}" --top 6
fi
if [ "$PART" = graphs-torch ]; then
    echo "\$ python3 benchmarks/graph_probe.py --kineto /tmp/kineto-graph-probe.json" | tee -a "$LOG"
    timeout 120 python3 benchmarks/graph_probe.py --kineto /tmp/kineto-graph-probe.json 2>&1 | grep -v USDT | tee -a "$LOG"
    gzip -9c /tmp/kineto-graph-probe.json > "$OUT/kineto-graph-probe.json.gz"
    wb summary /tmp/kineto-graph-probe.json --by path
    for kv in unfused fused; do
        wb capture decoder --variant "kv_write=$kv" --engine cudagraph --backend torch --keep-raw \
            --name "$P-kvwrite-$kv-cudagraph-torch" --device "$DEVICE" "${DEC[@]}" --force --quiet
    done
    pack kvwrite-cudagraph-torch $P-kvwrite-unfused-cudagraph-torch $P-kvwrite-fused-cudagraph-torch
    wb summary $P-kvwrite-unfused-cudagraph-torch --by layer
fi
cp "$LOG" "$OUT/" 2>/dev/null
ls -la "$OUT" | tee -a "$LOG"
