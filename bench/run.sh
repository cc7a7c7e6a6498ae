#!/bin/sh
# bench/run.sh: CPU training-step benchmark, Demitasse beside PyTorch (Debian's
# python3-torch) on the same machine, shapes and thread count, printed as ratios.
#   bench/run.sh [BUILD_DIR]     (default: build; needs `ninja -C BUILD_DIR`)
#   env: ROUNDS (default 5), THREADS (default nproc)
# One step = forward + backward (no update) of LeNet (batch 64) and a ResNet-50
# bottleneck block (batch 8). Each round runs every side once, in a fresh process, in
# turn (rounds interleaved, so a slow minute of the machine hits every side); each
# process reports the median of its steps, and the table gives the median over rounds:
# our FP32 (the default engine, oneDNN where built) beside PyTorch FP32 (target ours/
# PyTorch <= 0.8), our BF16 (oneDNN's BF16 kernels) and FP16 (the reference kernels,
# faithful to tensor cores), each over our FP32, and our FP32 on the reference kernels.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-5}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch"; exit 1; }
ninja -C "$build" bench/bench_step >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { "$build/bench/bench_step" "$@" | awk '{print $4}'; }
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "threads: $threads (OpenMP, OpenBLAS and torch.set_num_threads); $rounds rounds, interleaved"
printf "%-11s %5s %9s %9s %7s %9s %6s %9s %6s %9s %6s\n" model batch "fp32" "torch" "/torch" \
  "bf16" "/fp32" "fp16" "/fp32" "fp32 ref" "/fp32"
for spec in "lenet 64 30" "bottleneck 8 5"; do
  set -- $spec
  for r in $(seq "$rounds"); do
    step "$1" fp32 "$2" "$3" >>"$tmp/fp32"
    $py bench/torch_step.py "$1" "$2" "$3" "$threads" | awk '{print $4}' >>"$tmp/torch"
    step "$1" bf16 "$2" "$3" >>"$tmp/bf16"
    step "$1" fp16 "$2" "$3" >>"$tmp/fp16"
    step "$1" fp32 "$2" "$3" REFERENCE >>"$tmp/ref"
  done
  o=$(median "$tmp/fp32") t=$(median "$tmp/torch") b=$(median "$tmp/bf16")
  h=$(median "$tmp/fp16") f=$(median "$tmp/ref")
  rm -f "$tmp"/*
  awk -v m="$1" -v n="$2" -v o="$o" -v t="$t" -v b="$b" -v h="$h" -v f="$f" 'BEGIN {
    printf "%-11s %5d %7.2fms %7.2fms %7.2f %7.2fms %6.2f %7.2fms %6.2f %7.2fms %6.2f\n",
      m, n, o, t, o / t, b, b / o, h, h / o, f, f / o }'
done
echo "ms per step: medians over rounds of each process's median step; /torch below 1: we are faster"
