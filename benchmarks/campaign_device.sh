# Sourced by the campaign scripts, from the repository root: DEVICE (default cuda), the device
# call's set-up on a GPU (benchmarks/h200_setup.sh: sets OUT) or OUT alone on the CPU, and P, the
# prefix of the traces' names: the GPU they ran on (the lent machine may be an H100 or an
# H200), cpu for a check of the script without one.
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then
    source benchmarks/h200_setup.sh
    case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H100*) P=h100;; *H200*) P=h200;; *) P=gpu;; esac
else
    OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"
    P=cpu
fi
