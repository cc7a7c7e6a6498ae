#!/bin/sh
# device_cli_test.sh: --device on the command line. `rewrite --device cuda` places a net
# (it only rewrites, so it works without a GPU) and shows the copies and device_type 1;
# `run` and `train` with --device cuda stop at once with the reason when no GPU can run
# (skipped checks, not passes, where one can); --device cpu runs as without the flag; bad values
# are usage errors.
#
# usage: device_cli_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
EX="$SRC/models/example"
MN="$SRC/models/mnist"
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_device_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

# A net whose placement does not depend on which CUDA kernels this build has: the fill
# is pinned to the CPU and the Relus to the GPU by their own device_option, so `x`
# crosses once (one copy, shared by both Relus) and `y` comes back once for the Sum.
cat >"$T/pinned.pbtxt" <<'NET'
name: "pinned"
op { type: "ConstantFill" output: "x" arg { name: "shape" ints: 4 } device_option { device_type: 0 } }
op { type: "Relu" input: "x" output: "y" device_option { device_type: 1 } }
op { type: "Relu" input: "x" output: "z" device_option { device_type: 1 } }
op { type: "Sum" input: "y" input: "x" output: "s" device_option { device_type: 0 } }
NET

# rewrite --device cuda prints the placed net
expect 0 "$DM" rewrite --device cuda "$T/pinned.pbtxt" && {
  count out 'type: "CopyCPUToGPU"' 1
  count out 'type: "CopyGPUToCPU"' 1
  has out 'input: "x_cuda"'
  has out 'input: "y_cpu"'
  has out 'device_type: 1'
  has out 'name: "device_placed"'
  has err 'device pass: '
  has err 'copies inserted'
}
# the printed net is a net: rewriting it again changes nothing
cp "$T/out" "$T/placed.pbtxt"
expect 0 "$DM" rewrite --device cuda "$T/placed.pbtxt" && {
  cmp -s "$T/out" "$T/placed.pbtxt" || fail "rewriting a placed net changed it"
  has err "already placed"
}
# the example MLP: every op with a CUDA kernel in this build moves; the data stays put
expect 0 "$DM" rewrite --device cuda:1 --cpu-ops Softmax "$EX/predict_net.pbtxt" &&
  has out 'name: "device_placed"' && has out 's: "CUDA:1"' && has err "1 by --cpu-ops"

# bad values are usage errors
expect 2 "$DM" run --net "$EX/predict_net.pbtxt" --device tpu && has err "--device wants cpu or cuda"
expect 2 "$DM" train --init x --net y --iters 1 --device cuda:x && has err "--device wants cpu or cuda"
expect 2 "$DM" rewrite "$T/pinned.pbtxt" && has err "use --grad or --device cuda"

# --device cuda without a usable GPU: a plain, early failure naming the device and why
if "$DM" info --no-selftest 2>/dev/null | grep -q "GPU 0:"; then
  echo "a GPU is present: the no-GPU refusals are not checked here (skipped)"
else
  expect 1 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
    --input "data=$EX/input.npy" --device cuda &&
    has err "demitasse: --device cuda: placed on CUDA:0" && has err "CUDA"
  expect 1 "$DM" train --init "$MN/lenet_init.pbtxt" --net "$MN/lenet_train.pbtxt" \
    --iters 1 --device cuda &&
    has err "demitasse: --device cuda: placed on CUDA:0"
  # early: before the nets are read (the train net does not even exist)
  expect 1 "$DM" train --init "$T/none.pbtxt" --net "$T/none.pbtxt" --iters 1 --device cuda &&
    has err "--device cuda: placed on CUDA:0"
fi

# --device cpu works as without the flag
expect 0 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
  --input "data=$EX/input.npy" --device cpu && has out "prob"

cli_summary
