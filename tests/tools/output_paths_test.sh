#!/bin/sh
# output_paths_test.sh: writers own only what they write (issue 23, item 2). What sits at
# an output path decides how it is written:
#   - a character device is written in place: a node of /dev/full's device (made here
#     with mknod, so a regression cannot replace the system's /dev/full; that part is
#     skipped without the right to mknod) makes every writer fail with "disk full" and
#     stays a character device;
#   - a symlink is followed: its target (in another folder, through a relative link and
#     a chain of two) gets the new bytes and the link stays a link; a dangling link
#     creates its target; no temporary file is left in either folder;
#   - a FIFO's reader gets the data (convert, and run --output through stdio);
#   - an output that is the same file (st_dev, st_ino) as an input of the command is
#     refused before anything runs, naming both, and the input stays byte-identical:
#     train --csv/--save-init/--save-net/--checkpoint on its --init, --net or --train-db,
#     export-onnx -o NET, run --output on its --input, convert IN IN, rewrite NET -o NET,
#     inspect --dot NET, init-net -o on its --for; through a symlink and a hard link too.
#
# usage: output_paths_test.sh DEMITASSE SQUEEZENET.pb IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
DM=$1 SQ=$2 IMAGES=$3 LABELS=$4 INIT=$5 NET=$6
for f in "$SQ" "$IMAGES" "$LABELS" "$INIT" "$NET"; do
  [ -r "$f" ] || { echo "missing $f: skipped"; exit 77; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_outpaths_XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_lib.sh"

cat >"$T/fill.pbtxt" <<'NET'
name: "fill"
op { type: "ConstantFill" output: "y" arg { name: "shape" ints: 4096 } arg { name: "value" f: 1 } }
external_output: "y"
NET
cat >"$T/relu.pbtxt" <<'NET'
name: "relu"
op { type: "Relu" input: "x" output: "y" }
external_input: "x"
external_output: "y"
NET
"$DM" convert "$SQ" "$T/sq.pbtxt" >/dev/null 2>&1 || { echo "convert failed"; exit 1; }
"$DM" run --net "$T/fill.pbtxt" --output "y=$T/in.npy" >/dev/null 2>&1 || { echo "run failed"; exit 1; }
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 1000 --out-train "$T/db" \
  --out-val "$T/val_db" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
cp "$INIT" "$T/init.pbtxt"
cp "$NET" "$T/train.pbtxt"
no_temps() { # no_temps DIR WHAT
  checks=$((checks + 1))
  left=$(ls -a "$1" | grep '\.tmp\.')
  [ -z "$left" ] || fail "$2: temporary files left in $1: $left"
}

# --- a character device: written in place, "disk full", still a device
if mknod "$T/full" c 1 7 2>/dev/null; then
  full() { # full WHAT CMD...: fails, says disk full, leaves the node a character device
  what=$1
  shift
  expect 1 "$@" && has err "disk full"
  checks=$((checks + 1))
  [ -c "$T/full" ] || { fail "$what: $T/full is no longer a character device"; rm -f "$T/full";
    mknod "$T/full" c 1 7; }
  }
  full convert "$DM" convert "$SQ" "$T/full"
  full "rewrite -o" "$DM" rewrite --grad --loss loss "$T/train.pbtxt" -o "$T/full"
  full "run --output" "$DM" run --net "$T/fill.pbtxt" --output "y=$T/full"
  full "inspect --dot" "$DM" inspect "$SQ" --dot "$T/full"
  full "export-onnx -o" "$DM" export-onnx --net "$T/relu.pbtxt" -o "$T/full"
  full "train --csv" "$DM" train --init "$T/init.pbtxt" --net "$T/train.pbtxt" \
    --train-db "$T/db" --iters 1 --csv "$T/full"
  full "train --save-net" "$DM" train --init "$T/init.pbtxt" --net "$T/train.pbtxt" \
    --iters 0 --save-net "$T/full"
  no_temps "$T" "a device"
else
  echo "cannot mknod (not root?): the character-device cases are skipped"
fi

# --- symlinks: the target is replaced, the link stays
mkdir "$T/real" "$T/links"
printf 'name: "old"\n' >"$T/real/net.pbtxt"
ln -s ../real/net.pbtxt "$T/links/net.pbtxt"
ln -s net.pbtxt "$T/links/chain.pbtxt"
expect 0 "$DM" convert "$SQ" "$T/links/chain.pbtxt"
checks=$((checks + 2))
[ -L "$T/links/chain.pbtxt" ] && [ -L "$T/links/net.pbtxt" ] || fail "symlink: a link was replaced"
cmp -s "$T/sq.pbtxt" "$T/real/net.pbtxt" || fail "symlink: the target does not hold the new net"
ln -s ../real/new.dot "$T/links/dangling.dot"
expect 0 "$DM" inspect "$SQ" --dot "$T/links/dangling.dot"
checks=$((checks + 2))
[ -L "$T/links/dangling.dot" ] || fail "dangling symlink: replaced by a file"
grep -q digraph "$T/real/new.dot" 2>/dev/null || fail "dangling symlink: its target was not written"
ln -s ../real/out.npy "$T/links/out.npy"
expect 0 "$DM" run --net "$T/fill.pbtxt" --output "y=$T/links/out.npy"
checks=$((checks + 2))
[ -L "$T/links/out.npy" ] || fail "run --output via a symlink: replaced by a file"
cmp -s "$T/in.npy" "$T/real/out.npy" || fail "run --output via a symlink: wrong target contents"
no_temps "$T/real" symlink
no_temps "$T/links" symlink

# --- a FIFO: its reader gets the data (a reader that never comes would hang the
# writer, so every side runs under a timeout)
mkfifo "$T/fifo"
timeout 60 cat "$T/fifo" >"$T/fifo.got" &
reader=$!
expect 0 timeout 60 "$DM" convert "$SQ" "$T/fifo"
wait $reader
checks=$((checks + 2))
cmp -s "$SQ" "$T/fifo.got" || fail "FIFO: the reader got $(wc -c <"$T/fifo.got") bytes, not the net (binary: no .pbtxt)"
[ -p "$T/fifo" ] || fail "FIFO: no longer a FIFO"
timeout 60 cat "$T/fifo" >"$T/fifo.npy" &
reader=$!
expect 0 timeout 60 "$DM" run --net "$T/fill.pbtxt" --output "y=$T/fifo"
wait $reader
checks=$((checks + 1))
cmp -s "$T/in.npy" "$T/fifo.npy" || fail "FIFO: run --output's reader got other bytes"
no_temps "$T" FIFO

# --- an output that is an input: refused, naming both; the input unchanged
same() { # same FILE OUT_FLAG IN_FLAG CMD...: refused and FILE byte-identical after
  file=$1 oflag=$2 iflag=$3
  shift 3
  cp "$file" "$T/before"
  expect 1 "$@" && {
    has err "is the same file as"
    has err "$oflag '"
    has err "$iflag '"
    has err "nothing was written or run"
  }
  checks=$((checks + 1))
  cmp -s "$T/before" "$file" || fail "$oflag = $iflag: the input was changed: $*"
}
TR="$DM train --init $T/init.pbtxt --net $T/train.pbtxt --train-db $T/db --iters 2"
same "$T/init.pbtxt" --csv --init $TR --csv "$T/init.pbtxt"
same "$T/train.pbtxt" --csv --net $TR --csv "$T/train.pbtxt"
same "$T/init.pbtxt" --save-init --init $TR --save-init "$T/init.pbtxt"
same "$T/train.pbtxt" --save-net --net "$DM" train --init "$T/init.pbtxt" \
  --net "$T/train.pbtxt" --iters 0 --save-net "$T/train.pbtxt"
same "$T/init.pbtxt" --checkpoint --init $TR --checkpoint "$T/init.pbtxt"
same "$T/db/data.mdb" --checkpoint --train-db $TR --checkpoint "$T/db"
# the CSV's plot goes beside it: init.csv's is init.svg
cp "$T/init.pbtxt" "$T/init.svg"
same "$T/init.svg" "--csv's plot" --init "$DM" train --init "$T/init.svg" \
  --net "$T/train.pbtxt" --train-db "$T/db" --iters 2 --csv "$T/init.csv"
# through a symlink and a hard link: the same file under another name
ln -s init.pbtxt "$T/init_link.pbtxt"
ln "$T/init.pbtxt" "$T/init_hard.pbtxt"
same "$T/init.pbtxt" --csv --init $TR --csv "$T/init_link.pbtxt"
same "$T/init.pbtxt" --save-init --init $TR --save-init "$T/init_hard.pbtxt"
same "$T/relu.pbtxt" -o --net "$DM" export-onnx --net "$T/relu.pbtxt" -o "$T/relu.pbtxt"
same "$T/in.npy" --output --input "$DM" run --net "$T/relu.pbtxt" --input "x=$T/in.npy" \
  --output "y=$T/in.npy"
same "$T/sq.pbtxt" OUT IN "$DM" convert "$T/sq.pbtxt" "$T/sq.pbtxt"
same "$T/train.pbtxt" -o NET "$DM" rewrite --grad --loss loss "$T/train.pbtxt" -o "$T/train.pbtxt"
same "$T/sq.pbtxt" --dot NET "$DM" inspect "$T/sq.pbtxt" --dot "$T/sq.pbtxt"
cp "$(dirname "$SQ")/squeezenet_out_channels.txt" "$T/oc.txt"
same "$T/sq.pbtxt" -o --for "$DM" init-net --for "$T/sq.pbtxt" --input data=1,3,227,227 \
  --out-channels "$T/oc.txt" -o "$T/sq.pbtxt"
# other files are still written: the refusal is about the same file only
expect 0 $TR --csv "$T/m.csv" --save-init "$T/si.pbtxt" && has m.csv "iter,loss"

cli_summary
