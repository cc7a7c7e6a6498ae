#!/bin/sh
# onnx_gpu_test.sh DEMITASSE SRCDIR: an ONNX model runs on the GPU as imported, in FP32
# and with --precision fp16, to ONNX Runtime's output (tests/data/onnx/tiny.onnx, whose
# probabilities onnxruntime 1.32 printed; see tests/onnx/onnx_cli_test.sh). The bound is
# FP16's, for both: FP16 rounds the Conv's and the FC's inputs, weights and outputs
# (unit roundoff u = 2^-11, about 3u per layer, 2 layers), and cuDNN may run FP32
# convolutions on TF32 tensor cores, whose 10-bit mantissa is FP16's. The probabilities
# are at most 1, so 3e-3 absolute covers both. Exits 77 without a usable GPU.
set -u
exe=$1 src=$2
mnist=unused
. "$(dirname "$0")/gpu_test_lib.sh"
gpu_require
M=$src/tests/data/onnx/tiny.onnx
IN=data=$src/tests/data/onnx/tiny_input.npy
ORT="0.91525036 0.01838535 0.04782088 0.01854339"
for prec in fp32 fp16; do
  out=$("$exe" run --net "$M" --input "$IN" --device cuda --precision "$prec" 2>&1) ||
    { echo "$out"; fail "run --device cuda --precision $prec"; }
  got=$(echo "$out" | sed -n 's/^prob: FLOAT 1x4 \[\(.*\)\]$/\1/p' | tr -d ',')
  echo "$prec on CUDA: prob $got (onnxruntime $ORT)"
  awk -v g="$got" -v w="$ORT" 'BEGIN { n = split(g, a, " "); split(w, b, " ");
    if (n != 4) exit 1; for (i = 1; i <= 4; i++) { d = a[i] - b[i]; if (d < 0) d = -d;
    if (d > 3e-3) exit 1 } }' || fail "$prec on CUDA: prob '$got', onnxruntime's $ORT"
done
echo ok
