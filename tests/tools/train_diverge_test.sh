#!/bin/sh
# train_diverge_test.sh: a diverged run stops (issue 12). LeNet/MNIST in FP32 at
# --lr 1e6 turns its loss non-finite within a few iterations; `demitasse train` must
# exit non-zero with an error naming the iteration, and must not save over the last
# good checkpoint: a checkpoint written before the divergence (every iteration) is
# byte-identical before and after the failing step, and no CSV row is written for it.
# usage: train_diverge_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
# (exit 77: skipped, a prerequisite is missing)
set -u
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
. "$(dirname "$0")/train_test_lib.sh"
train_test_setup train_diverge 1000

train() { # train ITERS LOG [extra flags]
  t_n=$1 t_log=$2
  shift 2
  "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$t_n" \
    --optimizer sgd --lr 1e6 --checkpoint "$T/ckpt" --checkpoint-every 1 --log-every 1 \
    "$@" >"$t_log" 2>&1
}

# The divergence: a run to 20 iterations must stop with an error naming the iteration.
train 20 "$T/full.log" --csv "$T/full.csv"
rc=$?
[ "$rc" -ne 0 ] || fail "a diverged run exited 0"
grep -q "iteration [0-9]*.*non-finite\|non-finite.*iteration [0-9]" "$T/full.log" ||
  fail "no error naming the iteration of the non-finite loss"
grep -q "explain-overflow" "$T/full.log" || fail "the error does not point at --explain-overflow"
BAD=$(sed -n 's/.*iteration \([0-9]*\).*non-finite.*/\1/p' "$T/full.log" | head -n 1)
echo "diverged at iteration ${BAD:-?}"
if [ -z "$BAD" ] || [ "$BAD" -lt 2 ]; then
  fail "no iteration >= 2 to check the checkpoint against"
  cat "$T/full.log"
  exit 1
fi
# No CSV row for the failing iteration (or after it): the rows end at BAD - 1.
if [ -r "$T/full.csv" ]; then
  awk -F, -v bad="$BAD" 'NR > 1 && $1 + 0 >= bad { exit 1 }' "$T/full.csv" ||
    fail "the CSV has a row for iteration $BAD or later"
fi

# The checkpoint: the same run to BAD - 1 (every step identical: same seeds, same batches)
# leaves the last good checkpoint; resuming it into the failing step must leave it intact.
rm -rf "$T/ckpt"
train $((BAD - 1)) "$T/good.log" || { cat "$T/good.log"; fail "the run to $((BAD - 1)) failed"; }
cp -r "$T/ckpt" "$T/ckpt_good"
train 20 "$T/resumed.log" --resume
[ $? -ne 0 ] || fail "the resumed diverging run exited 0"
grep -q "iteration $BAD.*non-finite" "$T/resumed.log" ||
  { fail "the resumed run did not stop at iteration $BAD"; cat "$T/resumed.log"; }
for f in "$T/ckpt_good"/*; do
  cmp -s "$f" "$T/ckpt/$(basename "$f")" || fail "checkpoint file $(basename "$f") changed"
done

# --explain-overflow names the op.
rm -rf "$T/ckpt"
train 20 "$T/explain.log" --explain-overflow
grep -q "first inf/nan in" "$T/explain.log" ||
  { fail "--explain-overflow does not name the op"; cat "$T/explain.log"; }

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
