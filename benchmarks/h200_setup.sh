# Sourced by the H200 campaign scripts: the set-up every device call needs. .whl holds wheels
# the machine lacks (nvtx, orjson, duckdb, tqdm for CPython 3.12) and .debs Debian's libdw1 +
# libelf1, without which the nsys bundled with Nsight Compute writes only a .qdstrm (see
# GPU.md). Run from the repository root; sets OUT (default /tmp/h200-out).
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/dw && for d in .debs/*.deb; do dpkg -x "$d" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64:$PATH
export PYTHONUNBUFFERED=1
