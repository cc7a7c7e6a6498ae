#!/bin/sh
# atomic_write_test.sh: every file the CLI writes replaces the old one atomically, and a
# full disk says "disk full" (issue 12, item 2). Each writer runs against a tiny tmpfs
# filled to the brim (in a private mount namespace: `unshare -m`, which needs root or
# user namespaces; exit 77 without it) and must then fail with "disk full", leave the
# old file byte-identical and leave no temporary file (*.tmp.*) behind:
#   convert (a net), inspect --dot, run --output (.npy), train --csv (the CSV, then the
#   SVG beside it, with room for the CSV but not the SVG), rewrite -o and --init-out,
#   init-net -o, train --save-net/--save-init, make-db and make-db --text (no
#   half-written DB, whether the records or vocab.txt find no room).
# A last case checks that the same writers still replace files when there is room.
#
# usage: atomic_write_test.sh DEMITASSE SQUEEZENET.pb IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
if [ -z "${DM_ATOMIC_NS:-}" ]; then
  command -v unshare >/dev/null 2>&1 || { echo "no unshare: skipped"; exit 77; }
  unshare -m sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d" && rmdir "$d"' \
    >/dev/null 2>&1 || { echo "cannot mount a tmpfs in a private namespace: skipped"; exit 77; }
  DM_ATOMIC_NS=1 exec unshare -m sh "$0" "$@"
fi
DM=$1 SQ=$2 IMAGES=$3 LABELS=$4 INIT=$5 NET=$6
for f in "$SQ" "$IMAGES" "$LABELS" "$INIT" "$NET"; do
  [ -r "$f" ] || { echo "missing $f: skipped"; exit 77; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/dm_atomic_XXXXXX") || exit 1
M=$T/full
mkdir "$M" && mount -t tmpfs -o size=16m,mode=0755 tmpfs "$M" || { echo "mount failed"; exit 1; }
trap 'umount "$M" 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# fill [PAGES]: the tmpfs full but for PAGES pages (default none)
fill() {
  rm -f "$M/fill"
  dd if=/dev/zero of="$M/fill" bs=4096 >/dev/null 2>&1
  [ "${1:-0}" -gt 0 ] && truncate -s "-$((4096 * $1))" "$M/fill"
  return 0
}
no_temps() {
  left=$(ls -a "$M" | grep '\.tmp\.')
  [ -z "$left" ] || fail "$1: temporary files left: $left"
}
# check NAME RC OLD_COPY FILE: failed (nonzero), said "disk full", FILE unchanged, no temps
check() {
  [ "$2" -ne 0 ] || fail "$1: succeeded on a full disk"
  grep -q "disk full" "$T/err" || { fail "$1: no \"disk full\" in:"; cat "$T/err"; }
  cmp -s "$3" "$4" || fail "$1: the old file was changed ($(wc -c <"$4") bytes now)"
  no_temps "$1"
}

# the old files (on the tmpfs) and copies of them (elsewhere)
"$DM" convert "$SQ" "$T/sq.pbtxt" >/dev/null 2>&1 || { echo "convert failed"; exit 1; }
# (smaller than the new ones: overwriting in place frees their pages, and must still fail)
printf 'name: "old"\n' >"$M/net.pbtxt"
printf 'digraph old {}\n' >"$M/graph.dot"
head -c 20000 /dev/urandom >"$M/out.npy"
printf 'iter,loss\n1,2\n' >"$M/m.csv"
printf '<svg>old</svg>\n' >"$M/m.svg"
for f in net.pbtxt graph.dot out.npy m.csv m.svg; do cp "$M/$f" "$T/old.$f"; done

# convert
fill
"$DM" convert "$SQ" "$M/net.pbtxt" >/dev/null 2>"$T/err"
check convert $? "$T/old.net.pbtxt" "$M/net.pbtxt"

# inspect --dot
fill
"$DM" inspect "$SQ" --dot "$M/graph.dot" >/dev/null 2>"$T/err"
check "inspect --dot" $? "$T/old.graph.dot" "$M/graph.dot"

# run --output: 64 KiB of ones
cat >"$T/fill.pbtxt" <<'NET'
name: "fill"
op { type: "ConstantFill" output: "y" arg { name: "shape" ints: 16384 } arg { name: "value" f: 1 } }
external_output: "y"
NET
fill
"$DM" run --net "$T/fill.pbtxt" --output "y=$M/out.npy" >/dev/null 2>"$T/err"
check "run --output" $? "$T/old.out.npy" "$M/out.npy"

# train --csv: no room for the CSV
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 1000 --out-train "$T/train_db" \
  --out-val "$T/val_db" >"$T/make_db.log" 2>&1 || { cat "$T/make_db.log"; exit 1; }
train() {
  "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters 2 --log-every 1 \
    --csv "$M/m.csv" >/dev/null 2>"$T/err"
}
fill
train
check "train --csv (the CSV)" $? "$T/old.m.csv" "$M/m.csv"
cmp -s "$T/old.m.svg" "$M/m.svg" || fail "train --csv: the SVG was changed with the CSV"
# room for the new CSV (one page; the old one is emptied so that it frees none) but not
# for the SVG
: >"$M/m.csv"
fill 1
train
check "train --csv (the SVG)" $? "$T/old.m.svg" "$M/m.svg"
head -n 1 "$M/m.csv" | grep -q '^iter,loss,accuracy' || fail "train --csv: no new CSV header"

# the other net writers: rewrite -o and --init-out, init-net -o, train --save-net/--save-init
for f in rw.pbtxt rw_init.pbtxt in.pb sn.pbtxt si.pbtxt; do
  printf 'name: "old"\n' >"$M/$f"
  cp "$M/$f" "$T/old.$f"
done
fill
"$DM" rewrite --grad --loss loss "$NET" -o "$M/rw.pbtxt" >/dev/null 2>"$T/err"
check "rewrite -o" $? "$T/old.rw.pbtxt" "$M/rw.pbtxt"
"$DM" rewrite --grad --loss loss --optimizer momentum "$NET" -o "$T/rw_room.pbtxt" \
  --init-out "$M/rw_init.pbtxt" >/dev/null 2>"$T/err"
check "rewrite --init-out" $? "$T/old.rw_init.pbtxt" "$M/rw_init.pbtxt"
"$DM" init-net --for "$SQ" --input data=1,3,227,227 \
  --out-channels "$(dirname "$SQ")/squeezenet_out_channels.txt" -o "$M/in.pb" >/dev/null 2>"$T/err"
check "init-net -o" $? "$T/old.in.pb" "$M/in.pb"
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters 0 \
  --save-net "$M/sn.pbtxt" --save-init "$T/si_room.pbtxt" >/dev/null 2>"$T/err"
check "train --save-net" $? "$T/old.sn.pbtxt" "$M/sn.pbtxt"
"$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters 0 \
  --save-net "$T/sn_room.pbtxt" --save-init "$M/si.pbtxt" >/dev/null 2>"$T/err"
check "train --save-init" $? "$T/old.si.pbtxt" "$M/si.pbtxt"
rm -f "$M/rw.pbtxt" "$M/rw_init.pbtxt" "$M/in.pb" "$M/sn.pbtxt" "$M/si.pbtxt"

# make-db: no half-written DB, and none in the way of the next try
fill
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 10000 --out-train "$M/db" \
  >/dev/null 2>"$T/err"
rc=$?
[ $rc -ne 0 ] || fail "make-db: succeeded on a full disk"
grep -q "disk full" "$T/err" || { fail "make-db: no \"disk full\" in:"; cat "$T/err"; }
[ ! -e "$M/db" ] || fail "make-db: a half-written DB was left: $(ls "$M/db")"
no_temps make-db

# make-db --text: with the disk full but for 1 to 24 pages, the lock file (16 pages), the
# records, then vocab.txt find room in turn (19 pages leave none for vocab.txt on Linux's
# tmpfs); each try succeeds whole or fails whole, saying "disk full"
printf 'a short text, small enough for the disk, with its vocabulary.\n' >"$T/small.txt"
ok=0 refusals=0
for pages in $(seq 1 24); do
  fill "$pages"
  if "$DM" make-db --text "$T/small.txt" --context 4 --val-fraction 0 --out-train "$M/tdb" \
    >/dev/null 2>"$T/err"; then
    [ -f "$M/tdb/data.mdb" ] && [ -f "$M/tdb/vocab.txt" ] || fail "make-db --text, $pages pages: a DB without its files"
    rm -rf "$M/tdb"
    ok=$((ok + 1))
  else
    grep -q "disk full" "$T/err" || { fail "make-db --text, $pages pages: no \"disk full\" in:"; cat "$T/err"; }
    [ ! -e "$M/tdb" ] || fail "make-db --text, $pages pages: a half-written DB was left"
    refusals=$((refusals + 1))
  fi
  no_temps "make-db --text, $pages pages"
done
[ $ok -gt 0 ] && [ $refusals -gt 0 ] || fail "make-db --text, 1 to 24 pages: $ok successes, $refusals refusals"

# with room, the same writers replace the files
rm -f "$M/fill" "$M/m.csv" "$M/m.svg"
"$DM" convert "$SQ" "$M/net.pbtxt" >/dev/null 2>"$T/err" || { fail "convert with room"; cat "$T/err"; }
cmp -s "$T/sq.pbtxt" "$M/net.pbtxt" || fail "convert with room: wrong file"
"$DM" run --net "$T/fill.pbtxt" --output "y=$M/out.npy" >/dev/null 2>"$T/err" ||
  { fail "run --output with room"; cat "$T/err"; }
[ "$(wc -c <"$M/out.npy")" -gt 65536 ] || fail "run --output with room: short file"
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 9000 --out-train "$M/db" \
  --out-val "$M/db_val" >/dev/null 2>"$T/err" ||
  { fail "make-db with room"; cat "$T/err"; }
[ -f "$M/db/data.mdb" ] && [ -f "$M/db_val/data.mdb" ] || fail "make-db with room: no DBs"
"$DM" make-db --images "$IMAGES" --labels "$LABELS" --train 10000 --out-train "$M/db" \
  >/dev/null 2>"$T/err" && fail "make-db over an existing DB succeeded"
grep -q "already exists" "$T/err" || { fail "make-db over a DB: no 'already exists'"; cat "$T/err"; }
no_temps "with room"

[ $fails -eq 0 ] && echo "atomic writes: all passed"; [ -n "${DM_ATOMIC_VERBOSE:-}" ] && cat "$T/err"
[ $fails -eq 0 ]
