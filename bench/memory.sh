#!/bin/sh
# bench/memory.sh: bytes of activations and gradients of one training step, FP32 beside
# mixed precision (bench/memory.c), for LeNet and ResNet-50.
#   bench/memory.sh [BUILD_DIR]     (default: build; needs `ninja -C BUILD_DIR`)
# Prints per model and batch: FP32 bytes, FP16 bytes, ratio FP16/FP32 (target <= 0.6),
# with each run's breakdown (activations / gradients, FP16 / FP32) as '#' lines.
# ResNet-50 at batch 32 runs a real step of each precision on the CPU: minutes on two
# cores, and about 6 GB of memory for the FP32 step.
# VERBOSE=N lists each run's N largest blobs.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
# bytes do not depend on threads, only the time a step takes; same knob as the others
threads=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
ninja -C "$build" bench/memory >/dev/null
[ -f models/resnet50/resnet50_train.pbtxt ] || /usr/bin/python3 models/resnet50/make_resnet50.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/run rows=$tmp/rows
: >"$rows"
for spec in "lenet 64" "lenet 512" "resnet50 32"; do
  set -- $spec
  "$build/bench/memory" "$1" "$2" -v "${VERBOSE:-0}" >"$out"
  grep '^# fp\|^#  ' "$out" | sed "s/^# /# $1 $2 /"
  grep -v '^#' "$out" >>"$rows"
done
printf "%-9s %6s %14s %14s %7s\n" model batch fp32_bytes fp16_bytes ratio
# %.0f, not %d, for the byte counts: mawk's %d stops at 2^31 - 1
awk '{ printf "%-9s %6d %14.0f %14.0f %7.3f%s\n", $1, $2, $3, $4, $5, $5 <= 0.6 ? "" : "  (> 0.6)" }' "$rows"
echo "no memory planner: every blob of the step lives to its end, so these sums are the"
echo "step's peak for activations and gradients (parameters and optimizer state excluded)"
