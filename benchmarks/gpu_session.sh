#!/usr/bin/env bash
# benchmarks/gpu_session.sh - everything a session with an NVIDIA GPU should run.
#
#   bash benchmarks/gpu_session.sh [OUT_DIR] [STEP ...]     (OUT_DIR default: $OUT, else
#                                                           ./gpu-results; STEP default: all)
#
# Steps, each with its own time limit and log in OUT_DIR (a failing step does not stop the next):
#   tests      pytest -m gpu tests/backends/test_cupy_backend.py: every kernel vs NumPy (NaN rows and
#              fully masked rows on every kernel shape included), a training step
#   sweep      pytest -m gpu tests/backends/test_cupy_sweep.py: every registered op in float64/32/16,
#              the composite API, nn modules, optimizers, save/load and generation on CuPy
#              against the NumPy backend (pytest-xdist's -n 8 where installed: CuPy compiles
#              each new elementwise and reduction kernel on the CPU, on first use)
#   reference  the default training run with TINYATTN_CUPY_KERNELS=0: the backend's reference
#              primitives on CuPy train as well (the kernel tests assert their kernels launched,
#              so with the kernels off they would fail by design)
#   softmax    benchmarks/softmax_gpu.py, float32 and float16 (GB/s vs copy bandwidth, torch)
#   attention  benchmarks/attention.py --backend cupy (TFLOP/s vs composed path, torch SDPA)
#   train      tinyattn train --backend cupy (the default run)
#   cli        the main job's other paths on the GPU: --capture, a run stopped at 300 steps and
#              resumed, the shakespeare preset for 200 steps, tinyattn sample from a GPU checkpoint
#   sanitize   compute-sanitizer memcheck, racecheck, initcheck (shared memory read before any
#              write) and synccheck on the flash and softmax kernel tests: what the CPU emulator
#              checks by bookkeeping, on real hardware
#   profile    Nsight Compute: occupancy, throughput and shared-memory conflicts of the flash
#              kernels at T = 1024, d = 64, and of the softmax kernels, float32 and float16
#              (warp kernels at rows of 513-1024, block kernels: loads in flight, issue rate)
# A call of the device tool may last 10 minutes, so run them in groups, e.g.
#   "tests reference" / "softmax attention" / "train sanitize" / "profile".
#
# Runs from the repository root without installing the package (PYTHONPATH=.), so it works on a
# machine with CuPy, NumPy and pytest but no network. The tables of docs/benchmarks.md come from
# `python3 -m tinyattn bench report --sections gpu` (the softmax and attention benchmarks and
# the main job, with the device named), run on the same machine.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-results}}"
shift || true
steps="${*:-tests sweep reference softmax attention train cli sanitize profile}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
gpu_tests=("$py" -m pytest -p no:cacheprovider -q -m gpu tests/backends/test_cupy_backend.py)
xdist=$("$py" -c "import xdist" 2>/dev/null && echo "-n 8")

run() {  # run NAME SECONDS COMMAND...: run it, log it, note its exit status and time
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
    echo "steps: $steps"
} >>"$out/summary.txt" 2>&1
cat "$out/summary.txt"

for s in $steps; do
    case $s in
    tests) run gpu_tests 330 "${gpu_tests[@]}" $xdist ;;
    sweep) run gpu_sweep 300 "$py" -m pytest -p no:cacheprovider -q -m gpu --tb=short -rf \
        tests/backends/test_cupy_sweep.py $xdist ;;
    reference) run gpu_tests_reference 200 env TINYATTN_CUPY_KERNELS=0 "${gpu_tests[@]}" \
        -k "default_training_run" ;;
    softmax)
        run softmax_float32 150 "$py" benchmarks/softmax_gpu.py
        run softmax_float16 150 "$py" benchmarks/softmax_gpu.py --dtype float16 ;;
    attention) run attention_cupy 240 "$py" benchmarks/attention.py --backend cupy ;;
    train)
        run train_cupy 300 "$py" -m tinyattn train --backend cupy --no-progress --force \
            --out "$out/run"
        tail -n 3 "$out/train_cupy.log" ;;
    cli)
        train=("$py" -m tinyattn train --backend cupy --no-progress --force)
        run train_cupy_capture 120 "${train[@]}" --capture --out "$out/capture"
        run train_cupy_300 120 "${train[@]}" --steps 300 --out "$out/resumed"
        run train_cupy_resume 120 "$py" -m tinyattn train --backend cupy --no-progress \
            --resume --steps 600 --out "$out/resumed"
        run train_cupy_shakespeare 200 "${train[@]}" --task shakespeare --steps 200 \
            --eval-every 100 --out "$out/shakespeare"
        run sample_gpu_checkpoint 60 "$py" -m tinyattn sample --checkpoint \
            "$out/capture/checkpoint.npz" --prompt 12345678 --greedy
        tail -n 2 "$out"/train_cupy_capture.log "$out"/train_cupy_resume.log \
            "$out"/train_cupy_shakespeare.log "$out"/sample_gpu_checkpoint.log ;;
    sanitize)
        small="(flash_attention and (70-70 or 130-97) and float32)"
        small+=" or (softmax_forward_and_backward and (4-33 or 5-4097) and float32)"
        small+=" or (softmax_forward_and_backward and (130-1000 or 3-8192 or 4096-64)"
        small+=" and not float64) or off_the_vector_grid or nan_semantics"  # vector kernels
        run sanitize_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
            "${gpu_tests[@]}" -k "$small"
        run sanitize_racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 \
            "${gpu_tests[@]}" -k "$small"
        run sanitize_initcheck 150 compute-sanitizer --tool initcheck --error-exitcode 9 \
            "${gpu_tests[@]}" -k "$small"
        run sanitize_synccheck 150 compute-sanitizer --tool synccheck --error-exitcode 9 \
            "${gpu_tests[@]}" -k "$small" ;;
    profile)
        sections=(--section SpeedOfLight --section Occupancy --section LaunchStats
                  --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis
                  --section WarpStateStats)
        run profile_flash 240 ncu --clock-control none --target-processes all "${sections[@]}" \
            --kernel-name regex:"tinyattn_flash_(forward|backward)_d64_f32" --launch-count 2 \
            "$py" benchmarks/attention.py --backend cupy --t 1024 --repeats 1
        run profile_softmax 120 ncu --clock-control none --target-processes all "${sections[@]}" \
            --kernel-name regex:"tinyattn_softmax_(forward|backward)_(block|warp32)_f32" \
            --launch-count 4 "$py" benchmarks/softmax_gpu.py --repeats 1
        run profile_softmax_f16 120 ncu --clock-control none --target-processes all \
            "${sections[@]}" --kernel-name regex:"tinyattn_softmax_(forward|backward)_(block|warp32)_f16" \
            --launch-count 4 "$py" benchmarks/softmax_gpu.py --dtype float16 --repeats 1 ;;
    *) echo "unknown step $s (tests sweep reference softmax attention train cli sanitize profile)" \
        | tee -a "$out/summary.txt" ;;
    esac
done
