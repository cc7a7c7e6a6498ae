#!/bin/sh
# bench/run.sh: CPU training-step benchmark, Demitasse beside PyTorch (Debian's
# python3-torch) on the same machine, shapes and thread count, printed as ratios.
#   bench/run.sh [BUILD_DIR]     (default: build; needs `ninja -C BUILD_DIR`)
# Reports per model: our FP32 ms, PyTorch FP32 ms, ratio ours/PyTorch (target <= 1.0),
# our FP16 ms and FP16/FP32 ratio (target <= 1.5). Medians of ITERS steps.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch"; exit 1; }
ninja -C "$build" bench/bench_step >/dev/null
printf "%-11s %6s %10s %10s %8s %10s %8s\n" model batch "ours fp32" "torch" "ratio" "ours fp16" "16/32"
for spec in "lenet 64 30" "bottleneck 8 5"; do
  set -- $spec
  ours=$("$build/bench/bench_step" "$1" fp32 "$2" "$3" | awk '{print $4}')
  half=$("$build/bench/bench_step" "$1" fp16 "$2" "$3" | awk '{print $4}')
  torch=$($py bench/torch_step.py "$1" "$2" "$3" "$threads" | awk '{print $4}')
  awk -v m="$1" -v b="$2" -v o="$ours" -v t="$torch" -v h="$half" 'BEGIN {
    printf "%-11s %6d %8.2fms %8.2fms %8.2f %8.2fms %8.2f\n", m, b, o, t, o / t, h, h / o }'
done
echo "threads: $threads (OpenMP, OpenBLAS and torch.set_num_threads)"
