#!/bin/sh
# bench/train_throughput.sh: LeNet training throughput on MNIST (images/s), `demitasse
# train` beside PyTorch on the CPU, same model, batch, optimizer (momentum SGD, lr 0.01,
# momentum 0.9) and thread count.
#   bench/train_throughput.sh [BUILD_DIR]      (default: build; needs `ninja -C BUILD_DIR`)
#   env: ITERS (default 300), WARMUP (default 50, untimed; must divide ITERS), THREADS
#        (default nproc)
# Ours reads the LMDB `demitasse make-db` writes from the vendored t10k files (10,000
# images, shuffled by the net's data input), with no test net; its rate comes from the
# progress lines (one per WARMUP iterations, each the images/s since the previous one),
# leaving out the first interval, so start-up (init net, passes, the first batches) is
# not counted. PyTorch reads the same images from memory (bench/torch_lenet_train.py).
# Prints both rates and ours/PyTorch (higher is better for us).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
iters=${ITERS:-300}
warmup=${WARMUP:-50}
threads=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
py=/usr/bin/python3
dm=$build/tools/demitasse
data=models/mnist/data
[ $((iters % warmup)) -eq 0 ] && [ "$iters" -gt "$warmup" ] ||
  { echo "ITERS ($iters) must be a multiple of WARMUP ($warmup) and larger"; exit 1; }
$py -c 'import torch, numpy' 2>/dev/null ||
  { echo "PyTorch or NumPy missing: apt-get install python3-torch python3-numpy"; exit 1; }
ninja -C "$build" tools/demitasse >/dev/null
# The batch is the training net's; PyTorch is given the same.
batch=$(sed -n 's/.*name: *"batch_size" *i: *\([0-9]*\).*/\1/p' models/mnist/lenet_train.pbtxt |
  head -n 1)
[ -n "$batch" ] || { echo "no batch_size in models/mnist/lenet_train.pbtxt"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dm_train_bench_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$dm" make-db --images $data/t10k-images-idx3-ubyte.gz --labels $data/t10k-labels-idx1-ubyte.gz \
  --train 10000 --out-train "$tmp/train_db" >/dev/null
"$dm" train --init models/mnist/lenet_init.pbtxt --net models/mnist/lenet_train.pbtxt \
  --train-db "$tmp/train_db" --iters "$iters" --log-every "$warmup" --threads "$threads" \
  >"$tmp/ours.log"
# "iter 100/300  loss ...  123 img/s  ETA ..": the time of each interval after the first
# is warmup * batch / rate; the overall rate is images over the summed time.
ours=$(awk -v w="$warmup" -v b="$batch" '
  /^iter / { split($2, it, "/"); for (i = 3; i <= NF; i++) if ($i == "img/s") r = $(i - 1)
             if (it[1] > w) { t += w * b / r; n += w * b } }
  END { if (t > 0) printf "%.1f", n / t }' "$tmp/ours.log")
[ -n "$ours" ] || { echo "no progress lines from demitasse train:"; cat "$tmp/ours.log"; exit 1; }
torch=$($py bench/torch_lenet_train.py $data/t10k-images-idx3-ubyte.gz \
  $data/t10k-labels-idx1-ubyte.gz "$iters" "$batch" "$threads" "$warmup" | awk '{print $3}')
printf "%-10s %6s %6s %12s\n" "" batch iters "images/s"
printf "%-10s %6d %6d %12.1f\n" demitasse "$batch" "$((iters - warmup))" "$ours"
printf "%-10s %6d %6d %12.1f\n" pytorch "$batch" "$((iters - warmup))" "$torch"
awk -v o="$ours" -v t="$torch" 'BEGIN { printf "ratio ours/pytorch %.2f\n", o / t }'
echo "threads: $threads (OpenMP, OpenBLAS and torch.set_num_threads)"
