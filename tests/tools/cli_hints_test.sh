#!/bin/sh
# cli_hints_test.sh: errors that say what to do (issue 12, Deliver 6 and the small items
# of point 9). Each case is a mistake a new user made, and the check is that the message
# names the fix: rewrite --fp16 without --grad (an inference net, and a note), a shape written 1x3x227x227, inspect
# --input without the weights' shapes, train without --train-db, a float64 or int64 .npy,
# the same --input twice (run, inspect, init-net), a FIFO as an input (no hang), a 0-byte
# net, and output to a full device (/dev/full) reported as "disk full" with exit 1.
#
# usage: cli_hints_test.sh DEMITASSE SOURCE_ROOT
set -u
DM=$1
SRC=$2
case $DM in /*) ;; *) DM=$(pwd)/$DM ;; esac # the train case runs in another folder
case $SRC in /*) ;; *) SRC=$(pwd)/$SRC ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_hints_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

EX=$SRC/models/example
SQ=$SRC/tests/data/squeezenet_predict_net.pb
TABLE=$SRC/tests/data/squeezenet_out_channels.txt
MN=$SRC/models/mnist

# rewrite --fp16 without --grad paints an inference net (as run --precision does) and
# tells a user who meant the training net that it needs --grad
expect 0 "$DM" rewrite --fp16 "$MN/lenet_train.pbtxt" && has err "no --grad: painting an inference net" &&
  has err "add --grad --loss LOSS"
expect 2 "$DM" rewrite --optimizer momentum "$MN/lenet_train.pbtxt" &&
  has err "--optimizer needs --grad"

# shapes with x instead of commas
expect 1 "$DM" inspect "$SQ" --input data=1x3x227x227 --out-channels "$TABLE" &&
  has err "separate the dimensions with commas, as in data=1,3,227,227"
expect 1 "$DM" init-net --for "$SQ" --input data=1X3X227X227 --out-channels "$TABLE" -o "$T/i.pb" &&
  has err "separate the dimensions with commas"

# inspect --input without --init or --out-channels: which flags give the weights' shapes
expect 1 "$DM" inspect "$SQ" --input data=1,3,227,227 && has err "op 0 (Conv)" &&
  has err "weight 'conv1_w' has no known shape" && has err "--init" && has err "--out-channels"

# train without --train-db when the net's own DB is not there
(cd "$T" && "$DM" train --init "$MN/lenet_init.pbtxt" --net "$MN/lenet_train.pbtxt" --iters 1 \
  >out 2>err)
rc=$?
checks=$((checks + 1))
[ $rc -eq 1 ] || fail "train without its DB exited $rc, not 1"
has err "reads db 'mnist_train_lmdb', which does not exist" && has err "give --train-db DIR" &&
  has err "demitasse make-db"

# a .npy of float64 (and of int64) where the net wants float32: the NumPy fix
npy() { # npy FILE DESCR: a (1, 4) array of zeros with the given descr, 8-byte elements
  h="{'descr': '$2', 'fortran_order': False, 'shape': (1, 4), }"
  h=$(printf '%-117s' "$h") # NumPy pads to a 64-byte boundary: 10 + 117 + '\n' = 128
  { printf '\223NUMPY\001\000\166\000'; printf '%s\n' "$h"; head -c 32 /dev/zero; } >"$1"
}
npy "$T/x64.npy" '<f8'
npy "$T/xi64.npy" '<i8'
expect 1 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
  --input "data=$T/x64.npy" && has err "(X is blob 'data'" && has err "x.astype(np.float32)" &&
  has err "float64"
expect 1 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
  --input "data=$T/xi64.npy" && has err "blob 'data' is INT64" && has err "x.astype(np.float32)"

# the same --input twice is refused, naming the blob (keeping the last would hide a typo)
expect 2 "$DM" run --net "$EX/predict_net.pbtxt" --input "data=$EX/input.npy" \
  --input "data=$T/x64.npy" && has err "--input 'data' is given twice"
expect 1 "$DM" inspect "$SQ" --input data=1,3,227,227 --input data=2,3,227,227 \
  --out-channels "$TABLE" && has err "--input 'data' is given twice"
expect 1 "$DM" init-net --for "$SQ" --input data=1,3,227,227 --input data=1,3,227,227 \
  --out-channels "$TABLE" -o "$T/i.pb" && has err "--input 'data' is given twice"

# a FIFO as an input: refused at once instead of waiting for a writer forever
if mkfifo "$T/fifo.npy" 2>/dev/null && command -v timeout >/dev/null 2>&1; then
  expect 1 timeout 20 "$DM" run --init "$EX/init_net.pbtxt" --net "$EX/predict_net.pbtxt" \
    --input "data=$T/fifo.npy" && has err "is a FIFO (named pipe)" && has err "regular file"
else
  echo "note: no mkfifo or timeout; the FIFO case is not checked"
fi

# a 0-byte net is an error, not an empty net
: >"$T/empty.pb"
expect 1 "$DM" run --net "$T/empty.pb" && has err "empty.pb: empty (0 bytes)"
expect 1 "$DM" inspect "$T/empty.pb" && has err "empty (0 bytes)"
: >"$T/empty.pbtxt"
expect 1 "$DM" convert "$T/empty.pbtxt" "$T/e.pb" && has err "empty (0 bytes)"

# stdout on a full device: exit 1 and "disk full", also when the output fits stdio's buffer
if [ -w /dev/full ]; then
  checks=$((checks + 1))
  "$DM" inspect "$EX/predict_net.pbtxt" >/dev/full 2>"$T/err"
  [ $? -eq 1 ] || fail "inspect > /dev/full did not exit 1"
  has err "writing to standard output failed: disk full"
  checks=$((checks + 1))
  "$DM" rewrite --grad --loss loss "$MN/lenet_train.pbtxt" >/dev/full 2>"$T/err"
  [ $? -eq 1 ] || fail "rewrite > /dev/full did not exit 1"
  has err "disk full"
  count err "standard output" 1
  checks=$((checks + 1))
  "$DM" convert "$SQ" - >/dev/full 2>"$T/err"
  [ $? -eq 1 ] || fail "convert - > /dev/full did not exit 1"
  has err "disk full"
  count err "standard output" 1
else
  echo "note: no /dev/full; the stdout cases are not checked"
fi

cli_summary
