#!/bin/sh
# train_paths_test.sh: `train`'s output paths are checked before the first iteration,
# not at the first save: each bad --checkpoint / --csv below, on a run of 100000
# iterations that saves only at its end, must fail within seconds, naming the flag and
# the path, without training a step; a good pair of paths still trains.
#   a checkpoint in a folder that does not exist; a CSV there; the checkpoint equal to
#   the CSV; the checkpoint equal to --train-db (same LMDB) or to --init; the CSV an
#   LMDB folder; the checkpoint an existing regular file; the CSV's curves (.svg) the
#   --init file.
#
# usage: train_paths_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_paths_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 256 --out-train "$T/db" \
  --out-val "$T/val" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
cp "$INIT" "$T/init.pbtxt"
echo "not a checkpoint" >"$T/afile"
# bad CASE WANT FLAGS...: refused within 20 s, before iteration 1, the message has WANT
bad() {
  b_case=$1 b_want=$2
  shift 2
  timeout 20 "$DM" train --init "$T/init.pbtxt" --net "$NET" --train-db "$T/db" \
    --iters 100000 --threads 1 "$@" >"$T/out.log" 2>&1
  b_rc=$?
  [ "$b_rc" = 124 ] && { fail "$b_case: not refused before training (still running after 20 s)"; return; }
  [ "$b_rc" = 0 ] && fail "$b_case: exited 0"
  grep -q "iter 1/" "$T/out.log" && fail "$b_case: trained before refusing"
  grep -q -- "$b_want" "$T/out.log" || fail "$b_case: no '$b_want' in: $(tail -3 "$T/out.log")"
  echo "$b_case: refused ($(grep -m1 demitasse "$T/out.log"))"
}
bad "checkpoint folder missing" "its folder '$T/nodir'" --checkpoint "$T/nodir/ck"
bad "csv folder missing" "its folder '$T/nodir'" --csv "$T/nodir/m.csv"
bad "checkpoint = csv" "same path" --checkpoint "$T/out" --csv "$T/out"
bad "checkpoint = --train-db" "'$T/db' is the same file as --train-db" --checkpoint "$T/db"
bad "checkpoint = --train-db, spelt otherwise" "is the same file as --train-db" --checkpoint "$T/./db/"
bad "checkpoint = --init" "is the same file as --init" --checkpoint "$T/init.pbtxt"
bad "csv an LMDB" "is a folder (an LMDB" --csv "$T/val"
bad "checkpoint a regular file" "is a file, not a checkpoint" --checkpoint "$T/afile"
bad "csv = --init" "is the same file as --init" --csv "$T/init.pbtxt"
cp "$INIT" "$T/init.svg"
bad "curves = --init" "plot '$T/init.svg' is the same file as --init" --csv "$T/init.csv" \
  --init "$T/init.svg"
"$DM" train --init "$T/init.pbtxt" --net "$NET" --train-db "$T/db" --iters 2 --threads 1 \
  --checkpoint "$T/ck" --csv "$T/m.csv" >"$T/good.log" 2>&1 || fail "good paths: $(tail -3 "$T/good.log")"
[ -f "$T/ck/data.mdb" ] && [ -f "$T/m.csv" ] || fail "good paths: no checkpoint or CSV written"
[ "$fails" = 0 ] && echo "all output path checks passed"
exit $((fails > 0))
