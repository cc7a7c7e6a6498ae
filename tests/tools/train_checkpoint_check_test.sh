#!/bin/sh
# train_checkpoint_check_test.sh: `demitasse train --resume` refuses a checkpoint it
# cannot trust, naming the checkpoint and the blob, instead of training on garbage or
# blaming the op that later trips over it (issue 12):
#   (a) bytes flipped inside a blob's values in data.mdb (LMDB still opens it): the
#       record's checksum no longer matches;
#   (b) a blob whose shape differs from the init net's (conv1_w 20x1x3x3, not 20x1x5x5);
#   (c) a blob whose dtype differs (conv1_b DOUBLE, not FLOAT);
# (b) and (c) are written by `demitasse run` with Load (load_all) and Save
# (blob_name_overrides), as another model's checkpoint would be. An intact checkpoint
# still resumes.
#
# usage: train_checkpoint_check_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
# (exit 77: skipped, a prerequisite is missing)
set -u
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
. "$(dirname "$0")/train_test_lib.sh"
train_test_setup ckpt_check 500
printf 'x' | LC_ALL=C grep -qaP 'x' 2>/dev/null || { echo "no grep -P: skipped"; exit 77; }

train() { # train CKPT ITERS LOG [flags]
  t_ck=$1 t_n=$2 t_log=$3
  shift 3
  "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$t_n" \
    --checkpoint "$t_ck" --log-every 1000 "$@" >"$t_log" 2>&1
}
# expect_refused LOG WHAT FRAGMENT...: the run failed and its error holds each fragment
expect_refused() {
  e_log=$1 e_what=$2
  shift 2
  echo "$e_what: $(grep 'demitasse:' "$e_log")"
  clean_exit "$e_log" "$e_what"
  for frag in "$@"; do
    grep -qF -- "$frag" "$e_log" || { fail "$e_what: no '$frag' in the error:"; tail -n 3 "$e_log"; }
  done
}

mkdir "$T/a" "$T/b"
train "$T/a/ck" 2 "$T/first.log" || { cat "$T/first.log"; exit 1; }
cp -a "$T/a/." "$T/b/" # the link and its version directory: a second checkpoint

# (a) a byte of conv2_w's values flipped (100 KB of floats follow its record's header)
mdb="$T/b/ck/data.mdb"
at=$(LC_ALL=C grep -obUaP 'conv2_w\x12\x06Tensor' "$mdb" | head -n 1 | cut -d: -f1)
if [ -z "$at" ]; then
  fail "conv2_w's record not found in $mdb"
else
  off=$((at + 5000))
  byte=$(od -An -tu1 -j "$off" -N1 "$mdb" | tr -d ' ')
  # shellcheck disable=SC2059  # an octal escape made here
  printf "\\$(printf '%03o' $((byte ^ 0x5a)))" | dd of="$mdb" bs=1 seek="$off" conv=notrunc 2>/dev/null
  cmp -s "$T/a/ck/data.mdb" "$mdb" && fail "the flip changed nothing"
  train "$T/b/ck" 4 "$T/corrupt.log" --resume
  [ $? -ne 0 ] || fail "a corrupted checkpoint was resumed from"
  expect_refused "$T/corrupt.log" "corrupted checkpoint" "$T/b/ck" "blob 'conv2_w'" "corrupted"
fi

# (b), (c): checkpoints whose blobs differ from the init net's
"$DM" rewrite --grad --loss loss --optimizer momentum --init-out "$T/optim_init.pbtxt" \
  -o "$T/rewritten.pbtxt" "$NET" >"$T/rewrite.log" 2>&1 || { cat "$T/rewrite.log"; exit 1; }
BLOBS=$(cat "$INIT" "$T/optim_init.pbtxt" | sed -n 's/.*output: *"\([^"]*\)".*/\1/p' | sort -u)
# forge NAME BLOB FILL: the checkpoint $T/NAME with BLOB replaced by the ConstantFill FILL
forge() {
  {
    echo "name: \"forge\""
    echo "op { type: \"Load\" arg { name: \"db\" s: \"$T/a/ck\" } arg { name: \"load_all\" i: 1 } }"
    echo "op { output: \"forged\" type: \"ConstantFill\" $3 }"
    printf 'op { type: "Save"'
    for b in $BLOBS; do
      if [ "$b" = "$2" ]; then printf ' input: "forged"'; else printf ' input: "%s"' "$b"; fi
    done
    printf ' arg { name: "db" s: "%s" } arg { name: "blob_name_overrides"' "$T/$1"
    for b in $BLOBS; do printf ' strings: "%s"' "$b"; done
    echo ' } }'
  } >"$T/forge_$1.pbtxt"
  "$DM" run --net "$T/forge_$1.pbtxt" >"$T/forge_$1.log" 2>&1 || { cat "$T/forge_$1.log"; exit 1; }
}
forge shape conv1_w 'arg { name: "shape" ints: [20, 1, 3, 3] }'
train "$T/shape" 4 "$T/shape.log" --resume
[ $? -ne 0 ] || fail "a checkpoint with another conv1_w shape was resumed from"
expect_refused "$T/shape.log" "shape" "checkpoint '$T/shape'" "blob 'conv1_w'" "20x1x3x3" \
  "20x1x5x5"
forge dtype conv1_b 'arg { name: "shape" ints: 20 } arg { name: "dtype" i: 13 }'
train "$T/dtype" 4 "$T/dtype.log" --resume
[ $? -ne 0 ] || fail "a checkpoint with a DOUBLE conv1_b was resumed from"
expect_refused "$T/dtype.log" "dtype" "checkpoint '$T/dtype'" "blob 'conv1_b'" "DOUBLE 20" \
  "FLOAT 20"

# the intact checkpoint resumes
train "$T/a/ck" 4 "$T/good.log" --resume || { fail "the intact checkpoint did not resume"; cat "$T/good.log"; }

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
