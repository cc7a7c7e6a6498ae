#!/bin/sh
# rewrite_golden_test.sh: `demitasse rewrite` over many option sets (precision, loss
# scaling, optimizers, layout, fusion, memory, multi-tensor, channel padding, FP32 ops,
# data parallel, device) on the models in models/, every output (the net, the init-net
# addition, the summaries on stderr, the exit status) compared byte for byte with the
# sums in rewrite_golden.sha256, captured from the code before the pipeline's refactor
# (issue 24): a pass's net or summary that changes fails here. A build without CUDA
# compares with rewrite_golden_nocuda.sha256 (golden_lib.sh).
#
# usage: rewrite_golden_test.sh DEMITASSE SOURCE_ROOT [CAPTURE_DIR]
#   with CAPTURE_DIR: writes every output there and the sums to CAPTURE_DIR/sums
#   (to refresh the fixture: cp CAPTURE_DIR/sums tests/tools/rewrite_golden.sha256).
. "$(dirname "$0")/golden_lib.sh"

lenet=$root/models/mnist/lenet_train.pbtxt
squeeze=$root/models/squeezenet/squeezenet_train.pbtxt
resnet=$root/models/resnet50/resnet50_train.pbtxt
resnet_nhwc=$root/models/resnet50/resnet50_nhwc_train.pbtxt
pred=$root/tests/data/squeezenet_predict_net.pb
g="--grad --loss loss"

# name | model | flags
cases="
grad|$lenet|$g
sgd|$lenet|$g --optimizer sgd --lr 0.01
momentum|$lenet|$g --optimizer momentum --lr 0.1 --momentum 0.9 --nesterov --weight-decay 0.0005
adam|$lenet|$g --optimizer adam --lr 0.001 --beta1 0.8 --beta2 0.99 --epsilon 1e-7
policy-step|$lenet|$g --optimizer sgd --lr 0.1 --policy step --stepsize 100 --gamma 0.5
policy-warmup|$lenet|$g --optimizer momentum --lr 0.1 --policy poly --power 2 --max-iter 1000 --warmup-iter 10 --warmup-start 0.1
multi-tensor|$lenet|$g --optimizer momentum --lr 0.1 --multi-tensor
multi-adam|$lenet|$g --optimizer adam --multi-tensor
fp16-dynamic|$lenet|$g --optimizer sgd --fp16
fp16-static|$lenet|$g --optimizer sgd --fp16 --loss-scale static --init-scale 128
fp16-none|$lenet|$g --optimizer momentum --fp16 --loss-scale none
fp16-growth|$lenet|$g --optimizer sgd --fp16 --loss-scale dynamic --init-scale 1024 --growth-interval 50
bf16|$lenet|$g --optimizer adam --bf16
bf16-dynamic|$lenet|$g --optimizer sgd --bf16 --loss-scale dynamic
fp32-ops|$lenet|$g --optimizer sgd --fp16 --fp32-ops FC
fp16-ops|$lenet|$g --optimizer sgd --fp16 --fp16-ops Relu
free|$lenet|$g --optimizer sgd --free
free-keep|$lenet|$g --optimizer sgd --free --keep pred
cuda|$lenet|$g --optimizer momentum --device cuda
cuda-fp16|$lenet|$g --optimizer momentum --fp16 --device cuda --free
cuda-no-multi|$lenet|$g --optimizer momentum --device cuda --no-multi-tensor
cuda1-cpu-ops|$lenet|$g --optimizer sgd --device cuda:1 --cpu-ops Relu
cuda-only|$lenet|--device cuda
dp|$lenet|$g --optimizer sgd --data-parallel
dp-cuda|$lenet|$g --optimizer sgd --device cuda --data-parallel --dp-bucket-mb 4 --dp-fp32
layout-nhwc|$lenet|$g --optimizer sgd --layout nhwc
layout-nchw|$lenet|$g --optimizer sgd --fp16 --device cuda --layout nchw
layout-pad|$lenet|$g --optimizer sgd --layout nhwc --pad-channels 4
layout-pad0|$lenet|$g --optimizer sgd --fp16 --device cuda --pad-channels 0
squeeze-auto|$squeeze|$g --optimizer momentum --fp16 --device cuda
squeeze-free|$squeeze|$g --optimizer sgd --free --data data --data label
infer-fp16|$pred|--fp16
infer-bf16|$pred|--bf16 --init-out INIT
infer-fuse|$pred|--fuse
infer-fuse-cuda|$pred|--fuse --fp16 --device cuda
infer-nhwc|$pred|--layout nhwc
resnet-auto|$resnet|$g --optimizer momentum --fp16 --device cuda --free
resnet-fuse-train|$resnet|--fuse-train $g --optimizer momentum --device cuda --fp16
resnet-fuse-train-alone|$resnet|--fuse-train
resnet-nhwc-net|$resnet_nhwc|$g --optimizer sgd --layout nhwc
err-optimizer-no-grad|$lenet|--optimizer sgd
err-fuse-grad|$lenet|$g --fuse
err-no-pass|$lenet|
err-grad-no-loss|$lenet|--grad
err-keep|$lenet|$g --keep pred
err-fuse-train-fuse|$lenet|--fuse-train --fuse
err-free-infer|$pred|--fp16 --free
err-init-out|$lenet|$g --init-out INIT
"

printf '%s\n' "$cases" | while IFS='|' read -r name model flags; do
  [ -n "$name" ] || continue
  d=$out/$name
  mkdir -p "$d"
  rm -f "$d/net.pbtxt" "$d/init.pbtxt" "$d/stderr" "$d/rc"
  # --init-out INIT in a case's flags: the addition goes to $d/init.pbtxt; the other
  # cases that make one write it there too (asked for only where the flags allow it)
  f=$(printf '%s' "$flags" | sed "s#INIT#$d/init.pbtxt#")
  case "$f" in
  *--init-out*) ;;
  *--optimizer*|*--fp16*|*--bf16*|*--fuse\ *|*--fuse|*--layout\ nhwc*)
    case "$name" in err-*) ;; *) f="$f --init-out $d/init.pbtxt" ;; esac ;;
  esac
  # shellcheck disable=SC2086
  "$exe" rewrite $f "$model" -o "$d/net.pbtxt" 2> "$d/stderr.raw"
  echo $? > "$d/rc"
  golden_strip "$d" stderr
  golden_sum "$name" net.pbtxt init.pbtxt stderr rc
done

golden_finish rewrite rewrite_golden.sha256
