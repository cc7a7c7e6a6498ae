#!/bin/sh
# train_golden_test.sh: `demitasse train --iters 0 --save-net --save-init` on LeNet over
# 15 option sets (optimizers, LR policies, precision, loss scaling, FP32/FP16 ops,
# device, multi-tensor, channel padding, layout, training fusion, memory): the training
# net, its init addition, what train prints and its exit status compared byte for byte
# with train_golden.sha256, captured before `train` parsed its flags into the C API's
# dm_train_options and called its translator (issue 24).
#
# usage: train_golden_test.sh DEMITASSE SOURCE_ROOT [CAPTURE_DIR]
#   with CAPTURE_DIR: writes every output there and the sums to CAPTURE_DIR/sums.
. "$(dirname "$0")/golden_lib.sh"
m=$root/models/mnist
while IFS='|' read -r name flags; do
  [ -n "$name" ] || continue
  d=$out/$name
  mkdir -p "$d"
  rm -f "$d"/*
  # shellcheck disable=SC2086
  "$exe" train --init "$m/lenet_init.pbtxt" --net "$m/lenet_train.pbtxt" --iters 0 \
    --save-net "$d/net.pbtxt" --save-init "$d/init.pbtxt" $flags > "$d/stdout.raw" 2> "$d/stderr.raw"
  echo $? > "$d/rc"
  golden_strip "$d" stdout stderr
  golden_sum "$name" net.pbtxt init.pbtxt stdout stderr rc
done <<LIST
default|
sgd|--optimizer sgd --lr 0.1 --weight-decay 0.001 --decay-all
adam|--optimizer adam --beta1 0.8 --beta2 0.95 --epsilon 1e-6 --multi-tensor
policy|--policy step --stepsize 10 --gamma 0.3 --warmup-iter 5 --warmup-start 0.2 --nesterov
fp16|--fp16
fp16-static|--fp16 --loss-scale static --init-scale 512 --fp32-ops FC
bf16|--bf16 --fp16-ops Relu
bf16-dyn|--bf16 --loss-scale dynamic --growth-interval 7
cuda|--device cuda --fp16 --cpu-ops Relu
cuda1|--device cuda:1 --no-multi-tensor --pad-channels 4
nofree|--no-free --layout nchw
fuse|--fuse-train --device cuda
nhwc|--layout nhwc
acc|-a accuracy -l loss
badscale|--fp16 --init-scale 1e40
LIST

golden_finish train train_golden.sha256
