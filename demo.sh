#!/bin/sh
# demo.sh: the main job. Sets up, builds, converts the bundled MNIST (first 8,000 images
# train, last 2,000 validate) into LMDBs, and trains LeNet on it with `demitasse train`,
# testing on the validation set as it goes. Extra arguments go to `demitasse train`
# (e.g. --fp16 for mixed precision, --iters N).
#
# Each precision writes to its own folder (build/mnist/fp32, fp16 or bf16), so a
# `--fp16` run keeps the FP32 run's files to compare with; the last lines say where the
# CSV, the plot and the checkpoint went (after a failed run: that it failed). DM_DEMO_BIN (a built demitasse: no setup, no
# build) and DM_DEMO_OUT (instead of build/mnist) are for the test (tests/tools/demo_test.sh).
set -eu
cd "$(dirname "$0")"
. tools/demo_lib.sh
demo_binary
out=${DM_DEMO_OUT:-build/mnist}
mkdir -p "$out"
if [ ! -e "$out/train_lmdb" ]; then
  "$dm" make-db --images models/mnist/data/t10k-images-idx3-ubyte.gz \
    --labels models/mnist/data/t10k-labels-idx1-ubyte.gz --train 8000 \
    --out-train "$out/train_lmdb" --out-val "$out/val_lmdb"
fi
demo_precision "$@"
resume=0
for a in "$@"; do
  case $a in --resume) resume=1 ;; esac
done
run=$out/$precision
mkdir -p "$run"
[ "$resume" = 1 ] || rm -rf "$run/checkpoint" "$run"/checkpoint.v* # a fresh run starts over
status=0
"$dm" train --init models/mnist/lenet_init.pbtxt \
  --net models/mnist/lenet_train.pbtxt --test-net models/mnist/lenet_test.pbtxt \
  --train-db "$out/train_lmdb" --test-db "$out/val_lmdb" --test-iters 20 --test-every 500 \
  --iters 2000 --optimizer momentum --lr 0.01 --momentum 0.9 --weight-decay 5e-4 \
  --csv "$run/metrics.csv" --checkpoint "$run/checkpoint" --checkpoint-every 500 "$@" ||
  status=$?
# where everything went, last, so it is what stays on the screen; a failed run names
# no files (it may not have written them)
if [ "$status" -ne 0 ]; then
  echo "demo ($precision): training failed (exit $status); see the error above" >&2
  exit $status
fi
echo "demo ($precision): metrics CSV  $run/metrics.csv"
echo "demo ($precision): plot         $run/metrics.svg"
echo "demo ($precision): checkpoint   $run/checkpoint"
