#!/bin/sh
# train_messages_test.sh: `train`'s refusals that say what is wrong and the fix, each
# failing (exit 1) before or at the start of the run:
#   --accuracy naming a blob no op writes (a typo would report nothing, silently);
#   a --train-db whose data.mdb is empty (once "Bad file descriptor");
#   --resume from an empty --checkpoint folder (once "No such file or directory");
#   a static loss scale past FP16's range (once "overflow FP16 even at a small scale");
#   an error in the rewritten (--fp16) net names the op as written, the rewritten one
#   beside it (once "op 16 (FC)" for LeNet's op 5).
#
# usage: train_messages_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_trainmsg_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 256 --out-train "$T/db" \
  --out-val "$T/val" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
train() { expect 1 "$DM" train --init "$INIT" --net "$NET" --threads 1 "$@"; }

train --train-db "$T/db" --iters 2 --accuracy nothere &&
  { has err "--accuracy 'nothere': no op of the training net"; has err "check the name"; }

mkdir "$T/empty_db" && : >"$T/empty_db/data.mdb"
train --train-db "$T/empty_db" --iters 2 &&
  { has err "data.mdb is empty (0 bytes): not an LMDB"; has err "db '$T/empty_db'"; }

mkdir "$T/ck"
train --train-db "$T/db" --iters 2 --checkpoint "$T/ck" --resume &&
  { has err "--checkpoint '$T/ck' holds no checkpoint to resume from"
    has err "train without --resume"; }

train --train-db "$T/db" --iters 30 --fp16 --loss-scale static --init-scale 1e30 &&
  { has err "the static loss scale 1e+30 is too large: past FP16's largest value"
    has err "--loss-scale dynamic"; }
sed 's/ints: \[500, 800\]/ints: [500, 801]/' "$INIT" >"$T/bad_init.pbtxt"
expect 1 "$DM" train --init "$T/bad_init.pbtxt" --net "$NET" --threads 1 --train-db "$T/db" \
  --iters 2 --fp16 && has err "op 5 (FC) as written (op "
cli_summary
