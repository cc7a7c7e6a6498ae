#!/bin/sh
# mnist_fp16_cli_test.sh: the mixed-precision pass's output is an ordinary net: `rewrite
# --fp16` writes it (and its state fills) as .pbtxt, and `train` loads and runs it as it
# is; the progress shows the loss scale. A few LeNet steps on the bundled MNIST.
# usage: mnist_fp16_cli_test.sh demitasse models/mnist
set -u
exe=$1 mnist=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$exe" make-db --images "$mnist/data/t10k-images-idx3-ubyte.gz" \
  --labels "$mnist/data/t10k-labels-idx1-ubyte.gz" --train 9000 \
  --out-train "$tmp/train" --out-val "$tmp/val" > /dev/null || fail "make-db"
"$exe" rewrite --grad --loss loss --optimizer momentum --lr 0.01 --fp16 \
  --init-out "$tmp/state.pbtxt" "$mnist/lenet_train.pbtxt" -o "$tmp/train_fp16.pbtxt" \
  2> "$tmp/summary.txt" || { cat "$tmp/summary.txt"; fail "rewrite --fp16"; }
grep -q "ops in FP16" "$tmp/summary.txt" || fail "no summary"
grep -q 'type: "UnscaleAndCheck"' "$tmp/train_fp16.pbtxt" || fail "no UnscaleAndCheck op"
grep -q 'output: "conv1_w_fp16"' "$tmp/train_fp16.pbtxt" || fail "no FP16 copy of conv1_w"
grep -q 'output: "loss_scale"' "$tmp/state.pbtxt" || fail "no loss-scale fill"
"$exe" train --init "$mnist/lenet_init.pbtxt" --init "$tmp/state.pbtxt" \
  --net "$tmp/train_fp16.pbtxt" --train-db "$tmp/train" --iters 6 --log-every 3 \
  > "$tmp/train.txt" 2>&1 || { cat "$tmp/train.txt"; fail "train on the rewritten net"; }
grep -q "iter 6/6 .* S 65536 .*skipped 0" "$tmp/train.txt" || { cat "$tmp/train.txt"; fail "progress line"; }
# Running the gradient pass again on the rewritten (backward) net is refused.
"$exe" rewrite --grad --loss loss "$tmp/train_fp16.pbtxt" > "$tmp/again.txt" 2>&1 \
  && fail "a second gradient pass on a backward net was accepted"
grep -q "already a gradient op" "$tmp/again.txt" || { cat "$tmp/again.txt"; fail "message"; }
# --resume from a checkpoint that lacks part of the state is refused, naming a blob.
cat > "$tmp/save_one.pbtxt" <<'NET'
op { input: "conv1_w" type: "Save" arg { name: "db" s: "PARTIAL" } arg { name: "db_type" s: "lmdb" } }
NET
sed -i "s|PARTIAL|$tmp/partial|" "$tmp/save_one.pbtxt"
"$exe" run --init "$mnist/lenet_init.pbtxt" --net "$tmp/save_one.pbtxt" > /dev/null 2>&1 \
  || fail "saving a partial checkpoint"
"$exe" train --init "$mnist/lenet_init.pbtxt" --net "$mnist/lenet_train.pbtxt" \
  --train-db "$tmp/train" --iters 4 --checkpoint "$tmp/partial" --resume > "$tmp/resume.txt" 2>&1 \
  && fail "resuming from a partial checkpoint was accepted"
grep -q "resume" "$tmp/resume.txt" && grep -q "conv1_b" "$tmp/resume.txt" \
  || { cat "$tmp/resume.txt"; fail "the partial-checkpoint message does not name the missing blob"; }
echo ok
