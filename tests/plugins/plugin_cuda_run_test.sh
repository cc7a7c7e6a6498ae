#!/bin/sh
# plugin_cuda_run_test.sh: the Swish plugin's CUDA kernels (tests/plugins/swish_cuda.cu,
# launched on dm_op_cuda_stream) against its CPU kernels, on a GPU: a net with Swish and
# SwishGradient run by `demitasse run --plugin` with --device cuda and with the CPU, in
# FP32 and FP16 (--precision; Swish follows its inputs, so the ops are pinned to FP16 by
# their `precision` argument, which only the precision painting reads), outputs (FLOAT,
# cast back after the FP16 ops) compared elementwise. Tolerances from the dtype:
# FP32 a few float roundings (the CUDA expf vs libm's), 8 ulp of |value| + 1e-6; FP16 the
# output rounded once more than the reference, 2 FP16 ulp (2^-9 relative) + 1e-3.
# Exit 77 (SKIP) without a GPU or without the plugin's CUDA kernels (no nvcc).
# usage: plugin_cuda_run_test.sh demitasse swish_plugin.so HAS_CUDA(0|1) PYTHON
set -u
exe=$1 swish=$2 has_cuda=$3 py=$4
[ "$has_cuda" = 1 ] || { echo "SKIP: the plugin was built without CUDA kernels (no nvcc)"; exit 77; }
gpus=$("$exe" info 2>&1 | grep '^GPUs:')
case "$gpus" in
  "GPUs: "[1-9]*) ;;
  *) echo "SKIP: ${gpus:-demitasse info reports no GPUs line}"; exit 77 ;;
esac
"$py" -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy for $py"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$tmp/net.pbtxt" <<'NET'
name: "swish_cuda"
op { input: "x" output: "y" type: "Swish" arg { name: "precision" s: "fp16" } }
op { input: "x" input: "dy" output: "dx" type: "SwishGradient" arg { name: "precision" s: "fp16" } }
external_input: "x"
external_input: "dy"
NET
# 3 x 1000 values over [-12, 12] (both tails of the sigmoid) and a gradient seed
"$py" - "$tmp" <<'PY' || fail "writing the inputs"
import sys, numpy as np
r = np.random.default_rng(11)
np.save(sys.argv[1] + "/x.npy", r.uniform(-12, 12, (3, 1000)).astype(np.float32))
np.save(sys.argv[1] + "/dy.npy", r.uniform(-2, 2, (3, 1000)).astype(np.float32))
PY
for prec in fp32 fp16; do
  for dev in cpu cuda; do
    "$exe" run --plugin "$swish" --net "$tmp/net.pbtxt" --device "$dev" --precision "$prec" \
      --input "x=$tmp/x.npy" --input "dy=$tmp/dy.npy" \
      --output "y=$tmp/y_${prec}_$dev.npy" --output "dx=$tmp/dx_${prec}_$dev.npy" \
      > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "run --device $dev --precision $prec"; }
  done
  # the device pass puts both plugin ops on the GPU (so the CUDA run ran the CUDA kernels)
  on_gpu=$("$exe" rewrite --plugin "$swish" --device cuda "$tmp/net.pbtxt" 2>/dev/null | awk '
    /^op \{/ { t = ""; d = 0 } /type: "Swish(Gradient)?"/ { t = 1 } /device_type: 1/ { d = 1 }
    /^\}/ { if (t && d) n++; t = ""; d = 0 } END { print n + 0 }')
  [ "$on_gpu" = 2 ] || fail "the device pass put $on_gpu of Swish, SwishGradient on the GPU"
  "$py" - "$tmp" "$prec" <<'PY' || exit 1
import sys, numpy as np
d, prec = sys.argv[1], sys.argv[2]
for name in ("y", "dx"):
    a = np.load(f"{d}/{name}_{prec}_cpu.npy").astype(np.float64)
    b = np.load(f"{d}/{name}_{prec}_cuda.npy").astype(np.float64)
    if a.shape != b.shape:
        print(f"FAIL: {name} {prec}: shapes {a.shape} vs {b.shape}"); sys.exit(1)
    tol = (8 * 2.0**-24 * np.abs(a) + 1e-6) if prec == "fp32" else (2.0**-9 * np.abs(a) + 1e-3)
    bad = np.abs(a - b) > tol
    if bad.any():
        i = np.flatnonzero(bad)[0]
        print(f"FAIL: {name} {prec}: {bad.sum()} values off, e.g. [{i}] CPU {a.flat[i]!r} "
              f"CUDA {b.flat[i]!r}"); sys.exit(1)
    print(f"ok {name} {prec}: CUDA = CPU within tolerance on {a.size} values")
PY
done
echo PASS
