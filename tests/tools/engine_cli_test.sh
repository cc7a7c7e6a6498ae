#!/bin/sh
# engine_cli_test.sh: --engine on `run` and `train`, and run --profile. The example net
# (FC, Relu, FC, Softmax) gives the same probabilities on oneDNN's kernels and on the
# reference kernels (FP32 tolerance: both accumulate in FP32, in different orders); the
# profile names each op type's engine, so it shows which kernels really ran; bad names
# are usage errors. Where the build has no oneDNN (`info` says so), --engine dnnl is
# refused with the reason and the reference kernels run by default.
#
# usage: engine_cli_test.sh DEMITASSE SOURCE_ROOT   (/usr/bin/python3 with NumPy compares)
set -u
DM=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_engine_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

EX="--init $SRC/models/example/init_net.pbtxt --net $SRC/models/example/predict_net.pbtxt --input data=$SRC/models/example/input.npy"
expect 0 "$DM" info --no-selftest && has out 'CPU engine: '
dnnl=0
grep -q '^CPU engine: oneDNN' "$T/out" && dnnl=1

# shellcheck disable=SC2086
expect 0 "$DM" run $EX --engine reference --output prob="$T/ref.npy" --iters 2 --profile && {
  has err '# profile of 1 runs'
  has err 'reference'
  has err '# layout conversions: 0.0 per run, 0.000 MB per run' # plain kernels convert nothing
}
if [ $dnnl -eq 1 ]; then
  # shellcheck disable=SC2086
  expect 0 "$DM" run $EX --engine dnnl --output prob="$T/dnnl.npy" --iters 2 --profile && {
    # FC + Relu is fused (FCFusion), the last FC runs on its own: both oneDNN's
    grep -E '^# (FCFusion|FC) +DNNL' "$T/err" >"$T/dnnl_ops"
    count dnnl_ops 'DNNL' 2
    has err '# layout conversions: ' # counted, whatever the kernels chose
  }
  # the default is oneDNN
  # shellcheck disable=SC2086
  expect 0 "$DM" run $EX --iters 2 --profile && has err 'DNNL'
  checks=$((checks + 1))
  /usr/bin/python3 - "$T/ref.npy" "$T/dnnl.npy" <<'PY' || fail "oneDNN and reference outputs differ"
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
tol = 64 * 2.0 ** -24 * max(1.0, float(np.abs(a).max()))
err = float(np.abs(a - b).max())
print("max |ref - dnnl| = %.3g (tolerance %.3g)" % (err, tol))
sys.exit(0 if a.shape == b.shape and err <= tol else 1)
PY
else
  expect 2 "$DM" run $EX --engine dnnl && has err 'no oneDNN engine'
fi
expect 2 "$DM" run $EX --engine cudnn && has err "--engine wants dnnl or reference, got 'cudnn'"
expect 2 "$DM" train --engine '' --help && has err '--engine wants dnnl or reference'
expect 0 "$DM" run --help && has out '--engine NAME' && has out '--profile'
expect 0 "$DM" train --engine reference --help && has out '--engine NAME'
cli_summary
