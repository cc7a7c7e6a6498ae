#!/bin/sh
# bench/memory.sh: bytes of activations and gradients of one training step, FP32 beside
# mixed precision (bench/memory.c), for LeNet, ResNet-50 and the GPT (models/gpt). The GPT
# twice: as `train --fp16` paints it (autocast's lists: the embedding lookups in FP32, so
# the residual stream, the LayerNorms and the softmax are FP32 too), and with
# `--fp16-ops Gather,MaskedSoftmax,MaskedSoftmaxGradient` (an FP16 residual stream; the
# LayerNorms follow it, with FP32 statistics and parameters; softmax in FP16 storage
# with FP32 arithmetic inside), the row marked `+ops`.
#   bench/memory.sh [BUILD_DIR]     (default: build; needs `ninja -C BUILD_DIR`)
# Prints per model and batch the step's peak bytes in FP32 and FP16 with the memory pass
# (as `demitasse train` runs; measured by the allocator) and their ratio (target <= 0.6),
# then the sums without the memory pass, with their breakdown (activations / gradients,
# FP16 / FP32) as '#' lines.
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
gpt_ops=Gather,MaskedSoftmax,MaskedSoftmaxGradient
for spec in "lenet 32" "lenet 64" "lenet 512" "resnet50 32" "gpt 16" "gpt 16 $gpt_ops"; do
  set -- $spec
  if [ $# -eq 3 ]; then
    "$build/bench/memory" "$1" "$2" -v "${VERBOSE:-0}" -o "$3" >"$out"
  else
    "$build/bench/memory" "$1" "$2" -v "${VERBOSE:-0}" >"$out"
  fi
  grep '^# fp\|^#  ' "$out" | sed "s/^# /# $1 $2 /"
  grep -v '^#' "$out" | sed "s/^gpt /gpt$([ $# -eq 3 ] && echo +ops) /" >>"$rows"
done
printf "%-9s %5s %13s %13s %6s %13s %13s %6s\n" model batch fp32_peak fp16_peak ratio \
  fp32_sum fp16_sum ratio
# %.0f, not %d, for the byte counts: mawk's %d stops at 2^31 - 1
awk '{ printf "%-9s %5d %13.0f %13.0f %6.3f %13.0f %13.0f %6.3f%s\n", $1, $2, $3, $4, $5, $6,
       $7, $8, $5 <= 0.6 ? "" : "  (peak ratio > 0.6)" }' "$rows"
echo "peak: with the memory pass (Free after each blob's last use), the allocator's peak"
echo "during the step; sum: without it, every blob of the step lives to its end"
echo "(parameters and optimizer state excluded from both)"
