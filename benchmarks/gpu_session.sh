#!/usr/bin/env bash
# benchmarks/gpu_session.sh - everything a session with an NVIDIA GPU should run, in one go.
#
#   bash benchmarks/gpu_session.sh [OUT_DIR]      (default: $OUT, else ./gpu-results)
#
# Runs from the repository root without installing the package (PYTHONPATH=.), so it works on a
# machine with CuPy, NumPy and pytest but no network. Each step has its own time limit and
# writes its log to OUT_DIR; a failing step does not stop the next. Afterwards, copy the
# tables into docs/benchmarks.md with the device name printed at the top of summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-results}}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"

step() {  # step NAME SECONDS COMMAND...: run it, log it, note its exit status and time
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$py" -c "import sys, numpy, cupy; print(sys.version.split()[0], 'numpy', numpy.__version__,
'cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
} >"$out/summary.txt" 2>&1
cat "$out/summary.txt"

step gpu_tests 420 "$py" -m pytest -p no:cacheprovider -q -m gpu tests/test_cupy_backend.py
step gpu_tests_reference 240 env TINYATTN_CUPY_KERNELS=0 \
    "$py" -m pytest -p no:cacheprovider -q -m gpu tests/test_cupy_backend.py -k "not training"
step softmax_float32 240 "$py" benchmarks/softmax_gpu.py
step softmax_float16 240 "$py" benchmarks/softmax_gpu.py --dtype float16
step attention_cupy 300 "$py" benchmarks/attention.py --backend cupy
step train_cupy 300 "$py" -m tinyattn train --backend cupy --no-progress --out "$out/run"
tail -n 3 "$out/gpu_tests.log" "$out/train_cupy.log"
