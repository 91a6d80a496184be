#!/usr/bin/env bash
# Issue 24 on a lent H200: kernels replayed from CUDA graphs, attributed to the ranges open when
# their graph was captured. Two device calls (the `run` tool, carry [".whl", ".debs"]):
#   PART=graphs bash benchmarks/h200_graphs.sh   # the probe, the KV-write fusion pair (eager and
#                                                # CUDA graphs, nsys), the hf workload's CUDA-graph captures
#   PART=sweep bash benchmarks/h200_graphs.sh    # the bucketing sweep at Phi-4-mini-like size (and
#                                                # the hf CUDA-graph captures not yet stored)
# The probe (benchmarks/graph_probe.py) runs whole under nsys; its SQLite export comes back as
# $OUT/nsys-graph-probe.sqlite.gz, the fixture of tests/analysis/test_graph_ranges.py. Every stored trace
# is tarred into $OUT as it is made, so a call cut short still brings back what it finished.
# Afterwards, on any machine:
#   python3 benchmarks/live_campaign.py --from-traces --prefix h200 --root traces --out benchmarks/results/h200_live
#   python3 benchmarks/live_campaign.py --from-traces --prefix h200-phi4 --shape phi4 --root traces \
#       --out benchmarks/results/h200_phi4
#   python3 benchmarks/hf_results.py traces benchmarks/results/h200_hf
set -u
cd "$(dirname "$0")/.."
source benchmarks/h200_setup.sh
LOG="$OUT/commands.log"
source benchmarks/campaign_log.sh
keep() { tar czf "$OUT/$1.tar.gz" "traces/$1" 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
nsys --version | tee -a "$LOG"

if [ "${PART:-graphs}" = graphs ]; then
    mkdir -p /tmp/probe
    echo "\$ nsys profile ... --cuda-graph-trace=node python3 benchmarks/graph_probe.py" | tee -a "$LOG"
    nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node --force-overwrite=true \
        -o /tmp/probe/graph_probe python3 benchmarks/graph_probe.py 2>&1 | grep -v "^Collecting\|^Generating\|^Generated\|nsys-rep" | tee -a "$LOG"
    nsys export --type sqlite --force-overwrite=true -o /tmp/probe/graph_probe.sqlite /tmp/probe/graph_probe.nsys-rep > /dev/null \
        && gzip -9c /tmp/probe/graph_probe.sqlite > "$OUT/nsys-graph-probe.sqlite.gz"
    wb summary /tmp/probe/graph_probe.sqlite --by path
    # The fusion case: per layer under CUDA graphs, against the eager engine (same revision).
    for engine in cudagraph eager; do
        for kv in unfused fused; do
            name="h200-kvwrite-$kv-$engine-nsys"
            wb capture decoder --variant "kv_write=$kv" --engine "$engine" --backend nsys --name "$name" \
                --steps 3 --repeats 30 --warmup 3 --device cuda --force --quiet
            keep "$name"
        done
    done
    wb summary h200-kvwrite-unfused-cudagraph-nsys --by layer
    wb diff h200-kvwrite-unfused-cudagraph-nsys h200-kvwrite-fused-cudagraph-nsys --top 3
    # The hf workload's fastest engine (its own log and archives under $OUT/hf).
    OUT="$OUT/hf" PART=graph bash benchmarks/h200_hf.sh > /dev/null 2>&1
    tail -5 "$OUT/hf/commands.log" | tee -a "$LOG"
fi

if [ "${PART:-graphs}" = sweep ]; then
    echo "\$ python3 benchmarks/live_campaign.py --shape phi4 ..." | tee -a "$LOG"
    python3 benchmarks/live_campaign.py --device cuda --prefix h200-phi4 --shape phi4 --root traces \
        --out "$OUT/h200_phi4" --repeats 10 --rounds 0 --budget-s "${BUDGET_S:-330}" 2>&1 | tee -a "$LOG"
    # The hf CUDA-graph captures not yet stored (kept ones are skipped).
    OUT="$OUT/hf" PART=graph bash benchmarks/h200_hf.sh > /dev/null 2>&1
    # One archive: the tool brings back a limited number of files.
    tar czf "$OUT/traces.tar.gz" traces/h200-phi4-* traces/h200-hf-attn-*-cudagraph-* 2>/dev/null
    rm -f "$OUT"/hf/*.tar.gz
fi
du -sh traces/h200-* 2>/dev/null | tail -12 | tee -a "$LOG"
