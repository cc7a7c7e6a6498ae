#!/bin/sh
# train_diverge_test.sh: a diverged run stops (issue 12). LeNet/MNIST at --lr 1e6 turns
# its loss non-finite within a few iterations, in FP32, BF16 and FP16 without loss
# scaling (--fp16 --loss-scale none) alike; `demitasse train` must exit non-zero with an
# error naming the iteration and the first op that produced an inf/nan (without
# --explain-overflow it finds it by replaying the steps from the last checkpoint, or
# from the initial state when there is none yet), and must not save over the last
# good checkpoint: a checkpoint written before the divergence (every iteration) keeps a
# byte-identical data.mdb through a resumed run into the failing step, and no CSV row is
# written for it.
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
    --optimizer sgd --lr 1e6 --log-every 1 "$@" >"$t_log" 2>&1
}

# diverge NAME [precision flags]: the checks above in one precision
diverge() {
  d_name=$1
  shift
  ck="$T/ckpt_$d_name"
  # The divergence: a run to 20 iterations must stop with an error naming the iteration
  # and the op.
  rm -rf "$ck" "$ck".v*
  train 20 "$T/full.log" --checkpoint "$ck" --checkpoint-every 1 --csv "$T/full.csv" "$@"
  rc=$?
  [ "$rc" -ne 0 ] || fail "$d_name: a diverged run exited 0"
  clean_exit "$T/full.log" "$d_name"
  grep -q "iteration [0-9]*.*non-finite" "$T/full.log" ||
    fail "$d_name: no error naming the iteration of the non-finite loss"
  grep -q "first inf/nan in op [0-9]* (.*), output [0-9]* '.*' (found by replaying" \
    "$T/full.log" || { fail "$d_name: the error does not name the op"; tail -n 2 "$T/full.log"; }
  BAD=$(sed -n 's/.*iteration \([0-9]*\).*non-finite.*/\1/p' "$T/full.log" | head -n 1)
  echo "$d_name: $(grep 'demitasse:' "$T/full.log")"
  if [ -z "$BAD" ] || [ "$BAD" -lt 2 ]; then
    fail "$d_name: no iteration >= 2 to check the checkpoint against"
    cat "$T/full.log"
    return
  fi
  # No CSV row for the failing iteration (or after it): the rows end at BAD - 1.
  if [ -r "$T/full.csv" ]; then
    awk -F, -v bad="$BAD" 'NR > 1 && $1 + 0 >= bad { exit 1 }' "$T/full.csv" ||
      fail "$d_name: the CSV has a row for iteration $BAD or later"
  fi
  # The checkpoint: the same run to BAD - 1 (every step identical: same seeds, same
  # batches) leaves the last good checkpoint; resuming it into the failing step must
  # leave it intact (its data.mdb: lock.mdb is LMDB's reader table, which a Load writes).
  rm -rf "$ck" "$ck".v* "$T/good_data.mdb"
  train $((BAD - 1)) "$T/good.log" --checkpoint "$ck" "$@" ||
    { cat "$T/good.log"; fail "$d_name: the run to $((BAD - 1)) failed"; }
  good=$(readlink "$ck")
  cp "$ck/data.mdb" "$T/good_data.mdb"
  train 20 "$T/resumed.log" --checkpoint "$ck" --resume "$@"
  [ $? -ne 0 ] || fail "$d_name: the resumed diverging run exited 0"
  clean_exit "$T/resumed.log" "$d_name, resumed"
  grep -q "iteration $BAD.*non-finite" "$T/resumed.log" ||
    { fail "$d_name: the resumed run did not stop at iteration $BAD"; cat "$T/resumed.log"; }
  [ "$(readlink "$ck")" = "$good" ] || fail "$d_name: the checkpoint was replaced"
  cmp -s "$T/good_data.mdb" "$ck/data.mdb" || fail "$d_name: the checkpoint's data changed"
}

diverge fp32
diverge bf16 --bf16
diverge fp16-no-scaling --fp16 --loss-scale none

# No checkpoint: the replay starts from the initial state (fresh copies of the init
# nets), and names the same op as --explain-overflow does.
train 20 "$T/plain.log"
clean_exit "$T/plain.log" "no checkpoint"
grep -q "first inf/nan in op .*(found by replaying the steps from the initial state at iteration 0)" \
  "$T/plain.log" || { fail "without a checkpoint the error does not name the op"; cat "$T/plain.log"; }
train 20 "$T/explain.log" --explain-overflow
grep -q "first inf/nan in" "$T/explain.log" ||
  { fail "--explain-overflow does not name the op"; cat "$T/explain.log"; }
op_of() { sed -n "s/.*\(iteration [0-9]*\).*first inf\/nan in \(op [0-9]* ([^)]*)\).*/\1 \2/p" "$1"; }
[ -n "$(op_of "$T/plain.log")" ] && [ "$(op_of "$T/plain.log")" = "$(op_of "$T/explain.log")" ] ||
  fail "the replay from the initial state names '$(op_of "$T/plain.log")', --explain-overflow '$(op_of "$T/explain.log")'"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
