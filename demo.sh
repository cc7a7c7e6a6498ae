#!/bin/sh
# demo.sh: the main job. Sets up, builds, converts the bundled MNIST (first 8,000 images
# train, last 2,000 validate) into LMDBs, and trains LeNet on it with `demitasse train`,
# testing on the validation set as it goes. Extra arguments go to `demitasse train`
# (e.g. --fp16 for mixed precision, --iters N).
set -eu
cd "$(dirname "$0")"
./setup.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
out=build/mnist
mkdir -p "$out"
if [ ! -e "$out/train_lmdb" ]; then
  ./build/tools/demitasse make-db --images models/mnist/data/t10k-images-idx3-ubyte.gz \
    --labels models/mnist/data/t10k-labels-idx1-ubyte.gz --train 8000 \
    --out-train "$out/train_lmdb" --out-val "$out/val_lmdb"
fi
rm -rf "$out/checkpoint" "$out"/checkpoint.v*
exec ./build/tools/demitasse train --init models/mnist/lenet_init.pbtxt \
  --net models/mnist/lenet_train.pbtxt --test-net models/mnist/lenet_test.pbtxt \
  --train-db "$out/train_lmdb" --test-db "$out/val_lmdb" --test-iters 20 --test-every 500 \
  --iters 2000 --optimizer momentum --lr 0.01 --momentum 0.9 --weight-decay 5e-4 \
  --csv "$out/metrics.csv" --checkpoint "$out/checkpoint" --checkpoint-every 500 "$@"
