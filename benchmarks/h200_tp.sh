#!/usr/bin/env bash
# Issue 28 on a lent nvidia-h200-x2 or -x4: the reference decoder split over TP=2 GPUs (and
# TP=4 where 4 are visible), each capture one trace set with a member per rank (their ranges,
# the NCCL kernels, their own timing). Per TP and backend, nsys first:
#   fusion: kv_write unfused vs fused (default context: 128 cached rows, full attention)
#   cache:  full vs bucketed attention at 2048 cached rows (ctx=2048, kv_write fused)
# all with the eager engine at the decoder's default size (8 layers, 8 heads of 64, MLP 2048),
# the size of the single-GPU captures of issues 3 and 24. One device call (the `run` tool,
# kind nvidia-h200-x2 or nvidia-h200-x4, carry [".whl", ".debs"]):
#   bash benchmarks/h200_tp.sh                   # everything, nsys captures first
#   PART=nsys bash benchmarks/h200_tp.sh         # only nsys (PART=torch: only torch.profiler, with
#                                                # the TP=1 references, h200-tp1-*-torch traces)
# Sets already in traces/ are kept (REDO=1 captures them again), so a call cut short by its
# time limit resumes where it stopped. Each stored set is tarred into $OUT as one archive as
# soon as it is made (the tool brings back a limited number of files). Afterwards, on any
# machine, from the unpacked sets:
#   python3 benchmarks/tp_results.py traces benchmarks/results/h200_tp
# DEVICE=cpu checks the script without a GPU: the same plan at CPU-test sizes, TP=2 gloo ranks,
# torch backend only, results written to $OUT/h200_tp.{md,json}.
# NVLink multicast stays off (the device README: it can take the host's GPUs out of service):
# the variables are exported here, and every rank inherits them.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then source benchmarks/h200_setup.sh; else OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"; fi
LOG="$OUT/commands.log"
source benchmarks/campaign_log.sh
ROOT=${ROOT:-traces}
if [ "$DEVICE" = cuda ]; then
    GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
    nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$LOG"
    nvidia-smi topo -m 2>&1 | tee -a "$LOG"
    nsys --version | tee -a "$LOG"
    BACKENDS=(nsys torch)
    SHAPE=()
    CTX_CACHE=2048
    RUNS=(--steps 3 --repeats 30 --warmup 3)
else
    GPUS=2
    BACKENDS=(torch)
    SHAPE=(--variant layers=2 --variant heads=4 --variant head_dim=16 --variant index_dim=16 --variant mlp_dim=64
           --variant vocab=128 --variant rows=1296)
    CTX_CACHE=256
    RUNS=(--steps 3 --repeats 3 --warmup 1)
fi
TPS=(2)
[ "$GPUS" -ge 4 ] && TPS=(2 4)
env | grep -E "^(NCCL|TORCH_SYMM_MEM|NVSHMEM)_" | sort | tee -a "$LOG"
echo "GPUs visible: $GPUS; TP: ${TPS[*]}; backends: ${BACKENDS[*]}" | tee -a "$LOG"

tp() {  # tp N BACKEND NAME-TAIL VARIANT...: one set, kept if stored (unless REDO=1), then tarred
    local n=$1 backend=$2 name="h200-tp$1-$3-eager-$2"
    shift 3
    if [ -d "$ROOT/$name" ] && [ -z "${REDO:-}" ]; then echo "kept $ROOT/$name" | tee -a "$LOG"; return; fi
    wb --root "$ROOT" capture decoder --variant "tp=$n" "${SHAPE[@]}" "$@" --engine eager --backend "$backend" \
        --device "$DEVICE" "${RUNS[@]}" --name "$name" --force --quiet
    [ -d "$ROOT/$name" ] && tar czf "$OUT/$name.tar.gz" -C "$(dirname "$ROOT")" "$(basename "$ROOT")/$name"
}

for backend in "${BACKENDS[@]}"; do
    [ -n "${PART:-}" ] && [ "$PART" != "$backend" ] && continue
    # The single-GPU references (plain traces, not sets) whose outputs every rank must equal.
    runs=("${TPS[@]}"); [ "$backend" = torch ] && runs=(1 "${TPS[@]}")
    for n in "${runs[@]}"; do
        tp "$n" "$backend" kvwrite-unfused --variant kv_write=unfused
        tp "$n" "$backend" kvwrite-fused --variant kv_write=fused
        tp "$n" "$backend" cache-full-ctx$CTX_CACHE --variant kv_write=fused --variant cache_rows=full \
            --variant ctx=$CTX_CACHE
        tp "$n" "$backend" cache-bucketed-ctx$CTX_CACHE --variant kv_write=fused --variant cache_rows=bucketed \
            --variant ctx=$CTX_CACHE
    done
done

first=$(ls -d "$ROOT"/h200-tp2-kvwrite-unfused-eager-* 2>/dev/null | head -1)
if [ -n "$first" ]; then
    set_name=$(basename "$first")
    wb --root "$ROOT" summary "$set_name" --by rank
    wb --root "$ROOT" summary "$set_name" --by straggler
    wb --root "$ROOT" summary "$set_name" --by collective
    wb --root "$ROOT" diff "$set_name" "${set_name/unfused/fused}"
fi
# A TP the machine cannot run (more ranks than GPUs; on a CPU, more than gloo may start): one
# line, exit 2, nothing stored.
BAD_TP=$((GPUS * 2)); [ "$DEVICE" = cpu ] && BAD_TP=32
wb --root "$ROOT" capture decoder --variant tp=$BAD_TP --variant heads=32 --device "$DEVICE" --quiet
echo "\$ python3 benchmarks/tp_results.py $ROOT $OUT/h200_tp" | tee -a "$LOG"
python3 benchmarks/tp_results.py "$ROOT" "$OUT/h200_tp" 2>&1 | tee -a "$LOG"
du -sh "$ROOT"/h200-tp* 2>/dev/null | tee -a "$LOG"
