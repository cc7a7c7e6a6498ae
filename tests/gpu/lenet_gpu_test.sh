#!/bin/sh
# lenet_gpu_test.sh: LeNet on the bundled MNIST trained with `demitasse train --device
# cuda --fp16` reaches the CPU's test accuracy (same init net, so the same seeds, same
# data order). The two runs are not bit-identical (summation order differs between
# cuDNN/cuBLAS and the CPU kernels, and training amplifies it), so the accuracies may
# differ by a little: we allow 2 points on 2,000 validation images and require 0.9.
# Exits 77 without a usable GPU.
# usage: lenet_gpu_test.sh demitasse models/mnist [iters]
set -u
exe=$1 mnist=$2 iters=${3:-300}
. "$(dirname "$0")/gpu_test_lib.sh"
gpu_require
mnist_dbs 8000
lenet_train "$tmp/cpu.txt" || { cat "$tmp/cpu.txt"; fail "CPU training"; }
lenet_train "$tmp/gpu.txt" --device cuda || { cat "$tmp/gpu.txt"; fail "GPU training"; }
# The last progress line ends "test loss L acc A".
acc() { grep 'test loss' "$1" | tail -n 1 | sed 's/.*test loss [^ ]* acc \([0-9.]*\).*/\1/'; }
a_cpu=$(acc "$tmp/cpu.txt") a_gpu=$(acc "$tmp/gpu.txt")
[ -n "$a_cpu" ] && [ -n "$a_gpu" ] || { cat "$tmp/cpu.txt" "$tmp/gpu.txt"; fail "no test accuracy"; }
tail -n 2 "$tmp/gpu.txt"
echo "test accuracy after $iters iterations: CPU $a_cpu, CUDA $a_gpu"
awk -v c="$a_cpu" -v g="$a_gpu" 'BEGIN { d = c - g; if (d < 0) d = -d; exit !(d <= 0.02 && g >= 0.9) }' \
  || fail "CUDA accuracy $a_gpu is not within 0.02 of the CPU's $a_cpu (or under 0.9)"
echo ok
