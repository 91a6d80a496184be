#!/usr/bin/env bash
# Issue 21 on a lent H200, one device call (the `run` tool of this workplace):
#   command: bash benchmarks/h200_capture_anything.sh      carry: [".whl", ".debs"]
# The user programs (tests/user_programs/mlp_steps.py, the CI test's own script, and
# benchmarks/user_programs/profiler_api_model.py, which calls cudaProfilerStart/Stop itself)
# captured with both backends through `workbench capture -- COMMAND`, a callable through
# `--call` under nsys, the failure paths, and what summary/diff/export print. Every command
# and its output go to $OUT/commands.log (quoted in docs/your-own-model.md and RESULTS); the traces to
# $OUT/h200-user.tar.gz. Set-up: benchmarks/h200_setup.sh (wheels, libdw for nsys).
set -u
cd "$(dirname "$0")/.."
source benchmarks/h200_setup.sh
LOG="$OUT/commands.log"
source benchmarks/campaign_log.sh
MLP=tests/user_programs/mlp_steps.py
API=benchmarks/user_programs/profiler_api_model.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
nsys --version | tee -a "$LOG"
wb capture --backend nsys --name h200-user-mlp-nsys -- python3 $MLP --steps 3
wb capture --backend nsys --windows --name h200-user-mlp-window-nsys -- python3 $MLP --steps 3
wb capture --backend nsys --windows --name h200-user-mlp-extra-window-nsys -- python3 $MLP --steps 3 --extra-op
wb capture --backend torch --name h200-user-mlp-torch -- python3 $MLP --steps 3
wb capture --backend torch --windows --name h200-user-mlp-window-torch --keep-raw -- python3 $MLP --steps 3
wb capture --backend nsys --windows --name h200-user-profapi-nsys -- python3 $API
wb capture --backend torch --windows --name h200-user-profapi-torch -- python3 $API
wb capture --backend nsys --windows --name h200-user-profapi-bash-nsys -- bash -c "python3 $API --steps 2"
(cd benchmarks/user_programs && wb --root ../../traces capture --backend nsys --call call_target:decode_step \
    --steps 3 --repeats 20 --name h200-user-call-nsys)
(cd benchmarks/user_programs && wb --root ../../traces capture --backend torch --call call_target:decode_step \
    --steps 3 --repeats 20 --name h200-user-call-torch)
# Failures: one line each, nothing stored.
wb capture --backend nsys -- python3 $MLP --exit 3
wb capture --backend nsys --windows -- python3 $MLP --leave-window-open
wb capture --backend nsys -- no-such-program
# What the analysis makes of them.
wb summary h200-user-mlp-window-nsys --by path
wb summary h200-user-profapi-nsys --by layer
wb summary h200-user-call-nsys --by step
wb diff h200-user-mlp-window-nsys h200-user-mlp-extra-window-nsys
wb export h200-user-mlp-window-nsys --chrome "$OUT/h200-user-mlp-window-nsys.json.gz"
ls traces | grep h200-user | tee -a "$LOG"
du -sh traces/h200-user-* | tee -a "$LOG"
tar czf "$OUT/h200-user.tar.gz" traces/h200-user-*
