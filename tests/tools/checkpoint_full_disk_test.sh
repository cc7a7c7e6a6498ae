#!/bin/sh
# checkpoint_full_disk_test.sh: a full disk while `demitasse train` writes a checkpoint
# leaves the old checkpoint intact and says "disk full" (issue 12). LeNet trains 2
# iterations with its checkpoint on a 16 MB tmpfs; the tmpfs is filled to the brim and a
# --resume to 4 iterations must fail naming the full disk, leave the link pointing at
# the same version with byte-identical files, and leave no half-written version behind;
# with room again the same --resume loads that checkpoint and saves the next one.
# Runs in a private mount namespace (`unshare -m`, which needs root or user namespaces;
# exit 77 without it), as atomic_write_test.sh does.
#
# usage: checkpoint_full_disk_test.sh DEMITASSE IMAGES.gz LABELS.gz LENET_INIT LENET_TRAIN
set -u
if [ -z "${DM_CKPT_NS:-}" ]; then
  command -v unshare >/dev/null 2>&1 || { echo "no unshare: skipped"; exit 77; }
  unshare -m sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d" && rmdir "$d"' \
    >/dev/null 2>&1 || { echo "cannot mount a tmpfs in a private namespace: skipped"; exit 77; }
  DM_CKPT_NS=1 exec unshare -m sh "$0" "$@"
fi
DM=$1 IMAGES=$2 LABELS=$3 INIT=$4 NET=$5
. "$(dirname "$0")/train_test_lib.sh"
train_test_setup ckpt_full 500
M=$T/full
mkdir "$M" && mount -t tmpfs -o size=16m,mode=0755 tmpfs "$M" || { echo "mount failed"; exit 1; }
trap 'umount "$M" 2>/dev/null; rm -rf "$T"' EXIT

train() { # train ITERS LOG [flags]
  t_n=$1 t_log=$2
  shift 2
  "$DM" train --init "$INIT" --net "$NET" --train-db "$T/train_db" --iters "$t_n" \
    --checkpoint "$M/ck" --log-every 1000 "$@" >"$t_log" 2>&1
}

train 2 "$T/first.log" || { cat "$T/first.log"; exit 1; }
target=$(readlink "$M/ck")
cp -r "$M/$target" "$T/old"

# full ROOM WHAT: the tmpfs full but for ROOM pages; the save at iteration 4 must fail
full() {
  rm -f "$M/fill"
  dd if=/dev/zero of="$M/fill" bs=4096 >/dev/null 2>&1
  [ "$1" -gt 0 ] && truncate -s "-$((4096 * $1))" "$M/fill"
  train 4 "$T/full.log" --resume
  [ $? -ne 0 ] || fail "$2: a checkpoint was saved on a full disk"
  grep -q "disk full" "$T/full.log" || { fail "$2: no \"disk full\" in:"; tail -n 3 "$T/full.log"; }
  grep -q "Save to '$M/ck'" "$T/full.log" || fail "$2: the error does not name the checkpoint"
  grep -q "resuming at iteration 2" "$T/full.log" || fail "$2: did not resume at iteration 2"
  echo "$2: $(grep 'demitasse:' "$T/full.log")"
  clean_exit "$T/full.log" "$2"
  [ "$(readlink "$M/ck")" = "$target" ] || fail "$2: the link points at $(readlink "$M/ck"), not $target"
  # (data.mdb: lock.mdb is LMDB's reader table, which the --resume's Load writes into)
  cmp -s "$T/old/data.mdb" "$M/$target/data.mdb" || fail "$2: the checkpoint's data.mdb changed"
  left=$(ls "$M" | grep -v -x -e ck -e "$target" -e fill)
  [ -z "$left" ] || fail "$2: left behind: $left"
}
# no room at all, and the checkpoint's lock file gone (so the Load cannot make one)
rm -f "$M/$target/lock.mdb"
full 0 "no room"
# room for the new version's lock file, not for its data
full 40 "room for 40 pages"

# with room, the same checkpoint resumes and the next one is saved
rm -f "$M/fill"
train 4 "$T/room.log" --resume || { fail "--resume with room failed"; cat "$T/room.log"; }
grep -q "resuming at iteration 2" "$T/room.log" || fail "did not resume at iteration 2"
[ "$(readlink "$M/ck")" != "$target" ] || fail "no new checkpoint with room"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
