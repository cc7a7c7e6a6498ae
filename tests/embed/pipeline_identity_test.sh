#!/bin/sh
# pipeline_identity_test.sh: one pipeline (net/passes/pipeline.h) builds every training net, so
# for the same options `demitasse rewrite`, `demitasse train --save-net/--save-init
# --iters 0` and the C API's dm_rewrite_train_net (tests/embed/rewrite_api.c) write
# byte-identical training nets and init additions (cmp). Cases: LeNet FP32 SGD; FP16
# momentum; FP16 on CUDA (the device pass only rewrites: no GPU needed); BF16 on CUDA
# with the memory pass; the demo's FP32 options with the memory pass; Adam with a step
# policy and a static FP16 scale; binary .pb output; ResNet-50 FP16 on CUDA with the
# memory pass. `train` runs the memory pass unless --no-free, keeping the loss, the
# accuracy, 'data', the DB outputs (data, label) and the state; `rewrite --free` is
# given the same keep list with --keep.
# In a build without the CUDA backend no op has a CUDA kernel, so the device pass keeps
# every op on the CPU: the three nets must still be identical, but there are no copies.
# usage: pipeline_identity_test.sh demitasse rewrite_api SOURCE_ROOT CUDA_BUILT(0|1)
set -u
exe=$1 api=$2 root=$3 cuda=${4:-1}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
lenet_net=$root/models/mnist/lenet_train.pbtxt lenet_init=$root/models/mnist/lenet_init.pbtxt
r50_net=$root/models/resnet50/resnet50_train.pbtxt r50_init=$root/models/resnet50/resnet50_init.pbtxt
n=0

# check NAME EXT NET INIT FREE(0|1) -- REWRITE/TRAIN FLAGS -- API FLAGS
check() {
  name=$1 ext=$2 net=$3 init=$4 free=$5
  shift 6
  cli=""
  while [ "$1" != "--" ]; do cli="$cli $1"; shift; done
  shift
  d=$tmp/$name
  mkdir -p "$d"
  if [ "$free" = 1 ]; then
    rw_free="--free --keep accuracy --keep data --keep label" tr_free="" api_free=""
  else
    rw_free="" tr_free="--no-free" api_free="--no-free"
  fi
  # shellcheck disable=SC2086
  "$exe" rewrite --grad --loss loss $cli $rw_free "$net" -o "$d/rewrite.$ext" \
    --init-out "$d/rewrite_init.$ext" > "$d/rewrite.log" 2>&1 \
    || { cat "$d/rewrite.log"; fail "$name: rewrite"; }
  # shellcheck disable=SC2086
  "$exe" train --init "$init" --net "$net" --iters 0 $cli $tr_free \
    --save-net "$d/train.$ext" --save-init "$d/train_init.$ext" > "$d/train.log" 2>&1 \
    || { cat "$d/train.log"; fail "$name: train --save-net"; }
  # shellcheck disable=SC2086
  "$api" "$net" "$d/api.$ext" "$d/api_init.$ext" "$@" $api_free > "$d/api.log" 2>&1 \
    || { cat "$d/api.log"; fail "$name: dm_rewrite_train_net"; }
  for who in train api; do
    cmp "$d/rewrite.$ext" "$d/$who.$ext" || fail "$name: the $who net differs from rewrite's"
    cmp "$d/rewrite_init.$ext" "$d/${who}_init.$ext" \
      || fail "$name: the $who init addition differs from rewrite's"
  done
  [ -s "$d/rewrite.$ext" ] && [ -s "$d/rewrite_init.$ext" ] || fail "$name: empty output"
  n=$((n + 1))
}

check fp32_sgd pbtxt "$lenet_net" "$lenet_init" 0 -- --optimizer sgd --lr 0.05 -- --sgd --lr 0.05
check fp16_momentum pbtxt "$lenet_net" "$lenet_init" 0 -- --optimizer momentum --fp16 -- --fp16
check fp16_cuda pbtxt "$lenet_net" "$lenet_init" 0 -- --optimizer momentum --fp16 --device cuda \
  -- --fp16 --device cuda
check bf16_cuda1_free pbtxt "$lenet_net" "$lenet_init" 1 -- --optimizer momentum --bf16 \
  --device cuda:1 -- --bf16 --device cuda:1
check demo_fp32_free pbtxt "$lenet_net" "$lenet_init" 1 -- --optimizer momentum --lr 0.01 \
  --momentum 0.9 --weight-decay 5e-4 -- --lr 0.01 --weight-decay 5e-4
check adam_static pbtxt "$lenet_net" "$lenet_init" 1 -- --optimizer adam --policy step \
  --stepsize 100 --gamma 0.5 --fp16 --loss-scale static --init-scale 128 -- --adam --policy step \
  --stepsize 100 --gamma 0.5 --fp16 --loss-scale static --init-scale 128
check fp16_binary pb "$lenet_net" "$lenet_init" 1 -- --optimizer momentum --fp16 -- --fp16
check r50_fp16_cuda_free pbtxt "$r50_net" "$r50_init" 1 -- --optimizer momentum --fp16 \
  --device cuda -- --fp16 --device cuda
# the step's speed options (issue 14): training fusion, multi-tensor updates, layouts
check r50_fuse_nhwc pbtxt "$r50_net" "$r50_init" 0 -- --optimizer momentum --fp16 --fuse-train \
  --layout nhwc --multi-tensor -- --fp16 --fuse-train --layout nhwc --multi-tensor
check r50_cuda_nchw_single pbtxt "$r50_net" "$r50_init" 0 -- --optimizer momentum --fp16 \
  --device cuda --layout nchw --no-multi-tensor -- --fp16 --device cuda --layout nchw \
  --no-multi-tensor
check lenet_multi pbtxt "$lenet_net" "$lenet_init" 1 -- --optimizer momentum --multi-tensor \
  -- --multi-tensor

# The training net really went through the passes (not three copies of the input).
grep -q 'type: "UnscaleAndCheck"' "$tmp/fp16_cuda/rewrite.pbtxt" || fail "no UnscaleAndCheck"
if [ "$cuda" = 1 ]; then
  grep -q 'type: "CopyCPUToGPU"' "$tmp/fp16_cuda/rewrite.pbtxt" || fail "no device copies"
fi
grep -q 'type: "Free"' "$tmp/demo_fp32_free/rewrite.pbtxt" || fail "no Free ops"
grep -q 'output: "loss_scale"' "$tmp/fp16_momentum/rewrite_init.pbtxt" || fail "no loss-scale fill"
grep -q 'type: "SpatialBNRelu"' "$tmp/r50_fuse_nhwc/rewrite.pbtxt" || fail "no fused BN+Relu"
grep -q 's: "NHWC"' "$tmp/r50_fuse_nhwc/rewrite.pbtxt" || fail "no NHWC ops"
grep -q 'type: "MultiMomentumSGDUpdate"' "$tmp/lenet_multi/rewrite.pbtxt" || fail "no multi-tensor update"
grep -q 'type: "MultiMomentumSGDUpdate"' "$tmp/r50_cuda_nchw_single/rewrite.pbtxt" &&
  fail "--no-multi-tensor still has a multi-tensor update"
grep -q 's: "NHWC"' "$tmp/r50_cuda_nchw_single/rewrite.pbtxt" && fail "--layout nchw has NHWC ops"
echo "ok: $n option sets, rewrite = train --save-net = dm_rewrite_train_net byte for byte"
