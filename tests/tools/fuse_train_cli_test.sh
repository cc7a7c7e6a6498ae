#!/bin/sh
# fuse_train_cli_test.sh: --fuse-train on the command line, on ResNet-50 (it only
# rewrites, so no GPU and no weights are needed). `rewrite --fuse-train` prints the fused
# forward net (33 SpatialBNRelu, 16 SpatialBNAddRelu, no Relu left, the 4 projection BNs
# named with the reason); with --grad the fused backward ops follow; `train --iters 0
# --save-net` writes the same training net as `rewrite`; with --device cuda every op,
# the fused ones included, is placed on the GPU (in a build with CUDA); misuse is a
# usage error; a net that already has gradient ops is refused with the reason. On the zoo
# SqueezeNet every Conv + Relu becomes a ConvFusion (26) whose gradient is one
# ConvReluGradient, and with --device cuda the fused ops are placed on the GPU as the
# unfused net's are (the same count stays on the CPU, its Splits, in both).
#
# usage: fuse_train_cli_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
R50="$SRC/models/resnet50"
SQ="$SRC/models/squeezenet"
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_fuse_train_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

expect 0 "$DM" rewrite --fuse-train "$R50/resnet50_train.pbtxt" && {
  count out 'type: "SpatialBNRelu"' 33
  count out 'type: "SpatialBNAddRelu"' 16
  count out 'type: "SpatialBN"' 4
  count out 'type: "Relu"' 0
  has err 'training fusion: of 53 training SpatialBN, 33 made SpatialBNRelu and 16 SpatialBNAddRelu'
  has err "(res2_0_branch1_bn): not fused: Y is read first by an op other than a Relu, Sum or Add"
}
expect 0 "$DM" rewrite --fuse-train --grad --loss loss --optimizer momentum \
  "$R50/resnet50_train.pbtxt" -o "$T/rewritten.pbtxt" && {
  cp "$T/rewritten.pbtxt" "$T/out"
  count out 'type: "SpatialBNReluGradient"' 33
  count out 'type: "SpatialBNAddReluGradient"' 16
  count out 'type: "SpatialBNGradient"' 4
  count out 'type: "ReluGradient"' 0
}
# train builds the same net (its memory pass off, as rewrite's is)
expect 0 "$DM" train --init "$R50/resnet50_init.pbtxt" --net "$R50/resnet50_train.pbtxt" \
  --iters 0 --save-net "$T/saved.pbtxt" --optimizer momentum --no-free --fuse-train &&
  { checks=$((checks + 1)); cmp -s "$T/saved.pbtxt" "$T/rewritten.pbtxt" ||
    fail "train --save-net differs from rewrite's net"; }
# placed: every op has a CUDA kernel, the fused ones too (a build without CUDA has none)
if "$DM" info --no-selftest 2>/dev/null | grep -q "built without CUDA"; then
  echo "built without CUDA: the placement is not checked here (skipped)"
else
  expect 0 "$DM" rewrite --fuse-train --grad --loss loss --optimizer momentum --fp16 \
    --device cuda "$R50/resnet50_nhwc_train.pbtxt" && has err "on the CPU: 0 without a CUDA kernel"
fi
# SqueezeNet: Conv + Relu
expect 0 "$DM" rewrite --fuse-train --grad --loss loss --optimizer momentum \
  "$SQ/squeezenet_train.pbtxt" -o "$T/sq.pbtxt" && {
  cp "$T/sq.pbtxt" "$T/out"
  count out 'type: "ConvFusion"' 26
  count out 'type: "ConvReluGradient"' 26
  count out 'type: "Relu"' 0
  count out 'type: "ReluGradient"' 0
  has err 'training fusion: 26 Conv + Relu made ConvFusion, 0 FC + Relu made FCFusion'
}
if ! "$DM" info --no-selftest 2>/dev/null | grep -q "built without CUDA"; then
  expect 0 "$DM" rewrite --grad --loss loss --optimizer momentum --fp16 --device cuda \
    "$SQ/squeezenet_train.pbtxt"
  unfused=$(grep -o 'on the CPU: [0-9]* without a CUDA kernel' "$T/err")
  expect 0 "$DM" rewrite --fuse-train --grad --loss loss --optimizer momentum --fp16 \
    --device cuda "$SQ/squeezenet_train.pbtxt" && has err "$unfused"
fi
# misuse
expect 2 "$DM" rewrite --fuse-train --fuse "$R50/resnet50_train.pbtxt" &&
  has err "--fuse-train is for training nets"
expect 2 "$DM" rewrite --fuse-train --fp16 "$R50/resnet50_train.pbtxt" &&
  has err "with --fp16/--bf16 only with --grad"
expect 1 "$DM" train --init "$R50/resnet50_init.pbtxt" --net "$T/rewritten.pbtxt" \
  --iters 0 --save-net "$T/again.pbtxt" --fuse-train &&
  has err "the training fusion pass runs before the gradient pass"
cli_summary
