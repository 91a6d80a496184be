# Sourced by the campaign scripts: `wb ARGS` runs `workbench ARGS` and logs to $LOG the command
# as a user types it, its output and its exit status (the logs docs/ and RESULTS quote).
: > "$LOG"
wb() {
    echo "\$ workbench $*" | tee -a "$LOG"
    timeout 400 python3 -m workbench "$@" 2>&1 | tee -a "$LOG"
    echo "[exit ${PIPESTATUS[0]}]" | tee -a "$LOG"
}
