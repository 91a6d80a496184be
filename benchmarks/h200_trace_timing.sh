#!/usr/bin/env bash
# Decode-step timing from the trace against the workbench's own timing, on a lent H200 or H100
# (issue 37). One device call, carry [".whl", ".debs"] (benchmarks/h200_setup.sh):
#   bash benchmarks/h200_trace_timing.sh
# The eager decoder pairs (kv_write unfused vs fused; the cache read whole vs bucketed at ctx
# 2048) captured under nsys with 30 recorded decode steps instead of 3: the first steps CUPTI
# records run slower than the rest (its per-kernel set-up), so three steps time the profiler
# more than the program. Then the two uninstrumented compiled windows of the compiled-code
# issue are imported again from their kept .nsys-rep (benchmarks/reimport.py), so their
# inferred layers are this revision's. Each trace is tarred into $OUT as it is made.
# PART=bare: the four eager pairs' captures with every workbench range off, the kv_write pair
# twice. DEVICE=cpu checks the script without a GPU (torch backend, tiny shapes, no re-import).
set -u
cd "$(dirname "$0")/.."
source benchmarks/campaign_device.sh
if [ "$DEVICE" = cuda ]; then
    B=nsys; STEPS=(--steps 30 --repeats 30 --warmup 3); SHAPE=()
else
    B=torch; STEPS=(--steps 4 --repeats 2 --warmup 1)
    SHAPE=(--variant layers=2 --variant heads=2 --variant head_dim=16 --variant mlp_dim=64)
fi
LOG="$OUT/commands-trace-timing.log"
source benchmarks/campaign_log.sh
capture() {  # capture NAME VARIANT...: the eager decoder, 30 recorded steps, tarred at once
    local name=$1; shift
    local args=(); for v in "$@"; do args+=(--variant "$v"); done
    wb capture decoder "${args[@]}" "${SHAPE[@]}" --engine eager --backend "$B" --name "$name" --force --quiet \
        "${STEPS[@]}" --device "$DEVICE"
    [ -d "traces/$name" ] && tar czf "$OUT/$name.tar.gz" "traces/$name"
}
if [ "${PART:-}" = bare ]; then
    # The same pairs with every workbench range off (WORKBENCH_ANNOTATE=0): what an engine with
    # no NVTX gives, its steps and layers inferred at import; the kv_write pair twice, A B A B,
    # to see how far the workbench's own timed ratio moves between captures minutes apart.
    export WORKBENCH_ANNOTATE=0
    capture "$P-kvwrite-unfused-eager30-bare-$B" kv_write=unfused
    capture "$P-kvwrite-fused-eager30-bare-$B" kv_write=fused
    capture "$P-cache-full-ctx2048-eager30-bare-$B" kv_write=fused cache_rows=full ctx=2048
    capture "$P-cache-bucketed-ctx2048-eager30-bare-$B" kv_write=fused cache_rows=bucketed ctx=2048
    capture "$P-kvwrite-unfused-eager30-bare2-$B" kv_write=unfused
    capture "$P-kvwrite-fused-eager30-bare2-$B" kv_write=fused
    exit 0
fi
capture "$P-kvwrite-unfused-eager30-$B" kv_write=unfused
capture "$P-kvwrite-fused-eager30-$B" kv_write=fused
capture "$P-cache-full-ctx2048-eager30-$B" kv_write=fused cache_rows=full ctx=2048
capture "$P-cache-bucketed-ctx2048-eager30-$B" kv_write=fused cache_rows=bucketed ctx=2048
if [ "$DEVICE" = cuda ]; then
    for t in h200-hfc-eager-compile-window-nsys h200-hfc-sdpa-compile-window-nsys; do
        python3 benchmarks/reimport.py "traces/$t" 2>&1 | tail -3 | tee -a "$LOG"
    done
    tar czf "$OUT/windows.tar.gz" traces/h200-hfc-eager-compile-window-nsys traces/h200-hfc-sdpa-compile-window-nsys
fi
