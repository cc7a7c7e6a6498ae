#!/bin/sh
# train_csv_resume_test.sh: the metrics CSV survives SIGKILL + --resume. An uninterrupted
# LeNet run to N iterations (--csv, a row per iteration, a checkpoint every K) is the
# reference; a second run is SIGKILLed at random moments (KILLS times, each at a random
# row of its share of the run) and resumed each time, then run to N. Its CSV must hold every iteration
# 1..N exactly once, in order, with the reference's loss and accuracy (resumed runs are
# bit-identical: train_resume_test.sh); images/s is not compared. After each kill the
# CSV is also given a torn last row (a row past the checkpoint cut in half, or a forged
# half row when there is none) that --resume must drop. Finally a --resume with the CSV
# missing starts a new one with its header, and a --resume past --iters says there is
# nothing to train.
#
# usage: train_csv_resume_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
# (exit 77: skipped, a prerequisite is missing)
set -u
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
N=${DM_CSV_ITERS:-40}
K=${DM_CSV_EVERY:-5}
KILLS=${DM_CSV_KILLS:-4}
. "$(dirname "$0")/train_test_lib.sh"
train_test_setup csv_resume 2000

# ckpt_iter CKPT: the checkpoint's iteration counter (int64, the .npy's last 8 bytes)
ckpt_iter() {
  cat >"$T/load.pbtxt" <<EOP
name: "load"
op { output: "optimizer_iteration" type: "Load" arg { name: "db" s: "$1" }
     arg { name: "db_type" s: "lmdb" } }
EOP
  rm -f "$T/it.npy"
  "$DM" run --net "$T/load.pbtxt" --output "optimizer_iteration=$T/it.npy" >"$T/load.log" 2>&1 ||
    { cat "$T/load.log" >&2; echo -1; return; }
  od -An -t d8 -j $(($(wc -c <"$T/it.npy") - 8)) "$T/it.npy" | tr -d ' '
}

# reference
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
  --checkpoint "$T/ref" --checkpoint-every "$K" --log-every 1 --csv "$T/ref.csv" \
  >"$T/ref.log" 2>&1 || { cat "$T/ref.log"; exit 1; }
cut -d, -f1 "$T/ref.csv" | tail -n +2 >"$T/ref_iters"
seq 1 "$N" | cmp -s - "$T/ref_iters" || fail "the reference CSV is not iterations 1..$N once each"

# killed and resumed
ck="$T/kill"
csv="$T/kill.csv"
k=1
torn=0
while [ "$k" -le "$KILLS" ]; do
  resume=
  [ -L "$ck" ] && resume=--resume
  # Kill when the CSV reaches a random row of this round's share of the N iterations
  # (progress, not time: the machine may be slow), plus up to 40 ms.
  seg=$((N / (KILLS + 1)))
  target=$((k * seg + $(rand "$seg")))
  kill_train_at "$target" 40 "$T/kill$k.log" $resume ||
    echo "note: round $k ended before its kill"
  it=$(ckpt_iter "$ck")
  rows=$(($(wc -l <"$csv") - 1))
  lastrow=$(tail -n 1 "$csv" | cut -d, -f1)
  # A torn last row: cut a row past the checkpoint in half, or forge half of the next one.
  if [ "$lastrow" -gt "$it" ] 2>/dev/null; then
    size=$(wc -c <"$csv")
    len=$(tail -n 1 "$csv" | wc -c)
    truncate -s $((size - len / 2)) "$csv" && torn=$((torn + 1))
    how="cut row $lastrow in half"
  else
    printf '%d,9.87' $((it + 1)) >>"$csv" && torn=$((torn + 1))
    how="appended half a row $((it + 1))"
  fi
  echo "round $k: killed ${kill_ms} ms after row $target; checkpoint at $it, CSV at $rows rows (last $lastrow); $how"
  k=$((k + 1))
done
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
  --checkpoint "$ck" --checkpoint-every "$K" --log-every 1 --csv "$csv" --resume \
  >"$T/kill_final.log" 2>&1 || { cat "$T/kill_final.log"; exit 1; }

cut -d, -f1 "$csv" | tail -n +2 >"$T/kill_iters"
if cmp -s "$T/ref_iters" "$T/kill_iters"; then
  echo "ok: after $KILLS kills + resume: iterations 1..$N once each"
else
  fail "iterations after $KILLS kills: $(sort -n "$T/kill_iters" | uniq -c | awk '$1 != 1' | wc -l) repeated, $(wc -l <"$T/kill_iters") rows for $N iterations"
  sort -n "$T/kill_iters" | uniq -c | awk '$1 != 1 { print "  iteration " $2 " x" $1 }' | head
fi
cut -d, -f1-3 "$T/ref.csv" >"$T/ref_loss"
cut -d, -f1-3 "$csv" >"$T/kill_loss"
if cmp -s "$T/ref_loss" "$T/kill_loss"; then
  echo "ok: loss and accuracy columns identical to the uninterrupted run's"
else
  fail "loss/accuracy columns differ:"
  diff "$T/ref_loss" "$T/kill_loss" | head
fi
[ "$(head -n 1 "$csv")" = "$(head -n 1 "$T/ref.csv")" ] || fail "header: $(head -n 1 "$csv")"
[ "$torn" -eq "$KILLS" ] || fail "only $torn torn rows made"

# --resume with no CSV: a new one, header only (the run is already at N)
rm -f "$csv"
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$N" \
  --checkpoint "$ck" --checkpoint-every "$K" --log-every 1 --csv "$csv" --resume \
  >"$T/missing.log" 2>&1 || fail "--resume without a CSV failed: $(cat "$T/missing.log")"
[ "$(cat "$csv" 2>/dev/null)" = "$(head -n 1 "$T/ref.csv")" ] ||
  fail "--resume without a CSV: not the header alone: $(head -c 200 "$csv" 2>/dev/null)"

# --resume past --iters: nothing to train, said so (not "trained -10 iterations")
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters $((N - 10)) \
  --checkpoint "$ck" --log-every 1 --resume >"$T/past.log" 2>&1 ||
  fail "--resume past --iters failed: $(cat "$T/past.log")"
grep -q "already at iteration $N >= --iters $((N - 10)): nothing to train" "$T/past.log" ||
  fail "--resume past --iters: $(tail -n 2 "$T/past.log")"
grep -q "trained -" "$T/past.log" && fail "--resume past --iters: a negative count"

echo "$KILLS kills, $fails failures"
[ "$fails" -eq 0 ]
