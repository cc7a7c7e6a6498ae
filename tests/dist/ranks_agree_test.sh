#!/bin/sh
# ranks_agree_test.sh: data-parallel ranks that disagree on what they train are refused
# at the start, on every rank, naming the ranks and what differs: another batch size,
# another net with the same parameters (average instead of max pooling), other --iters,
# another precision. Ranks that agree train. Each job is two app contexts of one mpirun
# (`-np 1 A : -np 1 B`), so rank 0 runs A and rank 1 runs B.
#
# usage: ranks_agree_test.sh MPIRUN_SH DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
MPI=$1 DM=$2 IMAGES=$3 LABELS=$4 INIT=$5 NET=$6
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: skipped"; exit 77; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_agree_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 512 --out-train "$T/train_db" \
  --out-val "$T/val_db" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
sed 's/\(name: "batch_size" i:\) 64/\1 32/' "$NET" >"$T/net32.pbtxt"
sed 's/"MaxPool"/"AveragePool"/' "$T/net32.pbtxt" >"$T/avg32.pbtxt"
cmp -s "$T/net32.pbtxt" "$T/avg32.pbtxt" && { echo "FAIL: no MaxPool in $NET"; exit 1; }
run() { # run NET_A ITERS_A FLAGS_A NET_B ITERS_B FLAGS_B
  # shellcheck disable=SC2086
  timeout 120 sh "$MPI" 1 "$DM" train --init "$INIT" --net "$1" --train-db "$T/train_db" \
    --iters "$2" --threads 1 --data-parallel --dp-timeout 60 $3 \
    : -np 1 "$DM" train --init "$INIT" --net "$4" --train-db "$T/train_db" \
    --iters "$5" --threads 1 --data-parallel --dp-timeout 60 $6 >"$T/out.log" 2>&1
}
# refused CASE WHAT: the job failed, each rank said the ranks differ in WHAT
refused() {
  rc=$1 case=$2 what=$3
  [ "$rc" = 0 ] && fail "$case: the job exited 0"
  [ "$rc" = 124 ] && fail "$case: the job hung"
  n=$(grep -c "ranks differ in what they train.*$what.*rank 0 .*rank 1 " "$T/out.log")
  # every rank computes the same verdict; the first to abort may kill the other before
  # it prints, so one message naming both ranks is required, not two
  [ "$n" -ge 1 ] || fail "$case: $n rank(s) named '$what' with both ranks: $(tail -6 "$T/out.log")"
  grep -q "iter 1/" "$T/out.log" && fail "$case: a rank trained"
  echo "$case: refused on both ranks"
}
run "$T/net32.pbtxt" 4 "" "$NET" 4 ""
refused $? "batch 32 against 64" "batch size"
run "$T/net32.pbtxt" 4 "" "$T/avg32.pbtxt" 4 ""
refused $? "MaxPool against AveragePool" "the training net"
run "$T/net32.pbtxt" 4 "" "$T/net32.pbtxt" 6 ""
refused $? "--iters 4 against 6" "--iters"
run "$T/net32.pbtxt" 4 "--fp16" "$T/net32.pbtxt" 4 ""
refused $? "--fp16 on one rank" "precision"
# agreeing ranks train (each rank may name its own --train-db: not in the fingerprint)
cp -r "$T/train_db" "$T/train_db2"
timeout 120 sh "$MPI" 1 "$DM" train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/train_db" \
  --iters 4 --threads 1 --data-parallel --dp-timeout 60 \
  : -np 1 "$DM" train --init "$INIT" --net "$T/net32.pbtxt" --train-db "$T/train_db2" \
  --iters 4 --threads 1 --data-parallel --dp-timeout 60 >"$T/out.log" 2>&1 ||
  fail "agreeing ranks: $(tail -5 "$T/out.log")"
[ "$fails" = 0 ] && echo "all rank agreement checks passed"
exit $((fails > 0))
