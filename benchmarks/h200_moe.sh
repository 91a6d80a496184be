#!/usr/bin/env bash
# Mixture-of-experts decoding on a lent H200 (issue 37: "MoE layers whose kernel counts vary",
# "hybrid models whose period is two layers"). One device call, carry [".whl", ".debs"]
# (benchmarks/h200_setup.sh):
#   bash benchmarks/h200_moe.sh
# The built-in `hf` workload with transformers' own Mixtral and Qwen2-MoE code (random weights
# from their configs), eager, 8 layers of 8 experts, 2 per token, under nsys with the
# workbench's module ranges (the ground truth the inferred layers are checked against, with
# the ranges removed): Mixtral (every layer MoE; its eager experts loop syncs the host inside
# every layer), Qwen2-MoE with sparse_step=2 (every other layer dense: layers repeat in pairs),
# and Mixtral under torch.profiler. Then a user's own program nobody instrumented
# (benchmarks/user_programs/hf_moe_generate.py: Mixtral sampling a batch of 4 with generate(),
# the layers' kernel counts varying with the experts hit) captured as a command, with
# `--modules` (module ranges from outside: the ground truth) and without. Each trace is tarred
# into $OUT as it is made. PART=models or PART=user runs one half; EXPERTS=eager captures the
# user's program with transformers' experts loop instead (each hit expert's kernels launched:
# the layers' kernel counts vary with the routing).
# DEVICE=cpu checks the script without a GPU (torch backend, tiny shapes).
set -u
cd "$(dirname "$0")/.."
source benchmarks/campaign_device.sh
LOG="$OUT/commands-moe.log"
source benchmarks/campaign_log.sh
if [ "$DEVICE" = cuda ]; then
    SHAPE=(--variant layers=8 --variant hidden=1024 --variant heads=16 --variant kv_heads=8 --variant intermediate=2048
           --variant vocab=32000 --variant ctx=128 --variant max_len=512 --variant experts=8 --variant experts_per_token=2)
    RUNS=(--steps 8 --repeats 5 --warmup 1); B=nsys
else
    SHAPE=(--variant layers=4 --variant hidden=64 --variant heads=4 --variant kv_heads=2 --variant intermediate=128
           --variant vocab=256 --variant ctx=16 --variant max_len=64 --variant experts=4 --variant experts_per_token=2)
    RUNS=(--steps 3 --repeats 2 --warmup 1); B=torch
fi
capture() {  # capture NAME BACKEND VARIANT...: eager, static cache, tarred at once
    local name=$1 backend=$2; shift 2
    local args=(); for v in "$@"; do args+=(--variant "$v"); done
    wb capture hf "${args[@]}" --variant cache=static "${SHAPE[@]}" --engine eager --backend "$backend" \
        --device "$DEVICE" "${RUNS[@]}" --name "$name" --force --quiet
    [ -d "traces/$name" ] && tar czf "$OUT/$name.tar.gz" "traces/$name"
}
user() {  # user NAME [OPTION...] [-- PROGRAM_OPTION...]: the user's MoE program captured as a
          # command, tarred at once
    local name=$1; shift
    local opts=() prog=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    [ $# -gt 0 ] && shift && prog=("$@")
    [ "$DEVICE" = cuda ] || prog+=(--tiny --layers 2 --new-tokens 3)
    wb capture --backend "$B" "${opts[@]}" --name "$name" --force --quiet -- \
        python3 benchmarks/user_programs/hf_moe_generate.py --device "$DEVICE" "${prog[@]}"
    [ -d "traces/$name" ] && tar czf "$OUT/$name.tar.gz" "traces/$name"
}
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)" | tee -a "$LOG"
if [ "${PART:-all}" != user ]; then
    capture "$P-hfmoe-mixtral-$B" "$B" arch=mixtral
    capture "$P-hfmoe-qwen2moe-sparse2-$B" "$B" arch=qwen2_moe sparse_step=2
    [ "$DEVICE" = cuda ] && capture "$P-hfmoe-mixtral-torch" torch arch=mixtral
    wb summary "$P-hfmoe-mixtral-$B" --by layer
fi
if [ "${PART:-all}" != models ]; then
    if [ "${EXPERTS:-grouped_mm}" = eager ]; then
        user "$P-user-moe-eagerexperts-modules-$B" --modules -- --experts eager
        user "$P-user-moe-eagerexperts-$B" -- --experts eager
    else
        user "$P-user-moe-modules-$B" --modules
        user "$P-user-moe-$B"
        wb summary "$P-user-moe-$B" --by layer
    fi
fi
du -sh traces/$P-hfmoe-* traces/$P-user-moe-* 2>/dev/null | tee -a "$LOG"
