#!/usr/bin/env bash
# An open-source engine nobody instrumented, on a lent H200 or H100 (issue 37): gpt-fast's compiled
# decoding (benchmarks/user_programs/gpt_fast_decode.py; each decode step one CUDA-graph replay),
# its KV cache 8192 rows against 1024 (its attention reads the whole cache). One device call per
# part, carry [".whl", ".debs"] (benchmarks/h200_setup.sh):
#   PART=window bash benchmarks/h200_gpt_fast.sh     # cudaProfilerStart/Stop window, provenance off
#   PART=modules bash benchmarks/h200_gpt_fast.sh    # the whole run, --modules + provenance (truth)
# Each capture compiles in a cache directory of its own (gpt-fast turns inductor's FX graph
# cache on, and a cached graph records no provenance). Each trace is tarred into $OUT as it is
# made. DEVICE=cpu checks the script without a GPU (torch backend, tiny shapes).
set -u
cd "$(dirname "$0")/.."
source benchmarks/campaign_device.sh
if [ "$DEVICE" = cuda ]; then
    B=nsys; RUN=(--new-tokens 16); CACHES=(8192 1024)
else
    B=torch; RUN=(--shape tiny --prompt 8 --new-tokens 4 --device cpu); CACHES=(256 64)
fi
PART=${PART:-window}
LOG="$OUT/commands-gpt-fast-$PART.log"
source benchmarks/campaign_log.sh
PROG=benchmarks/user_programs/gpt_fast_decode.py
names=()
for cache in "${CACHES[@]}"; do
    export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-$PART-$cache
    if [ "$PART" = window ]; then
        name=$P-gptfast-cache$cache-window-$B
        wb capture --backend "$B" --windows --no-provenance --keep-raw --name "$name" --force --quiet \
            -- python3 "$PROG" --cache "$cache" --window "${RUN[@]}"
    else
        name=$P-gptfast-cache$cache-$B
        wb capture --backend "$B" --modules --keep-raw --name "$name" --force --quiet \
            -- python3 "$PROG" --cache "$cache" "${RUN[@]}"
    fi
    [ -d "traces/$name" ] && tar czf "$OUT/$name.tar.gz" "traces/$name"
    names+=("$name")
done
wb diff "${names[0]}" "${names[1]}"
